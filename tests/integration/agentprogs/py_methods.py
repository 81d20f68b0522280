"""A method of a class nested in a class does the work: its qualified name
(py_methods.Outer.Inner.crunch) is what the agent must show, the module from
this file's name. Usage: py_methods.py CPU_SECONDS (of its thread's CPU
time, however busy the machine is, after a first line on its standard
input: until then it spins in warm()); prints "pid N", then exits at the end
of its standard input.
"""
import sys
import time

from py_started import linger, warm


class Outer:
    class Inner:
        def crunch(self, n):
            total = 0
            for i in range(n):
                total += i * i % 7
            return total


def main(seconds):
    warm()
    worker = Outer.Inner()
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        worker.crunch(20000)
    linger()


if __name__ == "__main__":
    main(float(sys.argv[1]))
