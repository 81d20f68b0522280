#!/usr/bin/python3
"""Redis Cluster ingest benchmark: end-to-end ingest throughput of a fresh
`ember --redis.url` (receivers -> XADD -> consumer group -> writer -> XACK)
through a 3-master Redis Cluster (3 masters + 3 replicas, `--redis.cluster`)
against the same through one redis-server, on this box. End to end = until
the last 200 AND every stream drained (nothing pending, nothing undelivered).
Single and cluster alternate --rounds times (which goes first alternates
too); the median round's cluster/single throughput ratio is printed.

On one 2-core box no speed-up is possible: the cluster's 6 redis-servers,
the replication traffic and ember share the same two cores as the single
Redis does, and the cluster transport runs a link pair and a consumer thread
per partition. The target is parity (>= 0.9), i.e. that routing costs little.

Every Redis runs as the chart runs it (AOF appendfsync always, no RDB, no
rdbcompression). --wait-replicas N also gives the cluster run
--redis.wait-replicas=N --redis.publish-retry=30s (the durable setting).

usage: bench/redis_cluster_ingest.py BUILD_DIR [--rounds 3] [--conns 16] [--requests 2000]
                                     [--variants 20] [--pods 100] [--wait-replicas 0]
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sys.path.insert(0, HERE)
    import redis_ingest as ri
    ap = ri.load_args(2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wait-replicas", type=int, default=0)
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import distributed_harness as dh
    import harness as h
    import test_redis_cluster as trc

    tmp = tempfile.mkdtemp(prefix="ember-bench-cluster-")
    atexit.register(shutil.rmtree, tmp, True)
    bodies = ri.make_bodies(h, tmp, a.variants, a.mix)

    def run_load(port, app, n):
        return ri.ingest_load(a, bodies, port, app, n)

    single = dh.Redis().start()
    nodes = []
    for _ in range(6):
        n = dh.Redis()
        n.port = trc.cluster_port()
        n.args = trc.node_args(n)
        nodes.append(n)
        n.start()
    subprocess.run([trc.REDIS_CLI, "--cluster", "create",
                    *[f"127.0.0.1:{n.port}" for n in nodes], "--cluster-replicas", "1",
                    "--cluster-yes"], check=True, stdout=subprocess.DEVNULL, timeout=60)
    trc.ClusterTest.nodes = nodes
    h.wait_for(trc.ClusterTest.cluster_ok, timeout=30, what="cluster ok")
    probe = trc.ClusterTest()   # for masters() and drained() only
    seeds = ",".join(f"redis://127.0.0.1:{n.port}" for n in nodes[:3])

    def drained_single():
        t = single.totals()
        return t["pending"] == 0 and t["lag"] == 0

    def measure(kind, n_req):
        args = [f"--redis.url={single.url}"] if kind == "single" else [
            f"--redis.url={seeds}", "--redis.cluster"]
        if kind == "cluster" and a.wait_replicas:
            args += [f"--redis.wait-replicas={a.wait_replicas}", "--redis.publish-retry=30s"]
        drained = drained_single if kind == "single" else probe.drained
        srv = h.Ember(log_level="warn", args=args).start()
        try:
            w = run_load(srv.port, "warmup", 200)
            if w["ok"] != 200:
                raise AssertionError(f"{kind}: warm-up answered {w}")
            h.wait_for(drained, timeout=120, what=f"{kind}: warm-up drained")
            r = run_load(srv.port, "bench-app", n_req)
            t_end = time.monotonic()
            h.wait_for(drained, timeout=300, interval=0.05, what="drained")
            secs = r["seconds"] + time.monotonic() - t_end
            if r["ok"] != n_req:
                raise AssertionError(f"{kind}: only {r['ok']} of {n_req} answered 200: {r}")
            return {"secs": secs, "load": r}
        finally:
            srv.cleanup()

    def report(i, rd):
        rd["ratio"] = rd["single"]["secs"] / rd["cluster"]["secs"]
        print(f"round {i + 1}: single {a.requests / rd['single']['secs']:.0f}/s, cluster "
              f"{a.requests / rd['cluster']['secs']:.0f}/s, cluster/single "
              f"{rd['ratio']:.2f}", flush=True)

    try:
        rounds = ri.alternate(a.rounds, ("single", "cluster"),
                              lambda kind: measure(kind, a.requests), report)
    finally:
        for n in nodes:
            n.cleanup()
        single.cleanup()
    rounds.sort(key=lambda rd: rd["ratio"])
    m = rounds[len(rounds) // 2]
    print(json.dumps({"requests": a.requests, "conns": a.conns,
                      "wait_replicas": a.wait_replicas,
                      "single_per_s": a.requests / m["single"]["secs"],
                      "cluster_per_s": a.requests / m["cluster"]["secs"],
                      "cluster_over_single_median": m["ratio"],
                      "ratios": [rd["ratio"] for rd in rounds]}, indent=1))


if __name__ == "__main__":
    main()
