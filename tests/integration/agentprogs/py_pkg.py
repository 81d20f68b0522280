"""The work is in a package (pypkg/pkg/sub/mod.py, called from
pypkg/pkg/__init__.py): the agent must name its frames by the module's
dotted path, as Python does (pkg.sub.mod.hot, pkg.run), not by the file's
last part. Usage: py_pkg.py CPU_SECONDS (of its thread's CPU time, after a
first line on its standard input: until then it spins in warm()); prints
"pid N", then exits at the end of its standard input.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pypkg"))
import pkg  # noqa: E402 (found through the path set above)
from py_started import linger, warm  # noqa: E402


def main(seconds):
    warm()
    pkg.run(seconds)
    linger()


if __name__ == "__main__":
    main(float(sys.argv[1]))
