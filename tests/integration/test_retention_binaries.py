"""--retention means the same in every binary that stores profiles.

A profile five hours old is backfilled into a fresh data dir; the process is
restarted on that dir with --retention=2h, and the block holding the old
profile must go (its directory under DATA/blocks/ disappears and
ember_retention_blocks_dropped_total counts it), while a recent profile's
block stays. Run against `ember`, standalone `ember-ingester`, and
`ember-ingester` over a real redis-server (the binary whose retention was
once accepted and never applied).
"""
import os
import time
import unittest

import distributed_harness as dh
import harness as h

SOURCE = "pprof/gopprof-sample.cpu"
HOUR_NS = 3600 * 10**9


def block_dirs(data_dir):
    d = os.path.join(data_dir, "blocks")
    return {n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))} if os.path.isdir(d) else set()


class RetentionInEveryBinaryTest(unittest.TestCase):

    def push(self, proc, service, time_ns):
        raw = h.set_time_nanos(h.read_testdata(SOURCE), time_ns)
        r = proc.ingest(f"{service}{{env=test}}", raw, {"format": "pprof"},
                        content_type="application/octet-stream")
        self.assertEqual(r.status, 200, r.describe())

    def check_retention(self, proc, redis=None):
        self.addCleanup(proc.cleanup)
        proc.start()
        data = proc.data_dir
        self.push(proc, "five-hours-old", time.time_ns() - 5 * HOUR_NS)
        if redis:
            dh.wait_groups_drained(redis, ["ingesters"])
        h.wait_for(lambda: len(block_dirs(data)) == 1, timeout=20, what="the old profile's block")
        old = block_dirs(data)
        self.push(proc, "recent", time.time_ns() - 60 * 10**9)
        if redis:
            dh.wait_groups_drained(redis, ["ingesters"])
        h.wait_for(lambda: len(block_dirs(data)) == 2, timeout=20, what="the recent profile's block")
        recent = block_dirs(data) - old
        self.assertEqual(proc.stop(), 0, proc.log_tail())

        proc.start(args=[*proc.args, "--retention=2h"])
        h.wait_for(lambda: not (block_dirs(data) & old), timeout=30,
                   what=f"block {sorted(old)} five hours old dropped by --retention=2h")
        self.assertEqual(block_dirs(data), recent, "the recent block must stay")
        # counted once lc_store_retention returns, just after the directory went
        h.wait_for(lambda: dh.metric(proc, "ember_retention_blocks_dropped_total") >= 1,
                   timeout=10, what="ember_retention_blocks_dropped_total counting the drop")

    def test_ember(self):
        self.check_retention(h.Ember())

    def test_ember_ingester_standalone(self):
        b = os.path.join(h.BIN_DIR, "services", "ingester", "ember-ingester")
        self.check_retention(dh.Role(b, True))

    def test_ember_ingester_over_redis(self):
        redis = dh.Redis()
        self.addCleanup(redis.cleanup)
        redis.start()
        self.check_retention(dh.ingester(redis.url), redis)


if __name__ == "__main__":
    unittest.main()
