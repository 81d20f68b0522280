"""Python called back from C code that is not the interpreter's: sort_in_c()
hands libc's qsort a Python comparator through ctypes, and the comparator
does the work. Between sort_in_c and compare the native frames of other
objects (libffi, _ctypes, libc's qsort_r) must stay, in order; the
interpreter's own frames there go. Usage: py_cext.py CPU_SECONDS (of its
thread's CPU time, after a first line on its standard input: until then it
spins in warm()); prints "pid N", then exits at the end of its standard input.
"""
import ctypes
import sys
import time

from py_started import linger, warm

CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
LIBC = ctypes.CDLL("libc.so.6")


def compare(a, b):
    total = 0
    for i in range(200):  # the work: the samples land here
        total += i * i % 7
    return a[0] - b[0]


def sort_in_c(n):
    values = (ctypes.c_int * n)(*range(n, 0, -1))
    LIBC.qsort(values, n, ctypes.sizeof(ctypes.c_int), CMP(compare))



def main(seconds):
    warm()
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sort_in_c(200)
    linger()


if __name__ == "__main__":
    main(float(sys.argv[1]))
