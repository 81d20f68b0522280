#!/usr/bin/env python3
"""No circle between the files of one room, read from the build's object files.

Usage: check-circles.py BUILD_DIR

A room is each libcommon/<room> (objects under
BUILD_DIR/libcommon/CMakeFiles/lc_<room>.dir/<room>/src/) and each
services/<svc> (objects under BUILD_DIR/services/<svc>/CMakeFiles/<svc>.dir/src/).
Inside one room, file A depends on file B when A leaves a symbol undefined
that B defines (`nm`). A strongly connected component of two or more files is
a circle: the files cannot be understood, tested or moved one at a time. Each
circle is printed with the symbols on its edges, and the check exits 1.

Object files whose source is gone (a file deleted or renamed since that build
dir last built it) are left out when BUILD_DIR/CMakeCache.txt names the source
tree."""
import glob
import os
import subprocess
import sys

# nm's letters for symbols an object file defines for others to use.
DEFINED_GLOBAL = set("TDBRCVWGSI")


def source_tree(build):
    """The source directory CMake built BUILD from, or None (no CMakeCache.txt)."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def room_objects(build):
    """{room path: [object file]} for every room that has objects in BUILD."""
    rooms = {}
    for obj in glob.glob(os.path.join(build, "libcommon/CMakeFiles/lc_*.dir/*/src/*.o")):
        room = os.path.basename(os.path.dirname(os.path.dirname(obj)))
        rooms.setdefault(f"libcommon/{room}", []).append(obj)
    for obj in glob.glob(os.path.join(build, "services/*/CMakeFiles/*.dir/src/*.o")):
        svc = obj.split(os.sep)[-5]
        if os.path.basename(os.path.dirname(os.path.dirname(obj))) == f"{svc}.dir":
            rooms.setdefault(f"services/{svc}", []).append(obj)
    src = source_tree(build)
    if src:
        rooms = {room: [o for o in objs
                        if os.path.exists(os.path.join(src, room, "src", source_name(o)))]
                 for room, objs in rooms.items()}
    return {room: sorted(objs) for room, objs in rooms.items() if objs}


def symbols(obj):
    """(defined globals, undefined) of one object file, from `nm -P`."""
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind == "U":
            undefined.add(name)
        elif kind in DEFINED_GLOBAL:
            defined.add(name)
    return defined, undefined


def source_name(obj):
    """err.c.o -> err.c (what a reader knows the file by)."""
    name = os.path.basename(obj)
    return name[:-2] if name.endswith(".o") else name


def dependency_edges(objs):
    """{file: {file it needs: [symbols]}} inside one room."""
    table = {source_name(o): symbols(o) for o in objs}
    definer = {}
    for name, (defined, _) in table.items():
        for sym in defined:
            definer.setdefault(sym, name)
    edges = {name: {} for name in table}
    for name, (_, undefined) in table.items():
        for sym in sorted(undefined):
            target = definer.get(sym)
            if target and target != name:
                edges[name].setdefault(target, []).append(sym)
    return edges


def strongly_connected(edges):
    """Tarjan's algorithm, iterative; returns the components as sorted lists."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def describe(room, component, edges):
    lines = [f"{room}: circle between {len(component)} files: {', '.join(component)}"]
    members = set(component)
    for src in component:
        for dst, syms in sorted(edges[src].items()):
            if dst in members:
                shown = ", ".join(syms[:6]) + (f" (+{len(syms) - 6})" if len(syms) > 6 else "")
                lines.append(f"  {src} -> {dst}: {shown}")
    return lines


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.exit("usage: check-circles.py BUILD_DIR")
    build = argv[1]
    rooms = room_objects(build)
    if not rooms:
        print(f"check-circles: no object files of any room under {build} (build first)")
        return 1
    failures = 0
    for room, objs in sorted(rooms.items()):
        edges = dependency_edges(objs)
        for component in strongly_connected(edges):
            if len(component) >= 2:
                print("\n".join(describe(room, component, edges)))
                failures += 1
    if failures:
        print(f"check-circles: {failures} circle(s) between the files of one room; put the "
              f"shared piece one level down or in its own file (docs/architecture.md)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
