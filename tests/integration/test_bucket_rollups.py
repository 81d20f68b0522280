"""The day and 6-hour rollups go up beside the blocks they sum (issue 27,
"its day/6-hour rollups go up once"): the all-in-one `ember` with the
filesystem backend, every object read back with independent tools (hashlib,
json, LMDB's own mdb_dump).

- every window that ended and holds uploaded blocks gets one rollup entry
  (rollup-index/<ing>/<window>-<level>-<life>.json) naming exactly the
  block objects of that window, with the versions their own index entries
  carry; its data object is checksummed and is an LMDB file whose "windows"
  database holds the record of that window and level (mdb_dump);
- a late profile into an hour of a rolled-up window makes that block go up
  again at a new version; the window's entry then names the new version, its
  data object is a new one and the replaced one is deleted; windows the late
  profile did not touch keep their entries and data unchanged. Entries are
  "guarded": no entry read after the block's index entry shows its new
  version names the old one (withdrawn before the upload; the querier's
  shard relies on this and compares names only);
- once the hours left the data dir, a flame graph over whole windows is
  answered by the rollups read back and equals the all-local one (a range
  that cuts a window reads that window's blocks and equals it too); after
  the data dir is lost, the earlier life's guarded rollups still answer.
"""
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import distributed_harness as dh
import harness as h

HOUR_MS = 3600 * 1000
LEVEL_MS = {0: 6 * HOUR_MS, 1: 24 * HOUR_MS}
read_object = dh.bucket_object


class BucketRollupsTest(unittest.TestCase):
    local_retention = "0"

    @classmethod
    def setUpClass(cls):
        cls.bucket = h.temp_dir("ember-bucket-rollups-")
        cls.e = h.Ember(args=[
            "--storage.backend=filesystem", f"--storage.filesystem.dir={cls.bucket}",
            "--storage.prefix=p1", "--ingester.id=aio-r", "--storage.block-duration=1h",
            f"--storage.local-retention={cls.local_retention}"])
        cls.e.start()
        # hours t0 .. t0+8: at least one 6-hour window of them has ended
        cls.t0 = (h.now_ms() // HOUR_MS - 11) * HOUR_MS
        for i in range(45):
            dh.push_folded(cls.e, 1000 + i, cls.t0 + (i % 9) * HOUR_MS + (i * 37) % 3600 * 1000)

    @classmethod
    def tearDownClass(cls):
        cls.e.cleanup()
        shutil.rmtree(cls.bucket, ignore_errors=True)

    def objects(self, kind):
        """{key below p1/: parsed JSON} of the index entries of one kind."""
        out = {}
        for path in glob.glob(os.path.join(self.bucket, "p1", kind, "*", "*.json")):
            try:
                body, digest = read_object(path)
            except FileNotFoundError:
                continue  # deleted since the listing (a withdrawn rollup entry)
            self.assertEqual(hashlib.sha256(body).hexdigest(), digest, path)
            out[os.path.relpath(path, os.path.join(self.bucket, "p1"))] = json.loads(body)
        return out

    def expected(self):
        """{(level, window start ms): {block name: version}} of the ended
        windows, from the blocks' own index entries."""
        now = h.now_ms()
        want = {}
        for key, m in self.objects("index").items():
            name = os.path.basename(key)[:-5]
            start_ms = m["start_ns"] // 1_000_000
            for level, length in LEVEL_MS.items():
                w = start_ms // length * length
                if w + length <= now:
                    want.setdefault((level, w), {})[name] = m["version"]
        return want

    def actual(self):
        got = {}
        for key, m in self.objects("rollup-index").items():
            self.assertEqual("ember-lmdb-rollup/1", m["format"])
            self.assertIs(True, m["guarded"])
            got[(m["level"], m["start_ns"] // 1_000_000)] = (
                {o["name"]: o["version"] for o in m["objects"]}, m)
        return got

    def wait_rollups_match(self, what):
        def match():
            want, got = self.expected(), self.actual()
            return want and set(want) == set(got) and \
                all(got[k][0] == v for k, v in want.items())
        h.wait_for(match, timeout=180, interval=1, what=what)
        return self.actual()

    def check_data(self, level, window_ms, entry):
        """The data object: checksummed, the size its entry says, and an LMDB
        file whose windows database holds this window's record."""
        body, digest = read_object(os.path.join(self.bucket, "p1", entry["data"]))
        self.assertEqual(hashlib.sha256(body).hexdigest(), digest)
        self.assertEqual(entry["bytes"], len(body))
        self.assertTrue(entry["start_ns"] <= entry["min_time_ns"] <= entry["max_time_ns"]
                        < entry["end_ns"])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rollup.mdb")
            with open(path, "wb") as f:
                f.write(body)
            dump = subprocess.run(["mdb_dump", "-n", "-s", "windows", path],
                                  capture_output=True, text=True, check=True).stdout
            series = subprocess.run(["mdb_dump", "-n", "-s", "series", path],
                                    capture_output=True, text=True, check=True).stdout
        # key: window start in ms*1e6 ns, big-endian with the sign bit flipped, then level
        key = ((window_ms * 1_000_000) ^ (1 << 63)).to_bytes(8, "big").hex() + f"{level:02x}"
        pairs = [l.strip() for l in dump.split("HEADER=END", 1)[1].splitlines()
                 if l.startswith(" ")]
        keys = pairs[0::2]
        self.assertEqual([key], keys, "one window record, this window's")
        self.assertIn(" " + key, series, "its series records")

    def test_rollups_uploaded_and_replaced_after_a_late_write(self):
        got = self.wait_rollups_match("every ended window's rollup uploaded")
        for (level, w), (_, entry) in got.items():
            self.check_data(level, w, entry)
        self.assertGreaterEqual(dh.metric(self.e, "ember_bucket_rollups_uploaded_total"),
                                len(got))

        # a late profile into hour t0+1: its 6-hour window (and day) change
        late_ms = self.t0 + HOUR_MS + 1234
        dh.push_folded(self.e, 7, late_ms)
        changed = {(lv, late_ms // n * n) for lv, n in LEVEL_MS.items()} & set(got)
        self.assertTrue(changed, "the late hour is in an ended window")
        before = {k: v[1]["data"] for k, v in got.items()}

        stale = []

        def reuploaded():
            idx = [(os.path.basename(k)[:-5], m) for k, m in self.objects("index").items()
                   if m["start_ns"] // 1_000_000 == self.t0 + HOUR_MS]
            if not idx or idx[0][1]["profiles"] != 6:
                return False
            name, meta = idx[0]
            for k in changed:  # read after the index: never the old version
                entry = self.actual().get(k)
                if entry and entry[0].get(name, meta["version"]) != meta["version"]:
                    stale.append((k, entry[0][name], meta["version"]))
            return True
        h.wait_for(reuploaded, timeout=180, interval=0.05, what="the late block uploaded again")
        self.assertEqual([], stale, "an entry naming the old version listed after the upload")
        after = self.wait_rollups_match("the changed windows' rollups uploaded again")
        for k, (_, entry) in after.items():
            if k in changed:
                self.assertNotEqual(before[k], entry["data"], k)
                self.check_data(k[0], k[1], entry)
            else:
                self.assertEqual(before[k], entry["data"], k)
        # the old data object goes after its entry was replaced (an entry never
        # names missing data), so its deletion may follow the listing above
        replaced = [os.path.join(self.bucket, "p1", before[k]) for k in changed]
        h.wait_for(lambda: not any(os.path.exists(p) for p in replaced), timeout=60,
                   interval=0.2, what="the replaced rollup objects deleted")
        data = glob.glob(os.path.join(self.bucket, "p1", "rollups", "*", "*", "rollup.mdb"))
        self.assertEqual(len(after), len(data), "one data object per entry")

    def stacks(self, start, end):
        """The flame graph of [start, end] (ms) as {root-first stack: self}."""
        fg = self.e.flamegraph(self.ptype, "{}", start, end)
        return h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])

    def series(self, start, end):
        """SelectSeries of (start, end] (ms) by svc, summed and averaged, with
        30-minute steps from start + 30 min (whose point sums the step back
        to start): [(aggregation, labels, [(timestamp, value)])]."""
        out = []
        for agg in (0, 1):  # SUM, AVERAGE
            m = self.e.q("SelectSeries", profile_typeID=self.ptype, label_selector="{}",
                         start=start + 1800 * 1000, end=end, step=1800.0, group_by=["svc"],
                         aggregation=agg)
            out += [(agg, [(l.name, l.value) for l in s.labels],
                     [(p.timestamp, p.value) for p in s.points]) for s in m.series]
        return out

    def test_z_rollups_read_back_for_dropped_hours(self):
        """Every hour leaves the data dir (--storage.local-retention=1s after a
        restart); a flame graph over whole windows is then answered by the
        rollups read back — one object per window — and equals the all-local
        one; a range that cuts a window reads that window's blocks."""
        got = self.wait_rollups_match("every ended window's rollup uploaded")
        windows = sorted(w for (level, w) in got if level == 0)
        start, end = windows[0], windows[-1] + LEVEL_MS[0] - 1
        cut = (start + HOUR_MS, end)
        self.ptype = self.e.q("ProfileTypes", start=start, end=end).profile_types[0].ID
        all_local = {r: self.stacks(*r) for r in ((start, end), cut)}
        self.assertTrue(all(all_local.values()), "the windows hold profiles")
        local_series = self.series(start, end)
        self.assertTrue(local_series)
        args = [a for a in self.e.args if not a.startswith("--storage.local-retention")]
        self.e.restart([*args, "--storage.local-retention=1s"])
        blocks = os.path.join(self.e.data_dir, "blocks")
        h.wait_for(lambda: not [n for n in os.listdir(blocks)
                                if n.isdigit() and start <= int(n) * 1000 <= end],
                   timeout=120, interval=1, what="the windows' hours dropped")
        self.assertEqual(all_local[(start, end)], self.stacks(start, end), "whole windows")
        used = dh.metric(self.e, "ember_bucket_rollups_read_total")
        self.assertGreaterEqual(used, len(windows), "one rollup per 6-hour window at least")
        downloads = dh.metric(self.e, "ember_bucket_cache_downloads_total")
        self.assertEqual(used, downloads, "no block of the windows was fetched")
        self.assertEqual(all_local[cut], self.stacks(*cut), "a window cut: its blocks")
        self.assertGreater(dh.metric(self.e, "ember_bucket_cache_downloads_total"), downloads,
                           "the cut window's blocks were fetched")
        self.assertEqual(all_local[(start, end)], self.stacks(start, end), "warm")
        # series: the rollups' per-profile points, no block fetched
        downloads = dh.metric(self.e, "ember_bucket_cache_downloads_total")
        used = dh.metric(self.e, "ember_bucket_rollups_read_total")
        self.assertEqual(local_series, self.series(start, end), "series of whole windows")
        self.assertGreater(dh.metric(self.e, "ember_bucket_rollups_read_total"), used)
        self.assertEqual(downloads, dh.metric(self.e, "ember_bucket_cache_downloads_total"))

    def test_zz_a_lost_volume_reads_the_earlier_lifes_rollups(self):
        """After test_z: the data dir deleted and ember restarted on an empty
        one (a new life, no upload records): the earlier life's windows are
        still answered by its guarded rollups, not its blocks, and equal."""
        got = self.wait_rollups_match("every ended window's rollup uploaded")
        windows = sorted(w for (level, w) in got if level == 0)
        start, end = windows[0], windows[-1] + LEVEL_MS[0] - 1
        self.ptype = self.e.q("ProfileTypes", start=start, end=end).profile_types[0].ID
        before = self.stacks(start, end)
        self.assertTrue(before)
        self.e.stop()
        shutil.rmtree(self.e.data_dir)
        self.e.start()
        self.assertEqual(before, self.stacks(start, end), "the earlier life's windows")
        used = dh.metric(self.e, "ember_bucket_rollups_read_total")
        self.assertGreaterEqual(used, len(windows), "one rollup per 6-hour window at least")
        self.assertEqual(used, dh.metric(self.e, "ember_bucket_cache_downloads_total"),
                         "no block of the windows was fetched")


class RollupsBeforeDropTest(BucketRollupsTest):
    """--storage.local-retention=1s from the start: the hours of ended windows
    leave the data dir right after their upload, and their windows' rollups
    are up too (a drop waits for its window's rollup: a window with an hour
    dropped gets none). The flame graph read back from the rollups equals
    the merged pprof, read from the block objects."""
    local_retention = "1s"
    test_rollups_uploaded_and_replaced_after_a_late_write = None
    test_z_rollups_read_back_for_dropped_hours = None
    test_zz_a_lost_volume_reads_the_earlier_lifes_rollups = None

    def test_rollups_up_before_the_hours_leave(self):
        got = self.wait_rollups_match("every ended window's rollup uploaded")
        windows = sorted(w for (level, w) in got if level == 0)
        start, end = windows[0], windows[-1] + LEVEL_MS[0] - 1
        # every hour of the windows, the last ones too (a drop pass may run
        # after the rollups went up: until then their window reads blocks)
        blocks = os.path.join(self.e.data_dir, "blocks")
        h.wait_for(lambda: not [n for n in os.listdir(blocks)
                                if n.isdigit() and start <= int(n) * 1000 <= end],
                   timeout=120, interval=1, what="the windows' hours dropped")
        self.ptype = self.e.q("ProfileTypes", start=start, end=end).profile_types[0].ID
        fg = self.stacks(start, end)
        self.assertGreaterEqual(dh.metric(self.e, "ember_bucket_rollups_read_total"),
                                len(windows))
        pprof = dh.pprof_stacks(self.e.merge_profile(self.ptype, "{}", start, end))
        self.assertEqual({tuple(reversed(k)): v[0] for k, v in pprof.items()}, dict(fg))


if __name__ == "__main__":
    unittest.main()
