#!/usr/bin/env python3
"""Turns run-parca-agent-capture.sh captures into tests/fixtures/parca-agent/ (issue 28).

Copies the first N WriteArrow requests of a v2 capture and the first N Write exchanges of a
v1 capture, and writes fixtures.json: what ran (run.json of each capture), what the agent
reported (its "Sent ... with N samples" / "Sent stacktrace record with N stacktraces" debug
lines, in push order, and its write counter), the burner's function address ranges (from its
ELF symbol table) and the totals pyarrow computes from the copied files alone
(parca_arrow_totals.py).

usage: parca_fixture_sidecar.py V2_CAPTURE V1_CAPTURE OUT_DIR [--keep N]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parca_arrow_totals as totals  # noqa: E402

SENT = re.compile(r'msg="Sent (v2 profile|profile|stacktrace record) with (\d+) (samples|stacktraces)"')


def agent_reports(capture):
    reports = {"v2 profile": [], "profile": [], "stacktrace record": []}
    with open(os.path.join(capture, "agent.log"), errors="replace") as log:
        for line in log:
            match = SENT.search(line)
            if match:
                reports[match.group(1)].append(int(match.group(2)))
    counter = None
    with open(os.path.join(capture, "agent-metrics.txt")) as metrics:
        for line in metrics:
            if line.startswith("parca_agent_write_requests_total"):
                counter = line.strip()
    return reports, counter


def keep_files(capture, out, names):
    for name in names:
        if os.path.exists(os.path.join(capture, name)):
            shutil.copyfile(os.path.join(capture, name), os.path.join(out, name))


def oracle(out, capture, pattern_dir):
    run = json.load(open(os.path.join(capture, "run.json")))
    result = subprocess.run([sys.executable, totals.__file__, pattern_dir,
                             "--burner", os.path.join(capture, "burner"),
                             "--pid", str(run["burner_pid"])],
                            check=True, capture_output=True, text=True)
    return run, json.loads(result.stdout)


def burner_symbols(elf):
    return {name: [start, start + size] for start, size, name in totals.symbol_table(elf)
            if name.startswith("burn_") or name == "main"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("v2_capture")
    parser.add_argument("v1_capture")
    parser.add_argument("out")
    parser.add_argument("--keep", type=int, default=3)
    args = parser.parse_args()
    sidecar = {}
    for mode, capture in (("v2", args.v2_capture), ("v1", args.v1_capture)):
        target = os.path.join(args.out, mode)
        os.makedirs(target, exist_ok=True)
        if mode == "v2":
            names = ["writearrow-%03d.bin" % i for i in range(args.keep)]
        else:
            names = ["write-%03d-%s.bin" % (i, part) for i in range(args.keep)
                     for part in ("0", "resp", "1")]
        keep_files(capture, target, names)
        run, computed = oracle(args.out, capture, target)
        reports, counter = agent_reports(capture)
        run.pop("agent_binary", None)
        sidecar[mode] = {
            "run": run,
            "files": sorted(os.listdir(target)),
            "agent_reported": {"rows_per_push": reports["v2 profile" if mode == "v2" else "profile"],
                               "stacktraces_per_push": reports["stacktrace record"] or None,
                               "write_requests_counter": counter,
                               "note": "in push order over the whole run; the fixture keeps "
                                       "the first %d pushes" % args.keep},
            "burner_symbols": burner_symbols(os.path.join(capture, "burner")),
            "pyarrow": computed,
        }
    with open(os.path.join(args.out, "fixtures.json"), "w") as f:
        json.dump(sidecar, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
