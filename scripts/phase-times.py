#!/usr/bin/env python3
"""Passes scripts/test.sh's output through unchanged, timing its phases.

Every line that starts with "== " opens a phase (and closes the one before);
at the end of the input a table of wall-clock seconds per phase is printed,
slowest first, so a CI log shows where the time went. A filter rather than
timing calls inside test.sh, so test.sh's phases stay plain echo lines.
Usage: scripts/test.sh 2>&1 | scripts/phase-times.py
"""
import sys
import time


def main():
    start = time.monotonic()
    phases = []  # [name, started]
    # readline, not iteration: some Pythons read a pipe ahead in blocks.
    for line in iter(sys.stdin.readline, ""):
        if line.startswith("== "):
            phases.append([line[3:].strip(), time.monotonic()])
        sys.stdout.write(line)
        sys.stdout.flush()
    end = time.monotonic()
    rows = []
    for i, (name, t0) in enumerate(phases):
        t1 = phases[i + 1][1] if i + 1 < len(phases) else end
        rows.append((t1 - t0, name))
    print("\n== phase times (wall seconds, slowest first)")
    for secs, name in sorted(rows, reverse=True):
        print(f"{secs:8.0f}  {name}")
    print(f"{end - start:8.0f}  total")


if __name__ == "__main__":
    main()
