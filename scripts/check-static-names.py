#!/usr/bin/env python3
"""Static function names are unique across the code one binary links
(libcommon, services and tools), so a profile of ember itself never shows two
frames of the same name from different files. Exit 1 listing each repeat."""
import collections
import os
import re
import subprocess
import sys

DEF = re.compile(r'^static\s+(?:inline\s+)?[\w\s\*]*?\b(\w+)\s*\([^;]*$', re.M)


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = subprocess.run(["git", "ls-files", "libcommon", "services", "tools"], capture_output=True,
                           text=True, check=True).stdout.split()
    where = collections.defaultdict(set)
    for f in files:
        if not f.endswith((".c", ".h")) or "/bpf/" in f:
            continue
        with open(f, encoding="utf-8", errors="replace") as fh:
            for m in DEF.finditer(fh.read()):
                where[m.group(1)].add(f)
    repeats = {n: fs for n, fs in where.items() if len(fs) > 1}
    for name in sorted(repeats):
        print(f"{name}: {' '.join(sorted(repeats[name]))}")
    if repeats:
        print(f"check-static-names: {len(repeats)} static name(s) defined in more than one file")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
