"""Durability across restarts and retention.

- Profiles acknowledged right before SIGTERM are all there after ember starts
  again on the same data dir (same totals as MANIFEST.jsonl).
- With --retention=1h, blocks holding days-old profiles are removed (their
  directories under DATA/blocks/ disappear, queries over their range return
  nothing) while a recent profile stays queryable.
"""
import os
import time
import unittest

import harness as h

OLD_FILES = ("pprof/gopprof-sample.cpu", "pprof/pyroscope-cpu.pprof")   # 2017 and 2021
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"


def block_dirs(data_dir):
    d = os.path.join(data_dir, "blocks")
    if not os.path.isdir(d):
        return set()
    return {n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n))}


class RestartRetentionTest(unittest.TestCase):

    def setUp(self):
        self.man = h.manifest()
        self.srv = h.Ember()
        self.srv.start()

    def tearDown(self):
        self.srv.cleanup()

    def ingest_file(self, rel, service, raw=None):
        r = self.srv.ingest(f"{service}{{env=test}}", raw if raw is not None else h.read_testdata(rel),
                            {"format": "pprof", "spyName": "gospy"}, content_type="application/octet-stream")
        self.assertEqual(r.status, 200, f"ingest {rel}: {r.describe()}")

    def totals(self, service, entry, window):
        return {pid: (self.srv.flamegraph(pid, f'{{service_name="{service}"}}', *window).total,
                      self.srv.series_sum(pid, f'{{service_name="{service}"}}', *window))
                for pid in self.expected(entry)}

    @staticmethod
    def expected(entry):
        name = h.ingest_metric_name([st["type"] for st in entry["sample_types"]])
        return {h.profile_type_id(name, t, u, entry): (v, v)
                for (t, u), v in h.expected_totals(entry).items()}

    def test_data_survives_restart(self):
        files = ("pprof/pyroscope-heap", "pprof/gopprof-sample.cpu", "ingest/heap.pb",
                 "pprof/pyroscope-go.cpu.labels.pprof")
        for i, rel in enumerate(files):
            self.ingest_file(rel, f"restart-{i}")
        # SIGTERM right after the last acknowledgement: nothing acknowledged may be lost.
        rc = self.srv.stop()
        self.assertEqual(rc, 0, f"exit status after SIGTERM\n{self.srv.log_tail()}")
        self.srv.start()
        for i, rel in enumerate(files):
            e = self.man[rel]
            with self.subTest(file=rel):
                window = h.time_window_ms(e["time_nanos"])
                got = h.eventually(lambda: self.totals(f"restart-{i}", e, window), self.expected(e))
                self.assertEqual(got, self.expected(e), f"(flamegraph, series) totals of {rel} after restart")
        # and once more, with nothing new written in between
        self.srv.restart()
        e = self.man[files[0]]
        self.assertEqual(self.totals("restart-0", e, h.time_window_ms(e["time_nanos"])), self.expected(e))

    def test_retention_drops_old_blocks(self):
        data = self.srv.data_dir
        for i, rel in enumerate(OLD_FILES):
            self.ingest_file(rel, f"old-{i}")
        old_windows = [h.time_window_ms(self.man[rel]["time_nanos"]) for rel in OLD_FILES]
        h.wait_for(lambda: all(self.srv.flamegraph(CPU, f'{{service_name="old-{i}"}}', *w).total > 0
                               for i, w in enumerate(old_windows)), timeout=15, what="old profiles stored")
        old_blocks = block_dirs(data)
        self.assertGreaterEqual(len(old_blocks), 2, f"expected one block per old hour under {data}/blocks")

        # a recent profile: the same real profile with time_nanos = now - 1 min
        recent_ns = time.time_ns() - 60 * 10**9
        raw = h.set_time_nanos(h.read_testdata(OLD_FILES[1]), recent_ns)
        self.ingest_file(OLD_FILES[1], "recent", raw)
        rwin = h.time_window_ms(recent_ns)
        h.wait_for(lambda: self.srv.flamegraph(CPU, '{service_name="recent"}', *rwin).total > 0,
                   timeout=15, what="recent profile stored")
        new_blocks = block_dirs(data) - old_blocks
        self.assertTrue(new_blocks, "the recent profile must live in a block of its own")

        self.srv.stop()
        self.srv.start(args=["--retention=1h"])
        h.wait_for(lambda: not (block_dirs(data) & old_blocks), timeout=90,
                   what=f"old block dirs {sorted(old_blocks)} to be removed by --retention=1h")
        for i, w in enumerate(old_windows):
            fg = self.srv.flamegraph(CPU, f'{{service_name="old-{i}"}}', *w)
            self.assertEqual(fg.total, 0, f"old-{i} still queryable after retention")
            self.assertEqual(self.srv.series_labels([f'{{service_name="old-{i}"}}'], (), *w), [])
        self.assertLessEqual(new_blocks, block_dirs(data), "recent block removed by retention")
        expected = h.expected_totals(self.man[OLD_FILES[1]])[("cpu", "nanoseconds")]
        self.assertEqual(self.srv.flamegraph(CPU, '{service_name="recent"}', *rwin).total, expected)
        self.assertEqual(self.srv.series_sum(CPU, '{service_name="recent"}', *rwin), expected)


if __name__ == "__main__":
    unittest.main()
