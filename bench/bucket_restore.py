#!/usr/bin/python3
"""A week's flame graph when the blocks come from the object store (issue 27),
against all-local, in one run.

In this version of ember the bucket is read by the ingester that wrote a block
(docs/architecture.md, "Closed blocks in the object store"): a data dir that
lost its blocks downloads them before the process serves, and queries then run
on local blocks. So the figures are:

  all-local : the week's flame graph (SelectMergeStacktraces over 7 days) on the
              `ember` that wrote the blocks — median of --rounds;
  cold      : the data dir deleted, `ember` started again under the same
              --ingester.id: time until it is ready (listing + downloading
              every block of the week from SeaweedFS on loopback) plus the
              first flame graph;
  warm      : the same query again (median of --rounds): the blocks are local,
              the rollups not yet (they are not uploaded);
  settled   : 10 s later, once the summary pass rebuilt the rollups.

Correctness check (exit 1 on failure): the three answers are byte-identical.
Uses SeaweedFS (tests/integration/weed_harness.py) and the folded format, 1 h
blocks, --per-hour profiles in each of the 168 hours.

usage: bench/bucket_restore.py BUILD_DIR [--per-hour 6] [--rounds 3]
"""
import argparse
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

import distributed_harness as dh  # noqa: E402
import harness as h  # noqa: E402
import weed_harness as wh  # noqa: E402

HOUR_MS = 3600 * 1000


def flamegraph(e, pt, t0, t1):
    t = time.monotonic()
    fg = e.q("SelectMergeStacktraces", profile_typeID=pt, label_selector="{}", start=t0, end=t1,
             max_nodes=16384)
    return time.monotonic() - t, fg.SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--per-hour", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build)
    weed = wh.Weed().start()
    args = ["--storage.backend=s3", f"--storage.s3.endpoint={weed.endpoint}",
            f"--storage.s3.bucket-name={wh.BUCKET}", "--storage.s3.force-path-style",
            f"--storage.s3.access-key-id={wh.ACCESS}",
            f"--storage.s3.secret-access-key={wh.SECRET}", f"--storage.prefix=b{os.getpid()}",
            "--ingester.id=bench", "--storage.block-duration=1h",
            "--storage.local-retention=0"]  # the restore of every block is what is measured
    e = h.Ember(args=args)
    try:
        e.start()
        t1 = (h.now_ms() // HOUR_MS - 1) * HOUR_MS
        t0 = t1 - 7 * 24 * HOUR_MS
        n = 0
        for hour in range(7 * 24):
            for k in range(a.per_hour):
                ts = (t0 + hour * HOUR_MS) // 1000 + k * (3600 // a.per_hour)
                r = e.ingest('bench.cpu{svc="s%d"}' % (n % 5), dh.folded(n),
                             params={"from": str(ts), "until": str(ts + 10), "format": "folded"})
                assert r.status == 200, r.describe()
                n += 1
        h.wait_for(lambda: dh.metric(e, "ember_bucket_blocks_uploaded_total") >= 168 and
                   dh.gauge(e, "ember_bucket_blocks_pending") == 0,
                   timeout=600, interval=1.0, what="168 blocks uploaded")
        pt = e.q("ProfileTypes", start=t0, end=t1).profile_types[0].ID
        local = [flamegraph(e, pt, t0, t1) for _ in range(a.rounds)]
        uploaded = dh.metric(e, "ember_bucket_uploaded_bytes_total")
        e.stop()
        shutil.rmtree(e.data_dir)
        t = time.monotonic()
        e.start(timeout=600)
        restore_s = time.monotonic() - t
        first_s, first = flamegraph(e, pt, t0, t1)
        warm = [flamegraph(e, pt, t0, t1) for _ in range(a.rounds)]
        # rollups are not uploaded: the summary pass rebuilds them from the restored
        # blocks a few seconds after the start
        time.sleep(10)
        settled = [flamegraph(e, pt, t0, t1) for _ in range(a.rounds)]
    finally:
        e.cleanup()
        weed.stop()
    local_s = statistics.median(x[0] for x in local)
    warm_s = statistics.median(x[0] for x in warm)
    settled_s = statistics.median(x[0] for x in settled)
    same = len({x[1] for x in local + warm + settled} | {first}) == 1
    print(f"bucket: {n} profiles in 168 blocks, {uploaded / 1e6:.1f} MB uploaded to SeaweedFS")
    print(f"  all-local week flame graph : {local_s * 1000:8.1f} ms (median of {a.rounds})")
    print(f"  cold: restore {restore_s * 1000:.0f} ms + first query {first_s * 1000:.1f} ms "
          f"= {(restore_s + first_s) / local_s:.1f}x all-local")
    print(f"  warm (blocks local again)  : {warm_s * 1000:8.1f} ms = {warm_s / local_s:.2f}x")
    print(f"  10 s later (rollups rebuilt): {settled_s * 1000:7.1f} ms = {settled_s / local_s:.2f}x")
    print(f"  answers byte-identical     : {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
