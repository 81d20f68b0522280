#!/usr/bin/python3
"""Queries under concurrency (issue 32): day-long flame graphs and series from
1, 8 and 32 concurrent clients.

Data: bench/scale.py's generator (--shape tree or random), --hours of --pods
pods backfilled into a fresh ember through /ingest, then summaries and
compaction awaited (the blocks a day-long query reads at steady state).

Load: `ember-load` (tools/load) with --clients N for N in --levels, each for
--rounds rounds of one profile type x the range --range x --selectors-per-round
selectors (the whole service, each pod, repeated to fill the round) x
{SelectMergeStacktraces, SelectSeries}. A round's calls are shared out among
the clients with one call in flight per client, so a round holds at least as
many calls as the largest level has clients. Printed per level and method:
count, p50 and p99 (ember-load's own figures), and p99 at each level over p99
at one client (goal: <= 4 at 32 clients); and the server's CPU time (user +
sys of the process, /proc/PID/stat) per call at each level: with --methods
SelectMergeStacktraces, the CPU of one day-long flame graph (docs/operations.md,
"Sizing": steadier than wall time on a shared box).

--pyroscope BIN runs the same backfill and the same ember-load matrix against a
Grafana Pyroscope single binary you provide (bench/pyroscope_peer.py) and
prints its figures in the same table. Nothing here builds Pyroscope.

usage: bench/query_concurrency.py BUILD_DIR [--hours 24] [--pods 10] [--shape tree]
                                  [--levels 1,8,32] [--rounds 4] [--pyroscope BIN]
                                  [--methods SelectMergeStacktraces,SelectSeries]
Exits 1 if any request failed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import scale                                  # bench/, beside this script
from pyroscope_peer import Pyroscope

METHODS = ("SelectMergeStacktraces", "SelectSeries")


def process_cpu_s(pid):
    """User + system CPU seconds of a process, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def selectors(n, pods):
    """n selectors: the whole service, then one pod each, round robin."""
    out = []
    while len(out) < n:
        k = len(out) % (pods + 1)
        out.append(f'{{service_name="{scale.APP}"}}' if k == 0
                   else f'{{service_name="{scale.APP}",pod="pod-{k - 1}"}}')
    return out


def run_level(load_bin, port, clients, a):
    cmd = [load_bin, f"--target=http://127.0.0.1:{port}", "--http.address=",
           f"--rounds={a.rounds}", "--interval=0", f"--clients={clients}",
           f"--types={scale.PTYPE}", f"--ranges={a.range}", f"--methods={';'.join(a.methods)}",
           f"--selectors={';'.join(selectors(a.selectors_per_round, a.pods))}",
           "--client.timeout=120s"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    rows = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 7 and p[0] in a.methods:
            rows[p[0]] = (int(p[2]), int(p[3]), float(p[4]), float(p[6]))
    if r.returncode != 0 or not rows:
        print(r.stdout[-2000:] + r.stderr[-2000:])
    return r.returncode, rows


def measure(name, load_bin, port, pid, a):
    out, failed = {}, False
    for clients in a.levels:
        cpu0 = process_cpu_s(pid)
        rc, rows = run_level(load_bin, port, clients, a)
        cpu = process_cpu_s(pid) - cpu0
        failed |= rc != 0 or not rows
        out[clients] = rows
        calls = sum(r[0] for r in rows.values())
        print(f"  {name}: {clients} clients done; server CPU {cpu:.2f} s for {calls} calls"
              f" = {cpu * 1000 / max(calls, 1):.1f} ms per call ({'+'.join(a.methods)})", flush=True)
    return out, failed


def backfill_server(h, srv, jobs, expected, now_ms, a, label):
    t0 = time.monotonic()
    errs = scale.backfill(srv.port, scale.ingest_path, jobs, a.conns)
    if errs:
        print(f"  {label}: {len(errs)} failed requests, first: {errs[0]}")
    total = scale.wait_stored(h, srv, now_ms, expected)
    print(f"  {label}: backfill + drain {time.monotonic() - t0:.1f} s, stored {total:,} of {expected:,}",
          flush=True)
    return total == expected


def report(results, a):
    names = list(results)
    print(f"{'clients':>7} {'method':<24}" + "".join(
        f"{n + ' n':>16}{n + ' p50':>16}{n + ' p99':>16}{n + ' p99/p99@1':>18}" for n in names))
    for clients in a.levels:
        for m in a.methods:
            line = f"{clients:>7} {m:<24}"
            for n in names:
                row = results[n].get(clients, {}).get(m)
                base = results[n].get(a.levels[0], {}).get(m)
                if not row:
                    line += f"{'-':>16}{'-':>16}{'-':>16}{'-':>18}"
                    continue
                ratio = row[3] / base[3] if base and base[3] > 0 else float("nan")
                err = f"({row[1]} err)" if row[1] else ""
                line += f"{str(row[0]) + err:>16}{row[2]:>16.1f}{row[3]:>16.1f}{ratio:>18.2f}"
            print(line)
    top = a.levels[-1]
    for n in names:
        for m in a.methods:
            one, many = results[n].get(a.levels[0], {}).get(m), results[n].get(top, {}).get(m)
            if one and many and one[3] > 0:
                ok = many[3] / one[3] <= 4.0
                print(f"goal ({n}, {m}): p99 at {top} clients / p99 at {a.levels[0]} = "
                      f"{many[3] / one[3]:.2f}   target <= 4   {'ok' if ok else 'MISSED'}")
    if "pyroscope" in results:
        for clients in a.levels:
            for m in a.methods:
                e, p = results["ember"].get(clients, {}).get(m), results["pyroscope"].get(clients, {}).get(m)
                if e and p:
                    print(f"ember vs pyroscope, {clients} clients, {m}: p99 {e[3]:.1f} vs {p[3]:.1f} ms "
                          f"({'ahead' if e[3] < p[3] else 'BEHIND'})")
    print("(ms; the load generator shares the cores with the server; p99 of few calls is their maximum)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--pods", type=int, default=10)
    ap.add_argument("--interval", type=int, default=15)
    ap.add_argument("--stacks", type=int, default=500)
    ap.add_argument("--variants", type=int, default=32)
    ap.add_argument("--shape", choices=("tree", "random"), default="tree")
    ap.add_argument("--label-values", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--conns", type=int, default=4, help="backfill connections")
    ap.add_argument("--levels", default="1,8,32", help="client counts")
    ap.add_argument("--methods", default=",".join(METHODS), help="of " + ",".join(METHODS))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--range", default="24h", help="query range ending now (ember-load --ranges)")
    ap.add_argument("--selectors-per-round", type=int, default=32)
    ap.add_argument("--pyroscope", metavar="BIN")
    a = ap.parse_args()
    a.levels = [int(x) for x in a.levels.split(",")]
    a.methods = [m for m in a.methods.split(",") if m in METHODS]
    a.selectors_per_round = max(a.selectors_per_round, (max(a.levels) + 1) // 2)
    build = os.path.abspath(a.build_dir)
    os.environ["EMBER_BIN_DIR"] = build
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
    import harness as h

    load_bin = os.path.join(build, "tools", "load", "ember-load")
    if not os.access(load_bin, os.X_OK):
        sys.exit(f"missing {load_bin}: build the ember-load target first")
    now_ms = h.now_ms()
    jobs, expected = scale.make_jobs(a, now_ms, a.shape)
    print(f"query_concurrency: {a.shape} data, {a.hours} h x {a.pods} pods: {len(jobs):,} profiles; "
          f"range {a.range}; levels {a.levels}; {a.rounds} rounds of "
          f"{a.selectors_per_round * len(a.methods)} calls", flush=True)
    tmp = tempfile.mkdtemp(prefix="ember-bench-qc-")
    results, failed = {}, False
    try:
        srv = h.Ember(data_dir=os.path.join(tmp, "ember-data"), log_level="warn")
        srv.start()
        try:
            failed |= not backfill_server(h, srv, jobs, expected, now_ms, a, "ember")
            scale.wait_summaries(h, srv.port, 600)
            results["ember"], f = measure("ember", load_bin, srv.port, srv.proc.pid, a)
            failed |= f
        finally:
            srv.cleanup()
        if a.pyroscope:
            py = Pyroscope(a.pyroscope, h, tmp).start()
            try:
                failed |= not backfill_server(h, py, jobs, expected, now_ms, a, "pyroscope")
                py.wait_compacted()
                results["pyroscope"], f = measure("pyroscope", load_bin, py.port, py.proc.pid, a)
                failed |= f
            finally:
                py.stop()
        report(results, a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
