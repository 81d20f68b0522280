"""py_exec.py's second image: spins in after_exec() (bursts between 20 ms
pauses, as py_started.warm) until its standard input ends."""
import select
import sys


def after_exec():
    while not select.select([sys.stdin], [], [], 0.02)[0]:
        sum(i * i for i in range(20000))
    sys.stdin.read()


if __name__ == "__main__":
    after_exec()
