"""One pid, two interpreters: starts under one Python, spins in warm() until
the test has seen the agent name it, then execs the Python given as
argv[1] on py_exec_after.py (same pid, same start time, same stdin). The
agent must then read the new interpreter's frames, not walk it with the old
one's offsets. Usage: py_exec.py OTHER_PYTHON; prints "pid N" first.
"""
import os
import sys

from py_started import warm

HERE = os.path.dirname(os.path.abspath(__file__))


def main(other):
    warm()
    sys.stdout.flush()
    os.execv(other, [other, "-B", os.path.join(HERE, "py_exec_after.py")])


if __name__ == "__main__":
    main(sys.argv[1])
