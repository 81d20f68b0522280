"""Closed blocks in the object store, the all-in-one `ember` with the
filesystem backend (issue 27): the objects on disk are checked with
independent tools (hashlib, json, Python's own LMDB-free reading of the
header line), a wiped data dir is restored, and --retention deletes objects.

- every closed block goes up once: one data object and one index entry per
  block; each object's SHA-256 header matches hashlib's digest of its bytes,
  and the data object is byte-identical to the block file the restore puts
  back (what ember wrote is what comes back);
- after the data dir is deleted, `ember` restarted under the same
  --ingester.id answers the same totals as before (the oracle: what the test
  sent), and uploads nothing again;
- restarted with --retention shorter than the oldest blocks, the expired
  blocks' index entries and data objects leave the bucket, the others stay.
"""
import glob
import hashlib
import json
import os
import shutil
import time
import unittest

import distributed_harness as dh
import harness as h

HOUR_MS = 3600 * 1000
NS_PER_SAMPLE = 10_000_000  # a folded count at 100 Hz: 10 ms of CPU, in ns
read_object = dh.bucket_object


class BucketFilesystemTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bucket = h.temp_dir("ember-bucket-fs-")
        cls.args = ["--storage.backend=filesystem", f"--storage.filesystem.dir={cls.bucket}",
                    "--storage.prefix=p1", "--ingester.id=aio-1", "--storage.block-duration=1h",
                    "--storage.local-retention=0"]
        cls.e = h.Ember(args=cls.args)
        cls.e.start()
        cls.t0 = (h.now_ms() // HOUR_MS - 7) * HOUR_MS
        cls.t1 = cls.t0 + 5 * HOUR_MS
        cls.sent = 0
        for i in range(50):
            ts = (cls.t0 + (i % 5) * HOUR_MS) // 1000 + (i * 37) % 3600
            body = dh.folded(1000 + i)
            r = cls.e.ingest('app.cpu{svc="x"}', body, params={
                "from": str(ts), "until": str(ts + 10), "format": "folded", "sampleRate": "100"})
            assert r.status == 200, r.describe()
            cls.sent += sum(int(l.rsplit(" ", 1)[1]) for l in body.decode().splitlines()) \
                * NS_PER_SAMPLE
        h.wait_for(lambda: len(cls.index_files()) == 5 and
                   dh.gauge(cls.e, "ember_bucket_blocks_pending") == 0,
                   timeout=120, interval=0.5, what="5 blocks uploaded")

    @classmethod
    def tearDownClass(cls):
        cls.e.cleanup()
        shutil.rmtree(cls.bucket, ignore_errors=True)

    @classmethod
    def index_files(cls):
        return sorted(glob.glob(os.path.join(cls.bucket, "p1", "index", "*", "*.json")))

    def total(self):
        return dh.merged_total(self.e, self.t0, self.t1)

    def test_1_objects_checksummed_and_restored_byte_identical(self):
        self.assertEqual(self.sent, self.total())
        metas = []
        for path in self.index_files():
            body, digest = read_object(path)
            self.assertEqual(hashlib.sha256(body).hexdigest(), digest, path)
            metas.append(json.loads(body))
        self.assertEqual(5, len(metas))
        self.assertEqual(50, sum(m["profiles"] for m in metas))
        self.assertEqual({"aio-1"}, {m["ingester"] for m in metas})
        data = {}
        for m in metas:
            body, digest = read_object(os.path.join(self.bucket, "p1", m["data"]))
            self.assertEqual(hashlib.sha256(body).hexdigest(), digest)
            self.assertEqual(m["bytes"], len(body))
            data[m["block"]] = body

        self.e.stop()
        shutil.rmtree(self.e.data_dir)
        self.e.start(timeout=60)
        self.assertEqual(self.sent, self.total(), "after the data dir was deleted")
        for block, body in data.items():
            with open(os.path.join(self.e.data_dir, "blocks", block, "data.mdb"), "rb") as f:
                restored = f.read()
            self.assertEqual(hashlib.sha256(body).hexdigest(),
                             hashlib.sha256(restored[:len(body)]).hexdigest(), block)
        time.sleep(5)  # two upload passes: nothing goes up again
        self.assertEqual(0, dh.metric(self.e, "ember_bucket_blocks_uploaded_total"))

    def test_2_retention_deletes_objects(self):
        # blocks start at t0 .. t0+4h, t0 = the hour 7 h before this one: with 5 h of
        # retention the two oldest ended before now - 5 h, the other three did not
        keep_from_ms = self.t0 + 2 * HOUR_MS
        self.e.stop()
        self.e.start(args=[*self.args, "--retention=5h"], timeout=60)
        def expired_gone():
            starts = [json.loads(read_object(p)[0])["start_ns"] // 1_000_000
                      for p in self.index_files()]
            return starts and min(starts) >= keep_from_ms
        h.wait_for(expired_gone, timeout=60, interval=0.5, what="expired index entries deleted")
        left = self.index_files()
        self.assertEqual(3, len(left))
        names = {os.path.basename(p)[:-5] for p in left}
        data_dirs = {os.path.basename(os.path.dirname(p)) for p in
                     glob.glob(os.path.join(self.bucket, "p1", "blocks", "*", "*", "block.mdb"))}
        self.assertEqual(names, data_dirs, "data objects go with their index entries")


if __name__ == "__main__":
    unittest.main()
