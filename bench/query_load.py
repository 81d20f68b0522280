#!/usr/bin/python3
"""Query latency under ember-load: parca-load's matrix (profile types x 15m,
12h, 7d x {all, one service}) of ProfileTypes, LabelNames, LabelValues,
Series, SelectSeries, SelectMergeStacktraces and SelectMergeProfile, issued by
`ember-load` (tools/load) with --clients concurrent clients for --rounds
rounds, against ember holding a fixed data set.

Data set: --profiles real profiles (Go CPU small and large, Go heap), pushed
with push.v1 Push, re-timed evenly over the last 6 hours (so the 15m, 12h and
7d ranges see about 4%, all and all of them) over 4 services x 8 pods.

Reference, in the same run: the same calls from the same ember-load against
bench/http_sink, which reads each request and answers an empty 200 - the
floor of client, loopback and HTTP on this machine. Printed per RPC and range:
count, p50 and p99 for ember and for the floor, and ember's p50 over the
floor's. The load generator shares the cores with ember, so figures overstate
ember's latency on a dedicated node.

usage: bench/query_load.py BUILD_DIR [--profiles 60] [--rounds 5] [--clients 4]
Exits 1 if any request to ember failed (ember-load's own exit status).
"""
import argparse
import os
import subprocess
import sys
import time


def run_load(binary, target, rounds, clients, types, extra=()):
    cmd = [binary, f"--target={target}", "--http.address=", f"--rounds={rounds}",
           "--interval=0", f"--clients={clients}", f"--types={';'.join(types)}",
           "--labels=service_name", '--selectors=all;{service_name="svc-0"}', *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    rows = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 7 and p[0] != "method":
            rows[(p[0], p[1])] = (int(p[2]), int(p[3]), float(p[4]), float(p[6]))
    return r.returncode, rows, r.stdout + r.stderr[-2000:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--profiles", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ["EMBER_BIN_DIR"] = build
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "integration"))
    import harness as h

    load = os.path.join(build, "tools", "load", "ember-load")
    sink_bin = os.path.join(build, "bench", "http_sink")
    for b in (load, sink_bin):
        if not os.access(b, os.X_OK):
            sys.exit(f"missing {b}: build first")

    files = [("process_cpu", "pprof/gopprof-sample.cpu"), ("process_cpu", "pprof/gopprof-large.cpu"),
             ("memory", "pprof/pyroscope-heap")]
    raws = [(name, h.read_testdata(f)) for name, f in files]
    srv = h.Ember().start()
    sink = subprocess.Popen([sink_bin, "0"], stdout=subprocess.PIPE, text=True)
    try:
        sink_port = int(sink.stdout.readline().strip())
        now_ns = time.time_ns()
        span_ns = 6 * 3600 * 10**9
        t0 = time.monotonic()
        for i in range(args.profiles):
            name, raw = raws[i % len(raws)]
            prof = h.set_time_nanos(raw, now_ns - span_ns * i // args.profiles)
            r = srv.push([({"__name__": name, "service_name": f"svc-{i % 4}",
                            "pod": f"pod-{i % 8}"}, [prof])])
            if r.status != 200:
                sys.exit(f"push failed: {r.describe()}")
        load_s = time.monotonic() - t0
        types = h.wait_for(lambda: [t.ID for t in srv.q("ProfileTypes", start=0,
                                                         end=h.now_ms()).profile_types],
                           what="profile types")
        print(f"query_load: {args.profiles} profiles pushed in {load_s:.1f} s; "
              f"{len(types)} profile types; {args.rounds} rounds x {args.clients} clients")
        rc, ember, out = run_load(load, f"http://127.0.0.1:{srv.port}", args.rounds,
                                  args.clients, types)
        if rc != 0:
            print(out)
        _, floor, _ = run_load(load, f"http://127.0.0.1:{sink_port}", args.rounds,
                               args.clients, types)
    finally:
        sink.terminate()        # our own child, by pid
        sink.wait()
        srv.cleanup()

    print(f"{'method':<24} {'range':<6} {'count':>6} {'ember p50':>10} {'ember p99':>10} "
          f"{'floor p50':>10} {'floor p99':>10} {'p50 x':>7}   (ms)")
    for (m, rng), (n, errs, p50, p99) in ember.items():
        f = floor.get((m, rng), (0, 0, 0.0, 0.0))
        ratio = p50 / f[2] if f[2] > 0 else float("nan")
        err = f"  {errs} errors" if errs else ""
        print(f"{m:<24} {rng:<6} {n:>6} {p50:>10.2f} {p99:>10.2f} {f[2]:>10.2f} {f[3]:>10.2f} "
              f"{ratio:>7.1f}{err}")
    print(f"ember-load exit status against ember: {rc}")
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
