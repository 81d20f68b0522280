#!/usr/bin/python3
"""Parca API benchmark: parca-load's request matrix for a fixed number of
rounds on a fixed data set, each request followed by its counterpart on
ember's Pyroscope API in the same run, so the two paths are measured side by
side on the same data, the same process and the same moment:

  Parca (gRPC-Web, connect-go)      Pyroscope (Connect, connect-go)
  ProfileTypes                      querier.v1 ProfileTypes
  Labels{profile_type}              LabelNames{__profile_type__=...}
  Values{label, profile_type}       LabelValues{...}
  QueryRange{step=range/7680}       SelectSeries{step, sum}
  Query merge FLAMEGRAPH_ARROW      SelectMergeStacktraces (flame graph)

The driver is tests/integration/parcaload (parca-load's matrix; real
parca-load is not served by the Go module proxy, see test_parca_load.py).
Data: for each of --profiles instants (10 s apart, ending now) and each of
two jobs, a Go CPU profile (gopprof-large.cpu) and a Go heap profile
(pyroscope-heap), written with ProfileStoreService.WriteRaw.

Prints, per RPC and range, the median and p90 latency of each path and the
ratio Parca / Pyroscope of the medians (target: at most 1.2). Query merge is
also compared with SelectMergeStacktraces untruncated ("vs whole"): at
parca-load's node_trim_threshold Parca keeps nearly every node (hundreds of
thousands on gopprof-large.cpu), Pyroscope's default answer 16,384.

usage: bench/parca_load.py BUILD_DIR [--rounds 5] [--profiles 30]
       [--url URL (an ember already holding data: no server started)]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = (("process_cpu", "pprof/gopprof-large.cpu"), ("memory", "pprof/pyroscope-heap"))
JOBS = ("api", "db")


def write_data(h, t, srv, profiles):
    now_ns = time.time_ns()
    for k in range(profiles):
        for name, rel in FILES:
            raw = h.set_time_nanos(h.read_testdata(rel), now_ns - (k + 1) * 10_000_000_000)
            for job in JOBS:
                body = t.frame(t.write_raw({"__name__": name, "job": job, "instance": f"{job}-0"}, raw))
                r = srv.request("POST", t.PS + "/WriteRaw", body, {"content-type": "application/grpc-web+proto"})
                if r.status != 200 or t.parse_trailers(r.body)[0] != 0:
                    raise SystemExit(f"WriteRaw failed: {r.describe()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profiles", type=int, default=30)
    ap.add_argument("--url")
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    os.environ.setdefault("EMBER_SRC_DIR", os.path.abspath(os.path.join(HERE, "..")))
    os.environ.setdefault("EMBER_TESTDATA", os.path.abspath(os.path.join(HERE, "..", "..", "shared", "testdata")))
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import harness as h
    import parcaload_util
    import test_parca_api as t

    binary = parcaload_util.build()
    srv = None
    url = a.url
    if not url:
        srv = h.Ember().start()
        url = f"http://127.0.0.1:{srv.port}"
        write_data(h, t, srv, a.profiles)
    try:
        r = subprocess.run([binary, f"-url={url}", f"-rounds={a.rounds}", "-values-for-labels=job;instance",
                            '-labels=all;{job="api"}', "-pyroscope"], capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise SystemExit(f"parcaload failed:\n{r.stderr[-2000:]}")
        out = json.loads(r.stdout)
    finally:
        if srv:
            srv.cleanup()
    rows = {(x["rpc"], x["range"], x["api"]): x for x in out["rows"]}
    print(f"parca-load matrix: {a.rounds} rounds, types {out['types']}, {out['seconds']:.1f} s")
    print(f"{'rpc':<13} {'range':<9} {'parca p50':>10} {'p90':>9} {'mean':>9} {'pyro p50':>10} {'p90':>9} "
          f"{'mean':>9} {'p50 x':>6} {'mean x':>6}  codes")
    worst = worst_mean = worst_whole = worst_whole_mean = 0.0
    for rpc, rng in sorted({(k[0], k[1]) for k in rows}):
        p, y = rows.get((rpc, rng, "parca")), rows.get((rpc, rng, "pyroscope"))
        if not p or not y:
            continue
        ratio = p["p50"] / y["p50"] if y["p50"] > 0 else float("inf")
        mean_ratio = p["mean"] / y["mean"] if y["mean"] > 0 else float("inf")
        worst = max(worst, ratio)
        worst_mean = max(worst_mean, mean_ratio)
        codes = ",".join(f"{k}={v}" for k, v in sorted(p["codes"].items()))
        ms = lambda v: f"{v * 1000:.2f}ms"
        print(f"{rpc:<13} {rng:<9} {ms(p['p50']):>10} {ms(p['p90']):>9} {ms(p['mean']):>9} "
              f"{ms(y['p50']):>10} {ms(y['p90']):>9} {ms(y['mean']):>9} {ratio:>6.2f} {mean_ratio:>6.2f}  {codes}")
        w = rows.get((rpc, rng, "pyroscope-whole"))
        if w and w["p50"] > 0 and w["mean"] > 0:
            r50, rmean = p["p50"] / w["p50"], p["mean"] / w["mean"]
            worst_whole = max(worst_whole, r50)
            worst_whole_mean = max(worst_whole_mean, rmean)
            print(f"{'  vs whole':<13} {rng:<9} {'':>10} {'':>9} {'':>9} {ms(w['p50']):>10} {ms(w['p90']):>9} "
                  f"{ms(w['mean']):>9} {r50:>6.2f} {rmean:>6.2f}")
    print(f"worst ratio Parca/Pyroscope: medians {worst:.2f}, means {worst_mean:.2f} (target <= 1.2)")
    print(f"query_merge against the whole (untruncated) Pyroscope tree, the answer Parca gives at "
          f"parca-load's threshold: medians {worst_whole:.2f}, means {worst_whole_mean:.2f}")


if __name__ == "__main__":
    main()
