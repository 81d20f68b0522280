"""What the Python test programs share (imported from the script's own
directory): they say their pid, then spin in warm() until the test has seen
the agent name them and sends a line, then do their measured work, then
stay until their standard input ends (names are read from live processes).
"""
import os
import select
import sys


def warm():
    print("pid", os.getpid(), flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        sum(i * i for i in range(2000))
    sys.stdin.readline()


def linger():
    print("done", flush=True)
    sys.stdin.read()
