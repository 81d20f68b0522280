#!/usr/bin/python3
"""A week's flame graph read back from the object store (issue 27,
--storage.local-retention) with a cold and a warm cache, against all-local,
in one run, on two data shapes.

Per shape, one `ember` with --storage.backend=s3 against SeaweedFS on loopback
(tests/integration/weed_harness.py), 1 h blocks, a week (168 hours) pushed:
  all-local : --storage.local-retention=0, every block uploaded and the
              summaries settled; SelectMergeStacktraces over the 7 days,
              median of --rounds;
  cold      : restarted with --storage.local-retention=1h: every hour of the
              week leaves the data dir (confirmed in the bucket first) and the
              cache (<data.dir>/bucket-cache) starts empty: the first query,
              which downloads what it reads; median of --cold-rounds starts
              (each start empties the cache again);
  warm      : the same query again, median of --rounds.
Shapes: "small" (--per-hour folded profiles of 5 services, 3-12 stacks of
depth <= 6) and "wide" (4x the profiles, 40 services, 40-frame stacks: more
series and nodes per block).
Also printed, from the read-back's counters (bucket_read.c): where the cold
query's time went (GET + checksum and write + open summed over the downloads,
which run 4 at a time; the wall time of building the reader) and the warm
query's reader set-up; the rest of a query is merging. A flame graph over
dropped hours reads a whole window's rollup (day, else 6 hours) in place of
its blocks, so the week is ~7 day rollups plus the edges' 6-hour rollups and
blocks.
Correctness check (exit 1 on failure): all-local, cold and warm answers are
byte-identical. Goals (issue 27): warm <= 1.5x, cold <= 5x of all-local.

usage: bench/bucket_query.py BUILD_DIR [--per-hour 6] [--rounds 3] [--cold-rounds 3]
"""
import argparse
import os
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import distributed_harness as dh  # noqa: E402
import harness as h  # noqa: E402
import weed_harness as wh  # noqa: E402

HOUR_MS = 3600 * 1000
HOURS = 7 * 24


def wide_folded(seed):
    """A folded body of 10-30 stacks, 40 frames deep out of 400 names."""
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(10, 30)):
        stack = ";".join(f"pkg{rnd.randint(0, 19)}.fn_{rnd.randint(0, 399)}" for _ in range(40))
        lines.append(f"{stack} {rnd.randint(1, 500)}")
    return ("\n".join(lines) + "\n").encode()


SHAPES = {"small": (1, 5, dh.folded), "wide": (4, 40, wide_folded)}


def flamegraph(e, pt, t0, t1):
    t = time.monotonic()
    fg = e.q("SelectMergeStacktraces", profile_typeID=pt, label_selector="{}", start=t0, end=t1,
             max_nodes=16384)
    return time.monotonic() - t, fg.SerializeToString()


def where_time_goes(e):
    """The read-back's own counters (bucket_read.c): seconds of GETs, of
    writing and opening cached blocks, and of building readers."""
    return {"downloads": dh.metric(e, "ember_bucket_cache_downloads_total"),
            "fetch": dh.metric(e, "ember_bucket_cache_fetch_seconds_total"),
            "open": dh.metric(e, "ember_bucket_cache_open_seconds_total"),
            "setup": dh.metric(e, "ember_bucket_read_setup_seconds_total"),
            "rollups": dh.metric(e, "ember_bucket_rollups_read_total")}


def push_week(e, t0, per_hour, services, body_of):
    n = 0
    for hour in range(HOURS):
        for k in range(per_hour):
            ts = (t0 + hour * HOUR_MS) // 1000 + k * (3600 // per_hour)
            r = e.ingest('bench.cpu{svc="s%d"}' % (n % services), body_of(n),
                         params={"from": str(ts), "until": str(ts + 10), "format": "folded"})
            assert r.status == 200, r.describe()
            n += 1
    return n


def settled(e):
    return (dh.metric(e, "ember_bucket_blocks_uploaded_total") >= HOURS and
            dh.gauge(e, "ember_bucket_blocks_pending") == 0 and
            dh.gauge(e, "ember_store_blocks_uncompacted") == 0)


def report(name, n, uploaded, rollups, local, colds, warm, parts, rounds, cold_rounds):
    """Prints one shape's figures; True when every answer was byte-identical."""
    before, after_cold, after_warm = parts
    local_s = statistics.median(x[0] for x in local)
    warm_s = statistics.median(x[0] for x in warm)
    cold = (statistics.median(x[0] for x in colds), colds[0][1])
    same = len({x[1] for x in [*local, *colds, *warm]}) == 1
    print(f"shape {name}: {n} profiles in {HOURS} blocks, {uploaded / 1e6:.1f} MB in SeaweedFS, "
          f"{rollups:.0f} day/6-hour rollups uploaded beside them")
    print(f"  all-local week flame graph : {local_s * 1000:8.1f} ms (median of {rounds})")
    print(f"  cold cache (downloads all) : {cold[0] * 1000:8.1f} ms = "
          f"{cold[0] / local_s:5.2f}x all-local (goal <= 5x; median of {cold_rounds} starts)")
    print(f"  warm cache                 : {warm_s * 1000:8.1f} ms = "
          f"{warm_s / local_s:5.2f}x all-local (goal <= 1.5x)")
    cold_parts = {k: after_cold[k] - before[k] for k in before}
    warm_parts = {k: (after_warm[k] - after_cold[k]) / rounds for k in before}
    print(f"  cold: {cold_parts['downloads']:.0f} downloads ({cold_parts['rollups']:.0f} windows "
          f"answered by their rollup), GET+verify "
          f"{cold_parts['fetch'] * 1000:.1f} ms summed over the workers, write+open "
          f"{cold_parts['open'] * 1000:.1f} ms summed, reader set-up (wall) "
          f"{cold_parts['setup'] * 1000:.1f} ms, the rest merging")
    print(f"  warm: reader set-up {warm_parts['setup'] * 1000:.1f} ms a query, "
          f"{warm_parts['downloads']:.0f} downloads, the rest merging")
    print(f"  answers byte-identical     : {same}")
    return same


def run_shape(weed, name, per_hour, rounds, cold_rounds):
    mult, services, body_of = SHAPES[name]
    args = [*weed.storage_args(f"q{os.getpid()}{name}"), "--ingester.id=bench",
            "--storage.block-duration=1h"]
    e = h.Ember(args=[*args, "--storage.local-retention=0"])
    try:
        e.start()
        t1 = (h.now_ms() // HOUR_MS - 1) * HOUR_MS
        t0 = t1 - HOURS * HOUR_MS
        n = push_week(e, t0, per_hour * mult, services, body_of)
        h.wait_for(lambda: settled(e), timeout=900, interval=1.0, what="168 blocks uploaded")
        time.sleep(5)  # the summary pass after compaction: rollups for all-local
        pt = e.q("ProfileTypes", start=t0, end=t1).profile_types[0].ID
        local = [flamegraph(e, pt, t0, t1) for _ in range(rounds)]
        uploaded = dh.metric(e, "ember_bucket_uploaded_bytes_total")
        rollups = dh.metric(e, "ember_bucket_rollups_uploaded_total")  # bucket_rollup.c
        e.stop()
        e.start(args=[*args, "--storage.local-retention=1h"], timeout=600)
        h.wait_for(lambda: dh.metric(e, "ember_bucket_local_blocks_dropped_total") >= HOURS,
                   timeout=600, interval=1.0, what="the week dropped locally")
        colds = []
        for k in range(cold_rounds):  # each start empties the cache
            if k:
                e.stop()
                e.start(args=[*args, "--storage.local-retention=1h"], timeout=600)
            before = where_time_goes(e)
            colds.append(flamegraph(e, pt, t0, t1))
            after_cold = where_time_goes(e)
        warm = [flamegraph(e, pt, t0, t1) for _ in range(rounds)]
        after_warm = where_time_goes(e)
    finally:
        e.cleanup()
    return report(name, n, uploaded, rollups, local, colds, warm,
                  (before, after_cold, after_warm), rounds, cold_rounds)


def run_shape_distributed(weed, name, per_hour, rounds, cold_rounds):
    """The week through Redis into one ember-ingester; asked of an ember-querier."""
    mult, services, body_of = SHAPES[name]
    bucket = [*weed.storage_args(f"d{os.getpid()}{name}"), "--storage.block-duration=1h"]
    redis = dh.Redis()
    redis.start()
    ing = dh.zoned_ingester(redis.url, "a", "bench", [*bucket, "--storage.local-retention=0"])
    q = dh.querier(redis.url, bucket)
    try:
        ing.start()
        q.start()
        dh.wait_zones(q, live=1, complete=1, asked=1, timeout=60)
        t1 = (h.now_ms() // HOUR_MS - 1) * HOUR_MS
        t0 = t1 - HOURS * HOUR_MS
        n = push_week(ing, t0, per_hour * mult, services, body_of)
        dh.wait_groups_drained(redis, ["ingesters.a"], timeout=600)
        h.wait_for(lambda: settled(ing), timeout=900, interval=1.0, what="168 blocks uploaded")
        time.sleep(5)  # the summary pass after compaction: rollups for all-local
        pt = q.q("ProfileTypes", start=t0, end=t1).profile_types[0].ID
        local = [flamegraph(q, pt, t0, t1) for _ in range(rounds)]
        uploaded = dh.metric(ing, "ember_bucket_uploaded_bytes_total")
        rollups = dh.metric(ing, "ember_bucket_rollups_uploaded_total")
        ing.stop()
        args = [a for a in ing.args if not a.startswith("--storage.local-retention")]
        ing.start(args=[*args, "--storage.local-retention=1h"], timeout=600)
        h.wait_for(lambda: dh.metric(ing, "ember_bucket_local_blocks_dropped_total") >= HOURS,
                   timeout=600, interval=1.0, what="the week dropped locally")

        def querier_sees_mark():
            return dh.gauge(q, "ember_querier_lowest_mark_seconds") >= t1 / 1000
        h.wait_for(querier_sees_mark, timeout=60, what="the querier reading below the mark")
        colds = []
        for k in range(cold_rounds):  # each start empties the querier's cache
            if k:
                q.stop()
                q.start(timeout=120)
                dh.wait_zones(q, live=1, complete=1, asked=1, timeout=60)
                h.wait_for(querier_sees_mark, timeout=60, what="the querier reading the mark")
            before = where_time_goes(q)
            colds.append(flamegraph(q, pt, t0, t1))
            after_cold = where_time_goes(q)
        warm = [flamegraph(q, pt, t0, t1) for _ in range(rounds)]
        after_warm = where_time_goes(q)
        assert where_time_goes(ing)["downloads"] == 0, "the ingester read nothing back"
    finally:
        for p in (q, ing):
            p.stop()
            p.cleanup()
        redis.cleanup()
    return report(name, n, uploaded, rollups, local, colds, warm,
                  (before, after_cold, after_warm), rounds, cold_rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--per-hour", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold-rounds", type=int, default=3,
                    help="cold queries, each after a restart (which empties the cache)")
    ap.add_argument("--shapes", default="small,wide")
    ap.add_argument("--distributed", action="store_true",
                    help="ember-ingester over Redis, the week asked of ember-querier")
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build)
    weed = wh.Weed().start()
    try:
        run = run_shape_distributed if a.distributed else run_shape
        ok = all([run(weed, s, a.per_hour, a.rounds, a.cold_rounds) for s in a.shapes.split(",")])
    finally:
        weed.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
