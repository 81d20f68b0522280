"""What the Python test programs share (imported from the script's own
directory): they say their pid, then work in warm() until the test has seen
the agent name them and sends a line, then do their measured work, then
stay until their standard input ends (names are read from live processes).

warm() works in bursts of about a millisecond between 20 ms pauses: a test
starts eleven of these at once, and spinning flat out they left the agent,
whose first sight of a process is CPU work, too little of two shared cores
to see them within two minutes (seen once in CI). At 997 Hz a burst still
gives the agent tens of samples a second in warm().
"""
import os
import select
import sys


def warm():
    print("pid", os.getpid(), flush=True)
    while not select.select([sys.stdin], [], [], 0.02)[0]:
        sum(i * i for i in range(20000))
    sys.stdin.readline()


def linger():
    print("done", flush=True)
    sys.stdin.read()
