#!/usr/bin/python3
"""Redis ingest benchmark: end-to-end ingest throughput through the `redis`
transport vs the `direct` transport, and the floor — raw pipelined XADD of
the same payloads to the same redis-server — all in one run.

  direct : a fresh `ember` (receivers -> in-process queue -> writer). A 200
           means committed, so acknowledged == stored.
  redis  : a fresh `ember --redis.url` (receivers -> XADD -> consumer group
           -> writer -> XACK). End to end = until the last 200 AND the streams
           drained (nothing pending, nothing undelivered): everything stored.
  Direct and redis alternate --rounds times (3; which goes first alternates
  too), each on a fresh server after a sync, and the round with the median
  redis/direct ratio is the one printed in full.
  cluster: with --ingesters N, N `ember-ingester` processes over the same
           streams, the load split evenly between them (N loaders in
           parallel); end to end as for redis.
  raw    : XADD <stream> * m <body> of the very request bodies, pipelined
           (--pipeline commands per write) over one connection, spread over
           the same number of streams; nothing consumes them. Then the same
           through the receivers' publish script (dedupe key + XADD), once
           by EVAL and once by EVALSHA: the floor of the redis transport.

The load is bench/ingest_load (C, --conns keep-alive connections, exact
request count) with the mix of real profiles bench/ingest_bench.py uses.
redis-server runs as our child on a free loopback port as the chart runs it
(AOF on, no RDB snapshots, --rdbcompression no) with --appendfsync (default
always, the setting the delivery guarantee assumes); --rdbcompression yes
measures Redis's default, whose AOF rewrites LZF-compress every entry again.

usage: bench/redis_ingest.py BUILD_DIR [--rounds 3] [--conns 16] [--requests 4000] [--variants 20]
                             [--pods 100] [--partitions 16] [--pipeline 256]
                             [--appendfsync always|everysec|no] [--rdbcompression no|yes]
                             [--ingesters N] [--mix heap|default|FILE,FILE,...]
"""
import argparse
import atexit
import gzip
import hashlib
import json
import os
import shutil
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
# Issue 32's second mix: two heap profiles with four sample types (12k and
# 1.2k samples) beside four CPU profiles, 247 KiB gz on average.
HEAP_MIX = ("pprof/gopprof-large.cpu",
            "pprof/pyroscope-heap",
            "ingest/heap.pb",
            "pprof/pyroscope-profile_python",
            "pprof/pyroscope-profile_java",
            "pprof/pyroscope-cpu_go_truncated_1.pb.gz")
MIXES = {"default": MIX, "heap": HEAP_MIX}


def parse_mix(v):
    """--mix: a preset name (MIXES) or comma-separated files."""
    return MIXES[v] if v in MIXES else tuple(x for x in v.split(",") if x)

HERE = os.path.dirname(os.path.abspath(__file__))


def make_bodies(h, tmp, variants, mix=MIX):
    """Each file of the mix re-timed into `variants` distinct bodies."""
    base_ns = time.time_ns() - 30 * 60 * 10**9
    paths = []
    for v in range(variants):
        for k, rel in enumerate(mix):
            raw = h.set_time_nanos(read_mix_file(h, rel), base_ns + (v * len(mix) + k) * 10**9)
            p = os.path.join(tmp, f"v{v}-{k}.pb.gz")
            with open(p, "wb") as f:
                f.write(gzip.compress(raw, compresslevel=1))
            paths.append(p)
    return paths


def read_mix_file(h, rel):
    """A mix entry: a path under testdata, or any pprof file (gzip or not)."""
    if os.path.isabs(rel) or os.path.exists(rel):
        data = open(rel, "rb").read()
        return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return h.read_testdata(rel)


# The publish script of libcommon/pipeline/src/transport_redis.c (PUBLISH_LUA), kept equal by hand.
PUBLISH_LUA = (b"local seen = redis.call('GET', KEYS[1])\n"
               b"if seen then return {seen} end\n"
               b"local id = redis.call('XADD', KEYS[2], '*', ARGV[2], ARGV[3])\n"
               b"redis.call('SET', KEYS[1], id, 'PX', ARGV[1])\n"
               b"return id\n")


def resp(argv):
    out = [b"*%d\r\n" % len(argv)]
    for arg in argv:
        out += [b"$%d\r\n" % len(arg), arg, b"\r\n"]
    return b"".join(out)


def raw_pipelined(port, n, pipeline, command):
    """n commands command(i), `pipeline` per write, every reply read (each
    must be a bulk string: a new stream entry id); returns seconds."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    t0 = time.monotonic()
    i = 0
    while i < n:
        k = min(pipeline, n - i)
        s.sendall(b"".join(resp(command(j)) for j in range(i, i + k)))
        for _ in range(k):
            line = f.readline()
            if not line.startswith(b"$"):
                raise RuntimeError(f"command failed: {line!r}")
            f.readline()
        i += k
    secs = time.monotonic() - t0
    s.close()
    return secs


def raw_floors(port, payloads, n, partitions, pipeline, cpu_since=None):
    """Seconds for n of: plain XADD to bench:raw:<p>; the publish script by
    EVAL and by EVALSHA (fresh ids, so every one XADDs) to bench:eval:<p> and
    bench:sha:<p> with their dedupe keys."""
    sha = hashlib.sha1(PUBLISH_LUA).hexdigest().encode()
    run = "%x" % time.time_ns()

    def xadd(j):
        return [b"XADD", b"bench:raw:%d" % (j % partitions), b"*", b"m", payloads[j % len(payloads)]]

    def script(verb, body, name):
        def command(j):
            stream = b"bench:%s:%d" % (name, j % partitions)
            key = b"{%s}:dedupe:%s-%d" % (stream, run.encode(), j)
            return [verb, body, b"2", key, stream, b"30000", b"m", payloads[j % len(payloads)]]
        return command

    out = {"raw": raw_pipelined(port, n, pipeline, xadd)}
    if cpu_since:
        out["raw_cpu"] = cpu_since()
    out["eval"] = raw_pipelined(port, n, pipeline, script(b"EVAL", PUBLISH_LUA, b"eval"))
    out["evalsha"] = raw_pipelined(port, n, pipeline, script(b"EVALSHA", sha, b"sha"))
    return out


def redis_info(redis, section):
    """INFO <section> as a dict of str -> str."""
    text = redis.cmd("INFO", section)
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def redis_cpu_seconds(redis):
    """CPU time redis-server used so far (main thread and background threads)."""
    info = redis_info(redis, "cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def redis_children(redis):
    """(CPU seconds of redis-server's finished children, AOF rewrites so far):
    the rewrite children (fork, the RDB preamble and its CRC64, the write) run
    on the same cores but are not in used_cpu_sys/user."""
    cpu = redis_info(redis, "cpu")
    rewrites = int(redis_info(redis, "persistence").get("aof_rewrites", 0))
    return float(cpu["used_cpu_sys_children"]) + float(cpu["used_cpu_user_children"]), rewrites


def redis_commandstats(redis):
    """{command: (calls, usec)} from INFO commandstats."""
    out = {}
    for k, v in redis_info(redis, "commandstats").items():
        f = dict(kv.split("=", 1) for kv in v.split(","))
        out[k.replace("cmdstat_", "")] = (int(f["calls"]), int(f["usec"]))
    return out


def redis_net_input(redis):
    return int(redis_info(redis, "stats")["total_net_input_bytes"])


def wait_drained(h, dh, redis, partitions, timeout):
    """Polled 4 times a second over one connection, with XINFO GROUPS only
    (pending and lag of each stream's group): polling is Redis CPU that the
    per-profile figure should not carry, and the harness's check opens a
    connection per command and sends XINFO STREAM, which copies the first
    and last entries (~40 us a call with these entries). A nil lag (Redis
    cannot count it) defers to the harness's check."""
    s = socket.create_connection(("127.0.0.1", redis.port))
    f = s.makefile("rb")

    def drained():
        s.sendall(b"".join(resp([b"XINFO", b"GROUPS", b"ember:ingest:%d" % p])
                           for p in range(partitions)))
        groups = [[dh._pairs(g) for g in dh._resp(f)] for _ in range(partitions)]
        if any(not g or g[0].get("lag") is None for g in groups):
            t = redis.totals()
            return t["pending"] == 0 and t["lag"] == 0
        return all(g[0]["pending"] == 0 and g[0]["lag"] == 0 for g in groups)

    try:
        return h.wait_for(drained, timeout=timeout, interval=0.25, what="streams drained")
    finally:
        s.close()


# Redis CPU per profile of the tree before issue 19 (bench/README.md, "redis: lean
# entries ..."): the mean of its three runs, absolute and divided by the same run's
# raw XADD CPU per profile (which normalises for the machine's load of the moment).
BEFORE_REDIS_CPU_MS = 0.990
BEFORE_REDIS_CPU_PER_RAW = 3.63


def entry_bytes_total(srv):
    """ember's own count of lean entry bytes published (0 before lean entries)."""
    return sum(v for (name, labels), v in srv.metrics().items()
               if name == "ember_stream_entry_bytes_total" and ("form", "entry") in labels)


def proc_cpu_seconds(srv):
    """utime + stime of the ember process so far."""
    with open(f"/proc/{srv.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PHASES = (("ember_redis_consumer_phase_seconds_total", ("read", "apply", "ack")),
          ("ember_writer_phase_seconds_total", ("decode", "write", "commit")))
# Decoded profiles the receivers left for the writer over Redis, by result.
HANDOVER = ("ember_ingest_handover_total", ("kept", "full", "taken", "passed", "expired"))


def phase_seconds(srv):
    """The consumer's and the writer's seconds by phase (wall time), and the
    handover's counts by result."""
    m = srv.metrics()
    sums = {(name, ph): sum(v for (n, labels), v in m.items() if n == name and ("phase", ph) in labels)
            for name, phases in PHASES for ph in phases}
    name, results = HANDOVER
    sums.update({(name, r): sum(v for (n, labels), v in m.items()
                                if n == name and ("result", r) in labels) for r in results})
    return sums


def mean_entry_bytes(redis, partitions):
    """Mean size of the `m` field of the newest entries left in the streams
    (trimming keeps the tail), or None when every stream is empty."""
    sizes = []
    for p in range(partitions):
        flat = redis.cmd("XREVRANGE", f"ember:ingest:{p}", "+", "-", "COUNT", "20") or []
        for entry in flat:
            fields = entry[1]
            for k in range(0, len(fields), 2):
                if fields[k] == b"m":
                    sizes.append(len(fields[k + 1]))
    return sum(sizes) / len(sizes) if sizes else None


def round_ratio(rd):
    """A round's redis/direct end-to-end profiles per second."""
    return ((rd["redis"]["r"]["ok"] / rd["redis"]["secs"])
            / (rd["direct"]["r"]["ok"] / rd["direct"]["secs"]))


def load_args(requests):
    """The load's options, shared with bench/redis_cluster_ingest.py."""
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--requests", type=int, default=requests)
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--mix", type=parse_mix, default=MIX,
                    help="'heap' (issue 32's mix: two heap profiles with four sample types "
                         "and four CPU profiles), 'default', or comma-separated pprof files "
                         "(paths under testdata, or any path); default: the five of "
                         "bench/ingest_bench.py")
    return ap


def ingest_load(a, bodies, port, app, n):
    """bench/ingest_load: n requests over a.conns connections; its JSON summary."""
    load_bin = os.path.join(a.build_dir, "bench", "ingest_load")
    r = subprocess.run([load_bin, str(port), str(a.conns), str(n), str(len(a.mix)), str(a.pods),
                        app, *bodies], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def alternate(n_rounds, kinds, measure, report=None):
    """n_rounds rounds measuring both kinds, a fresh server each time: this
    host's speed drifts by 20% within a minute, so each round's ratio compares
    runs made seconds apart (report the median round). Which goes first
    alternates too, and each starts after a sync, so that neither pays for the
    other's writeback (a redis round leaves ~300 MB of AOF behind). report(i,
    round) is called after each round."""
    rounds = []
    for i in range(n_rounds):
        rd = {}
        for kind in (kinds if i % 2 == 0 else kinds[::-1]):
            os.sync()
            rd[kind] = measure(kind)
        rounds.append(rd)
        if report:
            report(i, rd)
    return rounds


def main():
    ap = load_args(4000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--pipeline", type=int, default=256)
    ap.add_argument("--appendfsync", default="always", choices=("always", "everysec", "no"))
    ap.add_argument("--rdbcompression", default="no", choices=("no", "yes"))
    ap.add_argument("--rounds", type=int, default=3,
                    help="direct/redis pairs, alternating; the median round is reported")
    ap.add_argument("--ingesters", type=int, default=0,
                    help="also measure N ember-ingester processes sharing the streams")
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
    import distributed_harness as dh
    import harness as h

    tmp = tempfile.mkdtemp(prefix="ember-bench-redis-")
    atexit.register(shutil.rmtree, tmp, True)  # profiles and data dirs: many MB
    bodies = make_bodies(h, tmp, a.variants, a.mix)
    if a.requests > len(bodies) * a.pods:
        sys.exit(f"--requests must be <= {len(bodies) * a.pods} (distinct series,time)")

    def run_load(port, app, n=a.requests):
        return ingest_load(a, bodies, port, app, n)

    redis = dh.Redis()
    redis.start()
    redis.cmd("CONFIG", "SET", "appendfsync", a.appendfsync)
    redis.cmd("CONFIG", "SET", "rdbcompression", a.rdbcompression)

    def measure_direct():
        """A fresh all-in-one on the in-process transport: a 200 means stored."""
        srv = h.Ember(log_level="warn").start()
        try:
            run_load(srv.port, "warmup", 200)
            cpu0 = proc_cpu_seconds(srv)
            r = run_load(srv.port, "bench-app")
            return {"r": r, "secs": r["seconds"], "cpu": proc_cpu_seconds(srv) - cpu0}
        finally:
            srv.cleanup()

    def measure_redis():
        """A fresh all-in-one over the streams (the same process shape): end to
        end is until the last 200 and the streams drained."""
        srv = h.Ember(log_level="warn",
                      args=[f"--redis.url={redis.url}", f"--ingest.partitions={a.partitions}"])
        srv.start()
        try:
            run_load(srv.port, "warmup", 200)
            redis.wait_drained(timeout=120)
            cpu0, net0 = redis_cpu_seconds(redis), redis_net_input(redis)
            kids0 = redis_children(redis)
            cmds0 = redis_commandstats(redis)
            lean0 = entry_bytes_total(srv)
            phases0, ember_cpu0 = phase_seconds(srv), proc_cpu_seconds(srv)
            r = run_load(srv.port, "bench-app")
            t_end = time.monotonic()
            wait_drained(h, dh, redis, a.partitions, timeout=300)
            drain = time.monotonic() - t_end
            cmds1 = redis_commandstats(redis)
            kids1 = redis_children(redis)
            return {"r": r, "secs": r["seconds"] + drain,
                    "cpu": proc_cpu_seconds(srv) - ember_cpu0,
                    "phases": {k: v - phases0[k] for k, v in phase_seconds(srv).items()},
                    "redis_cpu": redis_cpu_seconds(redis) - cpu0,
                    "redis_kids": (kids1[0] - kids0[0], kids1[1] - kids0[1]),
                    "net": redis_net_input(redis) - net0,
                    "cmds": {k: (c - cmds0.get(k, (0, 0))[0], u - cmds0.get(k, (0, 0))[1])
                             for k, (c, u) in cmds1.items()},
                    "lean": entry_bytes_total(srv) - lean0}
        finally:
            srv.cleanup()

    try:
        rounds = alternate(a.rounds, ("direct", "redis"),
                           lambda name: measure_direct() if name == "direct" else measure_redis())
        rounds.sort(key=round_ratio)
        median = rounds[len(rounds) // 2]
        results = {k: (median[k]["r"], median[k]["secs"]) for k in ("direct", "redis")}
        m = median["redis"]
        cpu_direct, cpu_redis, phases, cmd_delta = (median["direct"]["cpu"], m["cpu"],
                                                    m["phases"], m["cmds"])
        added = redis.totals()["added"]
        lean = m["lean"] / max(1, m["r"]["ok"])
        entry_bytes = lean or mean_entry_bytes(redis, a.partitions)
        entry_source = ("all published, ember_stream_entry_bytes_total" if lean
                        else "newest entries, XREVRANGE")
        # Redis's CPU drifts as much as the rest: the median over the rounds.
        redis_cpu_by_round = [rd["redis"]["redis_cpu"] * 1000 / max(1, rd["redis"]["r"]["ok"])
                              for rd in rounds]
        redis_cpu_ms = sorted(redis_cpu_by_round)[len(rounds) // 2]
        net_per_profile = m["net"] / max(1, m["r"]["ok"])

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
                procs = [subprocess.Popen([load_bin, str(i.port), str(conns), str(per), str(len(a.mix)),
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
        cpu0 = redis_cpu_seconds(redis)
        floors = raw_floors(redis.port, payloads, a.requests, a.partitions, a.pipeline,
                            lambda: redis_cpu_seconds(redis) - cpu0)
    finally:
        redis.cleanup()

    n = a.requests
    avg_kib = sum(len(p) for p in payloads) / len(payloads) / 1024
    print(f"redis ingest benchmark: {n} profiles ({avg_kib:.1f} KiB gz avg, mix of {len(a.mix)} real "
          f"profiles), {a.conns} connections, {a.partitions} streams, appendfsync {a.appendfsync}, "
          f"rdbcompression {a.rdbcompression}")
    print(f"  {len(rounds)} rounds of direct and redis; redis/direct end to end by round "
          "(ascending): " + ", ".join(f"{round_ratio(rd):.3f}" for rd in rounds)
          + "; the median round below")
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
    rows["raw"] = n / floors["raw"]
    print(f"{f'raw XADD, pipelined x{a.pipeline} (floor)':<44}{rows['raw']:>12,.0f}")
    for k, label in (("eval", "raw publish script, EVAL"), ("evalsha", "raw publish script, EVALSHA")):
        print(f"{f'  {label}':<44}{n / floors[k]:>12,.0f}")
    print(f"  redis/direct {rows['redis'] / rows['direct']:.3f}   redis/raw {rows['redis'] / rows['raw']:.3f}"
          f"   direct/raw {rows['direct'] / rows['raw']:.3f}   (stream entries added: {added})")
    gz = sum(len(p) for p in payloads) / len(payloads)
    entry = (f"{entry_bytes / 1024:.1f} KiB ({entry_source})" if entry_bytes
             else "n/a (streams empty)")
    print(f"  mean stream entry {entry} (gzip of the received profile {gz / 1024:.1f} KiB); "
          f"Redis input per profile {net_per_profile / 1024:.1f} KiB")
    print(f"  Redis CPU per profile: redis transport {redis_cpu_ms:.3f} ms (median; by round as above "
          + ", ".join(f"{x:.3f}" for x in redis_cpu_by_round) + "), "
          f"raw XADD of the gzip bodies {floors['raw_cpu'] * 1000 / n:.3f} ms")
    kids_by_round = [rd["redis"]["redis_kids"] for rd in rounds]
    print("  Redis's AOF rewrite children, CPU per profile (not in the above): " + ", ".join(
        f"{c * 1000 / max(1, rd['redis']['r']['ok']):.3f} ms ({k} rewrites)"
        for (c, k), rd in zip(kids_by_round, rounds)))
    print(f"  ember CPU per profile: direct {cpu_direct * 1000 / n:.2f} ms, redis "
          f"{cpu_redis * 1000 / n:.2f} ms (direct/redis {cpu_direct / max(cpu_redis, 1e-9):.2f}); "
          f"load average {os.getloadavg()[0]:.1f}")
    print("  redis phases, wall ms per profile: " + ", ".join(
        f"{name.split('_')[1]} {ph} {phases[(name, ph)] * 1000 / n:.2f}"
        for name, phs in PHASES for ph in phs))
    print("  handover (decoded profiles left for the writer): " + ", ".join(
        f"{r} {phases[(HANDOVER[0], r)]:.0f}" for r in HANDOVER[1]) + f" of {n} profiles")
    busiest = sorted(cmd_delta.items(), key=lambda kv: -kv[1][1])[:6]
    print("  Redis commands in the redis phase (calls, usec/call, usec/profile): " + "; ".join(
        f"{k} {c} {u / max(c, 1):.0f} {u / n:.0f}" for k, (c, u) in busiest if c))
    d, rr = results["direct"][0], results["redis"][0]
    print("targets:")
    print(f"  redis end to end / direct  {rows['redis'] / rows['direct']:.3f}  (>= 0.85)")
    print(f"  acknowledged p99 / direct p99  {rr['p99_ms'] / max(d['p99_ms'], 1e-9):.2f}  (<= 2)")
    if entry_bytes:
        print(f"  stream entry / gzip size  {entry_bytes / gz:.2f}  (<= 1)")
    raw_cpu_ms = floors["raw_cpu"] * 1000 / n
    print(f"  Redis CPU per profile {redis_cpu_ms:.3f} ms: {BEFORE_REDIS_CPU_MS / redis_cpu_ms:.2f}x "
          f"lower than before ({BEFORE_REDIS_CPU_MS} ms)  (>= 3); per raw XADD's "
          f"{redis_cpu_ms / raw_cpu_ms:.2f} against {BEFORE_REDIS_CPU_PER_RAW}: "
          f"{BEFORE_REDIS_CPU_PER_RAW * raw_cpu_ms / redis_cpu_ms:.2f}x lower")
    if "cluster" in rows:
        print(f"  cluster/redis {rows['cluster'] / rows['redis']:.3f}   cluster/raw "
              f"{rows['cluster'] / rows['raw']:.3f}")
    ok = all(res[0]["ok"] == (n // a.ingesters * a.ingesters if k == "cluster" else n)
             for k, res in results.items())
    ok = ok and all(rd[k]["r"]["ok"] == n for rd in rounds for k in ("direct", "redis"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
