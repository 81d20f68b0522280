"""A package whose own __init__.py runs the work: its functions are named
after the package (pkg.run), the hot one after its module's dotted path
(pkg.sub.mod.hot). See ../../py_pkg.py."""
import time

from pkg.sub import mod


def run(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        mod.hot(20000)
