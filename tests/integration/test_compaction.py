"""Block compaction: crash safety, exact answers, smaller files.

Copies of one real CPU profile are ingested for many pods into two closed
(hours-old) blocks, and ember is stopped before those blocks have been quiet
long enough to be summarised, so every later start summarises and then
compacts them (rewrites each into a new file in key order, samples zstd-
compressed, and swaps it in by rename). The oracle is the flame graph of one
copy, read over a range that holds only it, whose total must be
MANIFEST.jsonl's: the whole range must give the same names and every number
times the number of copies, and one pod and SelectSeries their share.

ember is then killed with SIGKILL at random moments after it starts, several
times (a kill lands before, during or after a rewrite or its swap); afterwards
it must start, answer the same, finish compacting (no block left to do, no
rewrite or old copy left in blocks/), with data files smaller than before,
and answer the same again after one more restart.
"""
import os
import random
import time
import unittest

import harness as h

FILE = "pprof/pyroscope-cpu_go_truncated_1.pb.gz"
HOUR_MS = 3600_000
PODS = 24
PER_POD = 10


def flame_rows(fg):
    return list(fg.names), [list(level.values) for level in fg.levels]


def data_files(data_dir):
    """{block dir name: data.mdb bytes allocated} and the leftover entries."""
    blocks = os.path.join(data_dir, "blocks")
    sizes, leftovers = {}, []
    for name in sorted(os.listdir(blocks)):
        if name.startswith("."):
            leftovers.append(name)
            continue
        sizes[name] = os.stat(os.path.join(blocks, name, "data.mdb")).st_blocks * 512
    return sizes, leftovers


class CompactionTest(unittest.TestCase):

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
        base = (h.now_ms() // HOUR_MS - 5) * HOUR_MS     # two whole blocks, hours ago
        self.times = []
        conn = self.srv.connection()
        for k in range(PER_POD):
            for blk in range(2):
                t_ms = base + blk * HOUR_MS + 60_000 + k * 300_000
                body = h.set_time_nanos(self.raw, t_ms * 10**6)
                for pod in range(PODS):
                    r = self.srv.request("POST", "/ingest?" + h.urlencode(
                        {"name": f"cmptest{{pod=p{pod}}}", "format": "pprof", "spyName": "gospy"}),
                        body, {"Content-Type": "application/octet-stream"}, conn=conn)
                    self.assertEqual(r.status, 200, r.describe())
                self.times.append(t_ms)
        conn.close()
        self.window = (base, base + 2 * HOUR_MS - 1)
        self.n = PODS * PER_POD * 2

    def flame(self, selector, start, end):
        return self.srv.flamegraph(self.ptype, selector, start, end, max_nodes=1 << 20)

    def oracle(self):
        t = self.times[0]
        one = self.flame('{service_name="cmptest", pod="p0"}', t, t)
        self.assertEqual(one.total, self.single_total)
        names, levels = flame_rows(one)
        return names, [[v if i % 4 == 3 else v * self.n for i, v in enumerate(row)] for row in levels]

    def check_answers(self, oracle):
        names, levels = oracle
        got = self.flame('{service_name="cmptest"}', *self.window)
        self.assertEqual(got.total, self.single_total * self.n)
        self.assertEqual(flame_rows(got), (names, levels))
        # a range that cuts both blocks reads profiles, not summaries
        cut = self.flame('{service_name="cmptest"}', self.times[0], self.times[-1])
        self.assertEqual(cut.total, self.single_total * self.n)
        pod = self.flame('{service_name="cmptest", pod="p3"}', *self.window)
        self.assertEqual(pod.total, self.single_total * PER_POD * 2)
        one = self.flame('{service_name="cmptest", pod="p5"}', self.times[3], self.times[3])
        self.assertEqual(flame_rows(one), flame_rows(self.flame('{service_name="cmptest", pod="p0"}',
                                                                self.times[0], self.times[0])))
        self.assertEqual(self.srv.series_sum(self.ptype, '{service_name="cmptest"}', *self.window),
                         self.single_total * self.n)

    def gauge(self, name):
        return self.srv.metrics().get((name, frozenset()), 1)

    def wait_compacted(self):
        time.sleep(2.5)       # a pass every 2 s: summaries, then compaction
        h.wait_for(lambda: self.gauge("ember_store_blocks_unsummarized") == 0 and
                   self.gauge("ember_store_blocks_uncompacted") == 0,
                   timeout=90, what="blocks summarised and compacted")

    def test_kill_while_compacting(self):
        self.ingest_all()
        oracle = self.oracle()
        self.srv.stop()               # before the blocks were quiet for 5 s: nothing compacted yet
        before, _ = data_files(self.srv.data_dir)
        rng = random.Random(1806)
        for _ in range(6):
            self.srv.start()
            time.sleep(rng.uniform(0.0, 1.2))
            self.srv.proc.kill()          # SIGKILL, our own child
            self.srv.proc.wait()
            self.srv.proc = None
        self.srv.start()
        self.check_answers(oracle)        # whichever state each block is in now
        self.wait_compacted()
        self.check_answers(oracle)
        after, leftovers = data_files(self.srv.data_dir)
        self.assertEqual(leftovers, [])
        self.assertEqual(sorted(after), sorted(before))
        for name, size in after.items():
            self.assertLess(size, before[name], name)
        self.srv.stop()
        self.srv.start()                  # compact blocks are known as such: no rewrite
        self.check_answers(oracle)
        time.sleep(2.5)
        self.assertEqual(data_files(self.srv.data_dir)[0], after)
        log = open(self.srv.log_path, "rb").read().decode(errors="replace")
        self.assertNotIn("bad block", log)
        self.assertNotIn("compaction failed", log)
        self.assertNotIn("summaries failed", log)
        print(f"\n  data files before/after compaction: {sum(before.values())} -> "
              f"{sum(after.values())} bytes")

    def test_late_profile_after_compaction(self):
        self.ingest_all()
        oracle = self.oracle()
        self.srv.stop()
        self.srv.start()
        self.wait_compacted()
        self.check_answers(oracle)
        # One more copy into a compacted block: read beside the compressed ones,
        # then the block is summarised and compacted again.
        t = self.times[1] + 1
        r = self.srv.ingest("cmptest{pod=p3}", h.set_time_nanos(self.raw, t * 10**6),
                            {"format": "pprof", "spyName": "gospy"}, content_type="application/octet-stream")
        self.assertEqual(r.status, 200, r.describe())
        got = self.flame('{service_name="cmptest"}', *self.window)
        self.assertEqual(got.total, self.single_total * (self.n + 1))
        time.sleep(5)                     # quiet again
        self.wait_compacted()
        got = self.flame('{service_name="cmptest"}', *self.window)
        self.assertEqual(got.total, self.single_total * (self.n + 1))
        pod = self.flame('{service_name="cmptest", pod="p3"}', *self.window)
        self.assertEqual(pod.total, self.single_total * (PER_POD * 2 + 1))


if __name__ == "__main__":
    unittest.main()
