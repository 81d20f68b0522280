"""Block summaries and 6-hour rollups: crash safety and exact answers.

Copies of one real CPU profile are ingested for many pods into two closed
blocks, the first and the last hour of the last whole 6-hour window (so the
window gets a rollup, built right after the blocks' summaries). The oracle is the flame graph of one copy, read over a
range that holds only it (a partial block, so ember reads the profile itself)
and whose total must be MANIFEST.jsonl's: the whole range must give the same
names and every number times the number of copies.

ember is then killed with SIGKILL at random moments while it builds the
blocks' summaries and the window's rollup (it starts on them at once), several
times; afterwards it must start, finish them, and give the same answers, for
the whole range (rollup path) and for one pod.
"""
import os
import random
import time
import unittest

import harness as h

FILE = "pprof/pyroscope-cpu_go_truncated_1.pb.gz"
HOUR_MS = 3600_000
PODS = 24
PER_POD = 6
WINDOW_MS = 6 * HOUR_MS


def flame_rows(fg):
    """(names, levels as lists of ints) of a FlameGraph message."""
    return list(fg.names), [list(level.values) for level in fg.levels]


class SummariesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        entry = h.manifest()[FILE]
        name = h.ingest_metric_name([st["type"] for st in entry["sample_types"]])
        st = entry["sample_types"][-1]
        cls.ptype = h.profile_type_id(name, st["type"], st["unit"], entry)
        cls.single_total = h.expected_totals(entry)[(st["type"], st["unit"])]
        cls.raw = h.gunzip_if(h.read_testdata(FILE))

    def setUp(self):
        self.srv = h.Ember()
        self.srv.start()

    def tearDown(self):
        self.srv.cleanup()

    def ingest_all(self):
        base = (h.now_ms() // WINDOW_MS - 1) * WINDOW_MS  # the last whole 6-hour window
        self.times = []
        conn = self.srv.connection()
        for k in range(PER_POD):
            for blk in (0, 5):                            # its first and last hour
                t_ms = base + blk * HOUR_MS + 60_000 + k * 300_000
                body = h.set_time_nanos(self.raw, t_ms * 10**6)
                for pod in range(PODS):
                    r = self.srv.request("POST", "/ingest?" + h.urlencode(
                        {"name": f"sumtest{{pod=p{pod}}}", "format": "pprof", "spyName": "gospy"}),
                        body, {"Content-Type": "application/octet-stream"}, conn=conn)
                    self.assertEqual(r.status, 200, r.describe())
                self.times.append(t_ms)
        conn.close()
        self.window = (base, base + WINDOW_MS - 1)
        self.n = PODS * PER_POD * 2

    def flame(self, selector, start, end):
        return self.srv.flamegraph(self.ptype, selector, start, end, max_nodes=1 << 20)

    def oracle(self):
        """The whole range's flame graph worked out from one copy."""
        t = self.times[0]
        one = self.flame('{service_name="sumtest", pod="p0"}', t, t)
        self.assertEqual(one.total, self.single_total)
        names, levels = flame_rows(one)
        return names, [[v if i % 4 == 3 else v * self.n for i, v in enumerate(row)] for row in levels]

    def check_answers(self, oracle):
        names, levels = oracle
        got = self.flame('{service_name="sumtest"}', *self.window)
        self.assertEqual(got.total, self.single_total * self.n)
        self.assertEqual(flame_rows(got), (names, levels))
        pod = self.flame('{service_name="sumtest", pod="p3"}', *self.window)
        self.assertEqual(pod.total, self.single_total * PER_POD * 2)
        self.assertEqual(self.srv.series_sum(self.ptype, '{service_name="sumtest"}', *self.window),
                         self.single_total * self.n)

    def wait_summaries(self):
        time.sleep(2.5)       # a pass every 2 s; the blocks are closed and quiet after a restart
        h.wait_for(lambda: self.srv.metrics().get(("ember_store_blocks_unsummarized", frozenset()), 1) == 0,
                   timeout=60, what="summaries built")

    def test_kill_while_summarising(self):
        self.ingest_all()
        oracle = self.oracle()
        rng = random.Random(18)
        for _ in range(5):
            self.srv.stop()
            self.srv.start()
            time.sleep(rng.uniform(0.0, 1.2))
            self.srv.proc.kill()          # SIGKILL, our own child, mid-summary or not
            self.srv.proc.wait()
            self.srv.proc = None
        self.srv.start()
        self.check_answers(oracle)        # whichever path each series takes now
        self.wait_summaries()
        self.check_answers(oracle)        # summaries everywhere, the window's rollup
        self.assertTrue(os.path.exists(os.path.join(self.srv.data_dir, "rollups", "data.mdb")))
        log = open(self.srv.log_path, "rb").read().decode(errors="replace")
        self.assertNotIn("bad block", log)
        self.assertNotIn("summaries failed", log)

    def test_late_profile_after_summaries(self):
        self.ingest_all()
        oracle = self.oracle()
        self.wait_summaries()
        self.check_answers(oracle)
        # One more copy into a summarised block: its series' summary must not be used stale.
        t = self.times[1] + 1
        r = self.srv.ingest("sumtest{pod=p3}", h.set_time_nanos(self.raw, t * 10**6),
                            {"format": "pprof", "spyName": "gospy"}, content_type="application/octet-stream")
        self.assertEqual(r.status, 200, r.describe())
        got = self.flame('{service_name="sumtest"}', *self.window)
        self.assertEqual(got.total, self.single_total * (self.n + 1))
        pod = self.flame('{service_name="sumtest", pod="p3"}', *self.window)
        self.assertEqual(pod.total, self.single_total * (PER_POD * 2 + 1))
        # The summary and the rollup are built again and give the same.
        self.wait_summaries()
        time.sleep(2.5)
        got = self.flame('{service_name="sumtest"}', *self.window)
        self.assertEqual(got.total, self.single_total * (self.n + 1))


if __name__ == "__main__":
    unittest.main()
