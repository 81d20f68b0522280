#!/usr/bin/python3
"""Ingest benchmark: profiles/s and samples/s through POST /ingest.

A mix of real profiles from testdata (each re-timed into V variants so every
(series, time) is distinct) is sent by bench/ingest_load (C, N keep-alive
connections, exact request count) first to bench/http_sink — a server that
only reads the body: the floor for HTTP on this machine — and then to a fresh
ember. For ember two figures are printed: acknowledged (HTTP 200) and stored
(every acknowledged profile visible to SelectSeries, i.e. including the time
the writer needed to drain its queue). Same run, same machine, same requests.

usage: bench/ingest_bench.py BUILD_DIR [--conns 16] [--requests 4000] [--variants 20] [--pods 100]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

MIX = ("pprof/pyroscope-go.cpu.labels.pprof",      # B1: small Go CPU, 480 samples, pprof labels
       "pprof/pyroscope-cpu_go_truncated_1.pb.gz",  # B2: medium Go CPU, 647 samples, 1.9k locations
       "pprof/pyroscope-heap",                      # B3: heavy Go heap, 12k samples
       "pprof/pyroscope-profile_java",              # Java CPU, 2.6k samples
       "ingest/nodejs-wall.pb.gz")                  # Node wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--pods", type=int, default=100)
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
    import harness as h

    load_bin = os.path.join(a.build_dir, "bench", "ingest_load")
    sink_bin = os.path.join(a.build_dir, "bench", "http_sink")
    man = h.manifest()
    tmp = tempfile.mkdtemp(prefix="ember-bench-ingest-")
    base_ns = time.time_ns() - 30 * 60 * 10**9
    bodies = []
    for v in range(a.variants):
        for k, rel in enumerate(MIX):
            raw = h.set_time_nanos(h.read_testdata(rel), base_ns + (v * len(MIX) + k) * 10**9)
            p = os.path.join(tmp, f"v{v}-{k}.pb.gz")
            with open(p, "wb") as f:
                f.write(gzip.compress(raw, compresslevel=1))   # Go's pprof writer uses BestSpeed
            bodies.append(p)
    if a.requests > len(bodies) * a.pods:
        sys.exit(f"--requests must be <= variants*{len(MIX)}*pods = {len(bodies) * a.pods} (distinct series,time)")
    # request i carries body i % len(bodies), i.e. file i % len(MIX)
    per_file = [a.requests // len(MIX) + (k < a.requests % len(MIX)) for k in range(len(MIX))]
    samples = sum(n * man[rel]["samples"] for n, rel in zip(per_file, MIX))
    raw_bytes = sum(n * len(h.gunzip_if(h.read_testdata(rel))) for n, rel in zip(per_file, MIX))

    def run_load(port, app, n=a.requests):
        r = subprocess.run([load_bin, str(port), str(a.conns), str(n), str(len(MIX)), str(a.pods), app, *bodies],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout)

    # ---- floor: the sink
    sink = subprocess.Popen([sink_bin, "0"], stdout=subprocess.PIPE, text=True)
    try:
        sink_port = int(sink.stdout.readline())
        run_load(sink_port, "warmup", 200)
        floor = run_load(sink_port, "bench-app")
    finally:
        sink.terminate()
        sink.wait()

    # ---- ember
    srv = h.Ember(log_level="warn")
    srv.start()
    try:
        run_load(srv.port, "warmup", 200)
        res = run_load(srv.port, "bench-app")
        t_end = time.monotonic()
        window = (base_ns // 10**6 - 60_000, h.now_ms() + 60_000)

        def stored():
            out = []
            for k, rel in enumerate(MIX):
                e = man[rel]
                name = h.ingest_metric_name([st["type"] for st in e["sample_types"]])
                st = e["sample_types"][-1]
                pid = h.profile_type_id(name, st["type"], st["unit"], e)
                s = srv.series_sum(pid, f'{{service_name="bench-app", file="{k}"}}', *window)
                out.append(round(s / st["total"]))
            return out
        last = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            last = stored()
            if last == res["group_ok"]:
                break
            time.sleep(0.1)
        drain = time.monotonic() - t_end
        peak = srv.rss_peak_kib()
    finally:
        srv.cleanup()

    def row(label, r, secs=None):
        secs = secs or r["seconds"]
        return (f"{label:<34}{r['ok'] / secs:>12,.0f}{samples * r['ok'] / a.requests / secs:>14,.0f}"
                f"{r['body_bytes'] / secs / 1e6:>10,.1f}{raw_bytes / secs / 1e6:>10,.1f}"
                f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")

    print(f"ingest benchmark: {a.requests} requests over {a.conns} keep-alive connections, "
          f"mix of {len(MIX)} real profiles x {a.variants} variants, {a.pods} pods")
    print(f"  mix: {', '.join(os.path.basename(m) for m in MIX)}; "
          f"avg {samples / a.requests:,.0f} samples, {res['body_bytes'] / a.requests / 1024:,.1f} KiB gz per request")
    print(f"{'':<34}{'profiles/s':>12}{'samples/s':>14}{'MB/s gz':>10}{'MB/s raw':>10}{'p50 ms':>9}{'p99 ms':>9}")
    print(row("http_sink (floor, reads body only)", floor))
    print(row("ember, acknowledged (HTTP 200)", res))
    ok = last == res["group_ok"]
    print(row("ember, stored (queryable)", res, res["seconds"] + drain) +
          ("" if ok else f"   INCOMPLETE: stored {last} != acked {res['group_ok']}"))
    for label, r in (("sink", floor), ("ember", res)):
        if r["non_2xx"] or r["errors"]:
            print(f"  WARNING {label}: {r['non_2xx']} non-2xx, {r['errors']} transport errors")
    print(f"  ember/floor (acknowledged): {floor['seconds'] / res['seconds']:.3f}; "
          f"writer drain after the last ack: {drain * 1000:.0f} ms; ember peak RSS {peak / 1024:.0f} MiB")
    print("  reference (perf-anchors.md §7.3, 2 cores, end to end): B1 target >= 1,000 profiles/s; "
          "Pyroscope v2 ~550 profiles/s on 2 cores; >= 250k samples/s per core")
    return 0 if ok and not res["non_2xx"] and not res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
