"""The work is in a package (pypkg/pkg/sub/mod.py, called from
pypkg/pkg/__init__.py): the agent must name its frames by the module's
dotted path, as Python does (pkg.sub.mod.hot, pkg.run), not by the file's
last part. Usage: py_pkg.py CPU_SECONDS (of its thread's CPU time, after a
first line on its standard input: until then it spins in warm()); prints
"pid N", then exits at the end of its standard input.
"""
import os
import select
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pypkg"))
import pkg  # noqa: E402 (found through the path set above)


def warm():
    while not select.select([sys.stdin], [], [], 0)[0]:
        sum(i * i for i in range(2000))
    sys.stdin.readline()


def main(seconds):
    print("pid", os.getpid(), flush=True)
    warm()
    pkg.run(seconds)
    print("done", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main(float(sys.argv[1]))
