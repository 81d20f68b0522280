"""main() calls alpha() and beta() in turn; alpha's loop is three times
beta's, so about 3/4 of the CPU goes to alpha. The program measures its own
split (time.thread_time around each call) and prints it at the end: the
oracle the agent's profile is compared with.

Usage: py_split.py SECONDS [cpu]. Runs SECONDS of wall-clock time, or with
"cpu" until its thread has used SECONDS of CPU (the same number of samples
however busy the machine is), and then only after a first line on its
standard input: until then it spins in warm(), so a test can wait until the
profiler shows it. Prints "pid N" first, "split ALPHA_S BETA_S"
when done, then exits at the end of its standard input (tests keep it alive
until the profiler has read it).
"""
import os
import select
import sys
import time

UNIT = 20000  # loop iterations of beta per round; alpha runs 3 x UNIT


def spin(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def alpha():
    return spin(3 * UNIT)


def beta():
    return spin(UNIT)


def warm():
    while not select.select([sys.stdin], [], [], 0)[0]:
        sum(i * i for i in range(2000))  # not spin(): spin's callers are measured
    sys.stdin.readline()


def main(seconds, clock):
    print("pid", os.getpid(), flush=True)
    if clock is time.thread_time:
        warm()
    spent = {"alpha": 0.0, "beta": 0.0}
    end = clock() + seconds
    while clock() < end:
        for name, fn in (("alpha", alpha), ("beta", beta)):
            t0 = time.thread_time()
            fn()
            spent[name] += time.thread_time() - t0
    print("split %.6f %.6f" % (spent["alpha"], spent["beta"]), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    cpu = len(sys.argv) > 2 and sys.argv[2] == "cpu"
    main(float(sys.argv[1]), time.thread_time if cpu else time.monotonic)
