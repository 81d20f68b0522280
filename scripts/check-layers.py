#!/usr/bin/env python3
"""The layering rules, checked on the sources (the build enforces the first
one too, since each libcommon room sees only the include directories of the
rooms below it; this names the offending line):

1. libcommon's rooms are layered base -> arrow -> net -> profile -> store -> query ->
   pipeline -> shell: a file includes `lc/*.h` only from its own room or a
   room its README lets it call (MAY_CALL, the same lists as
   libcommon/CMakeLists.txt's lc_sees_<room>): the pipeline, above query, may
   not call it.
2. A private header (`*_int.h`) is included only by its own room.
3. services: process is below the roles; a role (ingester, querier, scraper,
   agent) never includes another role's private header, and the ingester
   library does not include the querier at all (the querier may mount on the
   ingester's store through lc/, never the other way round); a binary's
   main.c may name any role's nodes through its public header.
4. tools (ember-load) sit beside the services, not on them: they include
   libcommon (`lc/*.h`), the protobuf-c messages, their own headers, and of the
   services only the scraper's HTTP client (http.h).

Exit 1 with one line per violation."""
import os
import re
import subprocess
import sys

ROOMS = ["base", "arrow", "objstore", "net", "profile", "store", "query", "pipeline", "shell"]
# What each room's README says it may call (besides itself).
MAY_CALL = {
    "base": set(),
    "arrow": {"base"},
    "objstore": {"base"},
    "net": {"base"},
    "profile": {"base", "net"},
    "store": {"base", "objstore", "net", "profile"},
    "query": {"base", "objstore", "net", "profile", "store"},
    "pipeline": {"base", "objstore", "net", "profile", "store"},
    "shell": {"base", "arrow", "objstore", "net", "profile", "store", "query", "pipeline"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def tracked(prefix):
    out = subprocess.run(["git", "ls-files", prefix], capture_output=True, text=True,
                         check=True).stdout.split()
    return [f for f in out if f.endswith((".c", ".h"))]


def lc_header_rooms():
    rooms = {}
    for room in ROOMS:
        d = os.path.join("libcommon", room, "include", "lc")
        for name in os.listdir(d) if os.path.isdir(d) else ():
            rooms[f"lc/{name}"] = room
    return rooms


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for m in INCLUDE.finditer(text):
        yield text.count("\n", 0, m.start()) + 1, m.group(1)


def check_libcommon(header_room, errors):
    for path in tracked("libcommon"):
        room = path.split("/")[1]
        if room not in ROOMS:
            errors.append(f"{path}: not inside a room ({', '.join(ROOMS)})")
            continue
        for line, inc in includes(path):
            seen = header_room.get(inc, room)
            if seen != room and seen not in MAY_CALL[room]:
                errors.append(f"{path}:{line}: room {room} includes {inc} of the room {seen}, "
                              f"which its README does not let it call")
            if inc.endswith("_int.h") and not os.path.exists(os.path.join(os.path.dirname(path), inc)):
                errors.append(f"{path}:{line}: {inc} is another room's private header")


def check_services(errors):
    roles = {"ingester", "querier", "scraper", "agent", "process", "ember"}
    querier_headers = {os.path.basename(f) for f in tracked("services/querier") if f.endswith(".h")}
    for path in tracked("services"):
        role = path.split("/")[1]
        if role not in roles:
            continue
        here = os.path.dirname(path)
        for line, inc in includes(path):
            if inc.endswith("_int.h") and not os.path.exists(os.path.join(here, inc)):
                errors.append(f"{path}:{line}: {inc} is another room's private header")
            # A binary's main.c (services/<role>/main.c) names the nodes it runs and
            # may take them from any role's public header: ember-ingester runs the
            # querier role's shard node. The ingester library itself never may.
            binary = path == f"services/{role}/main.c"
            if role == "ingester" and inc in querier_headers and not binary:
                errors.append(f"{path}:{line}: the ingester includes the querier's {inc}")
            if role == "process" and not inc.startswith("lc/") and \
                    not os.path.exists(os.path.join(here, inc)):
                errors.append(f"{path}:{line}: process (below the roles) includes {inc}")


TOOL_SERVICE_HEADERS = {"http.h"}     # services/scraper/src/http.h, the libcurl client


def check_tools(errors):
    for path in tracked("tools"):
        here = os.path.dirname(path)
        for line, inc in includes(path):
            own = os.path.exists(os.path.join(here, inc)) or \
                os.path.exists(os.path.join(here, "src", inc))
            if own or inc.startswith("lc/") or inc.endswith(".pb-c.h") or \
                    inc in TOOL_SERVICE_HEADERS:
                continue
            errors.append(f"{path}:{line}: a tool includes {inc} (only lc/, protobuf-c "
                          f"messages, its own headers and the scraper's http.h)")


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    errors = []
    check_libcommon(lc_header_rooms(), errors)
    check_services(errors)
    check_tools(errors)
    for e in errors:
        print(e)
    if errors:
        print(f"check-layers: {len(errors)} violation(s); see docs/architecture.md (rooms)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
