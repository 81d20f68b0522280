"""--storage.local-retention (issue 27): the all-in-one `ember` with the
filesystem backend drops a local block only once the bucket is confirmed to
hold its current content. Oracles: what the test sent (per hour, counted
here), the block directories on disk, the bucket's objects read with
hashlib and json.

- the bucket is unusable (its directory replaced by a file): the old blocks
  stay local however old they are, the merged total equals what was sent;
- the bucket works again: exactly the blocks that ended before now minus
  the local retention leave the data dir, each one's index entry names as
  many profiles as the test sent into that hour, the recent block stays, nothing was lost from the
  bucket (index profiles sum to what was sent);
- dropped hours are read back: the merged total equals what was sent, and
  the merged pprof is byte-identical to the all-local one (cold, warm cache);
- a late profile into a dropped hour makes a new local block that goes up
  under a new name: the dropped block's objects are byte-identical to before
  and the two index entries of that hour hold the old profiles plus the late
  one; both are read back;
- a cache bounded to two blocks answers hour by hour and never holds more
  than its bound on disk; a query needing more at once fails;
- after a lost volume, a late profile into a dropped hour is answered beside
  that hour's objects in the bucket.
"""
import glob
import hashlib
import json
import os
import shutil
import unittest

import distributed_harness as dh
import harness as h

HOUR_MS = 3600 * 1000
HOURS = 5
PUSHES = 50

read_object = dh.bucket_object


class BucketLocalRetentionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bucket = h.temp_dir("ember-bucket-lr-")
        # hours t0 .. t0+4h with t0 = the hour 7 h before this one. The local
        # retention puts the drop threshold (now - retention) half an hour
        # after the end of t0+3h's block, whatever the minute now: the blocks
        # of t0 .. t0+3h are past it, t0+4h's block stays local for the next
        # 30 minutes (a fixed 3h made it droppable at the next full hour, and
        # a run across one counted that drop as the late block's)
        now_ms = h.now_ms()
        cls.t0 = (now_ms // HOUR_MS - 7) * HOUR_MS
        cls.t1 = cls.t0 + HOURS * HOUR_MS
        retention_s = (now_ms - (cls.t0 + 4 * HOUR_MS + HOUR_MS // 2)) // 1000
        cls.args = ["--storage.backend=filesystem", f"--storage.filesystem.dir={cls.bucket}",
                    "--ingester.id=aio-lr", "--storage.block-duration=1h",
                    f"--storage.local-retention={retention_s}s"]
        os.makedirs(cls.bucket, exist_ok=True)
        cls.aside = cls.bucket + ".aside"
        os.rename(cls.bucket, cls.aside)  # the bucket is a file: every upload fails
        with open(cls.bucket, "w") as f:
            f.write("not a directory\n")
        cls.e = h.Ember(args=cls.args)
        cls.e.start()
        cls.per_hour = [0] * HOURS
        for i in range(PUSHES):
            cls.push(i, cls.t0 + (i % HOURS) * HOUR_MS + (i * 37) % 3600 * 1000)
            cls.per_hour[i % HOURS] += 1

    @classmethod
    def push(cls, seed, ts_ms):
        dh.push_folded(cls.e, seed, ts_ms)

    @classmethod
    def tearDownClass(cls):
        cls.e.cleanup()
        for p in (cls.bucket, cls.aside):
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.unlink(p)

    def sent_total(self, pushes):
        return sum(sum(int(l.rsplit(" ", 1)[1]) for l in dh.folded(i).decode().splitlines())
                   for i in pushes) * 10_000_000

    def local_starts(self):
        names = os.listdir(os.path.join(self.e.data_dir, "blocks"))
        return sorted(int(n) * 1000 for n in names if n.isdigit())

    def metas(self):
        out = []
        for path in glob.glob(os.path.join(self.bucket, "index", "*", "*.json")):
            body, digest = read_object(path)
            self.assertEqual(hashlib.sha256(body).hexdigest(), digest, path)
            out.append(json.loads(body))
        return out

    def test_local_retention(self):
        hour_starts = [self.t0 + k * HOUR_MS for k in range(HOURS)]
        # 1. the bucket fails: nothing is dropped, whatever the age
        h.wait_for(lambda: dh.metric(self.e, "ember_bucket_failures_total") >= 3 and
                   dh.gauge(self.e, "ember_bucket_blocks_pending") == HOURS,
                   timeout=120, interval=0.5, what="uploads failing, blocks pending")
        self.assertEqual(0, dh.metric(self.e, "ember_bucket_local_blocks_dropped_total"))
        self.assertEqual(hour_starts, self.local_starts())
        self.assertEqual(self.sent_total(range(PUSHES)), dh.merged_total(self.e, self.t0, self.t1))
        all_local = self.merged_bytes()

        # 2. the bucket works: the four old blocks go, once they are in the bucket
        os.unlink(self.bucket)
        os.rename(self.aside, self.bucket)
        h.wait_for(lambda: dh.metric(self.e, "ember_bucket_local_blocks_dropped_total") == 4,
                   timeout=120, interval=0.5, what="4 local blocks dropped")
        self.assertEqual(hour_starts[4:], self.local_starts())
        metas = self.metas()
        by_start = {m["start_ns"] // 1_000_000: m["profiles"] for m in metas}
        self.assertEqual(dict(zip(hour_starts, self.per_hour)), by_start)
        cold = self.merged_bytes()
        self.assertEqual(self.sent_total(range(PUSHES)), dh.merged_total(self.e, self.t0, self.t1),
                         "dropped hours answered from the bucket")
        self.assertEqual(all_local, cold, "cold cache: the same bytes as all-local")
        # the four objects are fetched by parallel workers: each exactly once
        self.assertEqual(4, dh.metric(self.e, "ember_bucket_cache_downloads_total"))
        self.assertGreater(dh.metric(self.e, "ember_bucket_cache_fetch_seconds_total"), 0)
        self.assertGreater(dh.metric(self.e, "ember_bucket_cache_open_seconds_total"), 0)
        self.assertEqual(all_local, self.merged_bytes(), "warm cache: the same bytes")
        self.assertEqual(4, dh.metric(self.e, "ember_bucket_cache_downloads_total"),
                         "warm: nothing downloaded again")
        objects = {p: read_object(p)[1] for p in
                   glob.glob(os.path.join(self.bucket, "**", "*.*"), recursive=True)}

        # 3. a late profile into the first (dropped) hour: a new block, a new name
        self.push(1000, self.t0 + 60_000)
        h.wait_for(lambda: dh.metric(self.e, "ember_bucket_local_blocks_dropped_total") == 5,
                   timeout=120, interval=0.5, what="the late block uploaded and dropped")
        for path, digest in objects.items():
            self.assertEqual(digest, read_object(path)[1], f"{path} kept as it was")
        first = [m for m in self.metas() if m["start_ns"] // 1_000_000 == self.t0]
        self.assertEqual(2, len(first), first)
        self.assertEqual(sorted([self.per_hour[0], 1]), sorted(m["profiles"] for m in first))
        self.assertEqual(2, len({m["data"] for m in first}))
        late = self.sent_total([*range(PUSHES), 1000])
        self.assertEqual(late, dh.merged_total(self.e, self.t0, self.t1), "old + late, once each")

        # 4. a cache of two blocks' room: hour by hour right, never over the bound; a
        # query that needs more at once fails and changes nothing
        sizes = sorted(m["bytes"] for m in self.metas())
        limit = 2 * sizes[-1] + 64 * 1024  # two blocks and room for the cache's own files
        # the range below needs five of the six objects at once (one hour is local)
        self.assertGreater(sum(sizes[:-1]), limit, sizes)
        self.e.stop()
        self.e.start(args=[*self.args, f"--storage.cache-size={limit}"], timeout=60)
        cache = os.path.join(self.e.data_dir, "bucket-cache")
        for k, hs in enumerate(hour_starts):
            want = self.sent_total([i for i in range(PUSHES) if i % HOURS == k] +
                                   ([1000] if k == 0 else []))
            self.assertEqual(want, dh.merged_total(self.e, hs, hs + HOUR_MS - 1), f"hour {k}")
            self.assertLessEqual(self.disk_bytes(cache), limit, f"cache after hour {k}")
        ptype = self.e.q("ProfileTypes", start=self.t1 - HOUR_MS, end=self.t1).profile_types[0].ID
        with self.assertRaisesRegex(AssertionError, "resource_exhausted"):
            self.e.merge_profile(ptype, "{}", self.t0, self.t1)
        self.assertLessEqual(self.disk_bytes(cache), limit)
        self.assertEqual(self.sent_total(range(PUSHES)) - self.sent_total(
            [i for i in range(PUSHES) if i % HOURS == 0]),
            dh.merged_total(self.e, self.t0 + HOUR_MS, self.t0 + 2 * HOUR_MS - 1) +
            dh.merged_total(self.e, self.t0 + 2 * HOUR_MS, self.t1))

        # 5. a lost volume, then a late profile into a dropped hour: the new local block
        # has no upload record, so the hour's old objects are read beside it
        self.e.stop()
        shutil.rmtree(self.e.data_dir)
        self.e.start(timeout=60)
        self.push(2000, self.t0 + HOUR_MS + 60_000)
        want = self.sent_total([i for i in range(PUSHES) if i % HOURS == 1] + [2000])
        self.assertEqual(want, dh.merged_total(self.e, self.t0 + HOUR_MS, self.t0 + 2 * HOUR_MS - 1),
                         "old objects + the late block after a lost volume")

    def merged_bytes(self):
        ptype = self.e.q("ProfileTypes", start=self.t0, end=self.t1).profile_types[0].ID
        return h.gunzip_if(self.e.merge_profile(ptype, "{}", self.t0, self.t1))

    @staticmethod
    def disk_bytes(top):
        return sum(os.path.getsize(os.path.join(d, f))
                   for d, _, files in os.walk(top) for f in files)


if __name__ == "__main__":
    unittest.main()
