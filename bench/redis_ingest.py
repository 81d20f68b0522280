#!/usr/bin/python3
"""Redis ingest benchmark: end-to-end ingest throughput through the `redis`
transport vs the `direct` transport, and the floor — raw pipelined XADD of
the same payloads to the same redis-server — all in one run.

  direct : a fresh `ember` (receivers -> in-process queue -> writer). A 200
           means committed, so acknowledged == stored.
  redis  : a fresh `ember --redis.url` (receivers -> XADD -> consumer group
           -> writer -> XACK). End to end = until the last 200 AND the streams
           drained (nothing pending, nothing undelivered): everything stored.
  cluster: with --ingesters N, N `ember-ingester` processes over the same
           streams, the load split evenly between them (N loaders in
           parallel); end to end as for redis.
  raw    : XADD <stream> * m <body> of the very request bodies, pipelined
           (--pipeline commands per write) over one connection, spread over
           the same number of streams; nothing consumes them.

The load is bench/ingest_load (C, --conns keep-alive connections, exact
request count) with the mix of real profiles bench/ingest_bench.py uses.
redis-server runs as our child on a free loopback port with AOF on and
--appendfsync (default always, the setting the delivery guarantee assumes).

usage: bench/redis_ingest.py BUILD_DIR [--conns 16] [--requests 4000] [--variants 20]
                             [--pods 100] [--partitions 16] [--pipeline 256]
                             [--appendfsync always|everysec|no] [--ingesters N]
"""
import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

MIX = ("pprof/pyroscope-go.cpu.labels.pprof",
       "pprof/pyroscope-cpu_go_truncated_1.pb.gz",
       "pprof/pyroscope-heap",
       "pprof/pyroscope-profile_java",
       "ingest/nodejs-wall.pb.gz")

HERE = os.path.dirname(os.path.abspath(__file__))


def make_bodies(h, tmp, variants):
    """Each file of the mix re-timed into `variants` distinct bodies."""
    base_ns = time.time_ns() - 30 * 60 * 10**9
    paths = []
    for v in range(variants):
        for k, rel in enumerate(MIX):
            raw = h.set_time_nanos(h.read_testdata(rel), base_ns + (v * len(MIX) + k) * 10**9)
            p = os.path.join(tmp, f"v{v}-{k}.pb.gz")
            with open(p, "wb") as f:
                f.write(gzip.compress(raw, compresslevel=1))
            paths.append(p)
    return paths


def raw_xadd(port, payloads, n, partitions, pipeline):
    """n XADDs of payloads[i % len] to bench:raw:<i % partitions>, `pipeline`
    commands per write, every reply read; returns seconds."""
    enc = list(payloads)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    t0 = time.monotonic()
    i = 0
    while i < n:
        k = min(pipeline, n - i)
        out = []
        for j in range(i, i + k):
            body = enc[j % len(enc)]
            key = b"bench:raw:%d" % (j % partitions)
            out.append(b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$1\r\nm\r\n$%d\r\n"
                       % (len(key), key, len(body)))
            out.append(body)
            out.append(b"\r\n")
        s.sendall(b"".join(out))
        for _ in range(k):
            line = f.readline()
            if not line.startswith(b"$"):
                raise RuntimeError(f"XADD failed: {line!r}")
            f.readline()
        i += k
    secs = time.monotonic() - t0
    s.close()
    return secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--pipeline", type=int, default=256)
    ap.add_argument("--appendfsync", default="always", choices=("always", "everysec", "no"))
    ap.add_argument("--ingesters", type=int, default=0,
                    help="also measure N ember-ingester processes sharing the streams")
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import distributed_harness as dh
    import harness as h

    tmp = tempfile.mkdtemp(prefix="ember-bench-redis-")
    bodies = make_bodies(h, tmp, a.variants)
    if a.requests > len(bodies) * a.pods:
        sys.exit(f"--requests must be <= {len(bodies) * a.pods} (distinct series,time)")
    load_bin = os.path.join(a.build_dir, "bench", "ingest_load")

    def run_load(port, app, n=a.requests):
        r = subprocess.run([load_bin, str(port), str(a.conns), str(n), str(len(MIX)), str(a.pods),
                            app, *bodies], capture_output=True, text=True, check=True)
        return json.loads(r.stdout)

    redis = dh.Redis()
    redis.start()
    redis.cmd("CONFIG", "SET", "appendfsync", a.appendfsync)
    results = {}
    try:
        # ---- direct
        srv = h.Ember(log_level="warn").start()
        try:
            run_load(srv.port, "warmup", 200)
            r = run_load(srv.port, "bench-app")
            results["direct"] = (r, r["seconds"])
        finally:
            srv.cleanup()

        # ---- redis (the all-in-one over the streams: the same process shape)
        srv = h.Ember(log_level="warn",
                      args=[f"--redis.url={redis.url}", f"--ingest.partitions={a.partitions}"])
        srv.start()
        try:
            run_load(srv.port, "warmup", 200)
            redis.wait_drained(timeout=120)
            r = run_load(srv.port, "bench-app")
            t_end = time.monotonic()
            redis.wait_drained(timeout=300)
            drain = time.monotonic() - t_end
            results["redis"] = (r, r["seconds"] + drain)
            added = redis.totals()["added"]
        finally:
            srv.cleanup()

        # ---- N ingesters sharing the streams
        if a.ingesters > 0:
            redis.cmd("DEL", *[f"ember:ingest:{p}" for p in range(a.partitions)])
            ings = [dh.ingester(redis.url, [f"--ingest.partitions={a.partitions}",
                                              "--redis.claim-idle=60s"])
                    for _ in range(a.ingesters)]
            try:
                for i in ings:
                    i.log_level = "warn"
                    i.start()
                per = a.requests // a.ingesters
                conns = max(1, a.conns // a.ingesters)
                t0 = time.monotonic()
                procs = [subprocess.Popen([load_bin, str(i.port), str(conns), str(per), str(len(MIX)),
                                           str(a.pods), f"bench-app-{k}", *bodies],
                                          stdout=subprocess.PIPE, text=True)
                         for k, i in enumerate(ings)]
                outs = [json.loads(p.communicate()[0]) for p in procs]
                redis.wait_drained(timeout=300)
                secs = time.monotonic() - t0
                ok = sum(o["ok"] for o in outs)
                merged = {"ok": ok, "seconds": secs, "non_2xx": sum(o["non_2xx"] for o in outs),
                          "errors": sum(o["errors"] for o in outs),
                          "p50_ms": max(o["p50_ms"] for o in outs),
                          "p99_ms": max(o["p99_ms"] for o in outs)}
                results["cluster"] = (merged, secs)
            finally:
                for i in ings:
                    i.cleanup()

        # ---- raw pipelined XADD of the same payloads
        payloads = [open(p, "rb").read() for p in bodies]
        raw_secs = raw_xadd(redis.port, payloads, a.requests, a.partitions, a.pipeline)
    finally:
        redis.cleanup()

    n = a.requests
    avg_kib = sum(len(p) for p in payloads) / len(payloads) / 1024
    print(f"redis ingest benchmark: {n} profiles ({avg_kib:.1f} KiB gz avg, mix of {len(MIX)} real "
          f"profiles), {a.conns} connections, {a.partitions} streams, appendfsync {a.appendfsync}")
    print(f"{'':<44}{'profiles/s':>12}{'p50 ms':>9}{'p99 ms':>9}")
    rows = {}
    for name, label in (("direct", "direct transport, end to end"),
                        ("redis", "redis transport, end to end (drained)")):
        r, secs = results[name]
        rows[name] = r["ok"] / secs
        print(f"{label:<44}{rows[name]:>12,.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
              + (f"   WARNING {r['non_2xx']} non-2xx, {r['errors']} errors"
                 if r["non_2xx"] or r["errors"] else ""))
    r, _ = results["redis"]
    print(f"{'  redis transport, acknowledged (200)':<44}{r['ok'] / r['seconds']:>12,.0f}")
    if "cluster" in results:
        r, secs = results["cluster"]
        rows["cluster"] = r["ok"] / secs
        print(f"{f'{a.ingesters} ember-ingester, end to end (drained)':<44}{rows['cluster']:>12,.0f}"
              f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}   (p50/p99: worst loader)")
    rows["raw"] = n / raw_secs
    print(f"{f'raw XADD, pipelined x{a.pipeline} (floor)':<44}{rows['raw']:>12,.0f}")
    print(f"  redis/direct {rows['redis'] / rows['direct']:.3f}   redis/raw {rows['redis'] / rows['raw']:.3f}"
          f"   direct/raw {rows['direct'] / rows['raw']:.3f}   (stream entries added: {added})")
    if "cluster" in rows:
        print(f"  cluster/redis {rows['cluster'] / rows['redis']:.3f}   cluster/raw "
              f"{rows['cluster'] / rows['raw']:.3f}")
    ok = all(res[0]["ok"] == (n // a.ingesters * a.ingesters if k == "cluster" else n)
             for k, res in results.items())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
