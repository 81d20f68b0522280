"""--storage.local-retention in the distributed mode (issue 27): 1 redis-server,
a real SeaweedFS, zone a (2 ember-ingester) and zone b (1), an ember-querier.
The oracle is what the test sent (the values of every acknowledged folded
body) and the all-local answer's bytes.

Six whole hours are pushed ending two hours ago, with every block kept local
(--storage.local-retention=0); a 7-day merge is taken as the all-local answer.
The ingesters restart with a local retention (about 3 h) that puts the drop
threshold in the middle of the sixth hour: the five hours before it leave their
data dirs (counted) and are read back from the bucket —
the querier's total equals what was sent (without the reading back it is the
last hours only), and a 7-day merge with a cold cache, then a warm one, gives
the all-local bytes (a 6-hour window that ended below the marks, as one does
unless t0 starts one, is read from its rollups). Then one ingester is stopped, its volume deleted and it
starts empty: the old hours are not restored to disk; its note sends the
querier to zone b, and once the operator clears the note zone a answers them
exactly from the bucket."""
import os
import shutil

import distributed_harness as dh
import harness as h
import test_bucket_blocks as tb

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS


class BucketLocalS3Test(tb.BucketBlocksTest):
    """test_bucket_blocks' cluster (every block local at first), another scenario."""
    test_1_wiped_ingesters_answer_from_the_bucket = None
    test_2_bucket_down_loses_nothing = None
    test_3_stopped_right_after_pushes_loses_nothing = None  # the same cluster's case, run above
    test_4_the_open_hour_goes_up_at_a_graceful_stop = None

    def week_bytes(self):
        end = self.t1 + HOUR_MS
        ptype = self.querier.q("ProfileTypes", start=self.t1 - HOUR_MS,
                               end=self.t1).profile_types[0].ID
        return h.gunzip_if(self.querier.merge_profile(ptype, "{}", end - 7 * DAY_MS, end))

    def flame_stacks(self, start, end):
        """The flame graph of [start, end] (ms) as {root-first stack: self}."""
        ptype = self.querier.q("ProfileTypes", start=start, end=end).profile_types[0].ID
        fg = self.querier.flamegraph(ptype, "{}", start, end)
        return h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])

    def dropped(self):
        return sum(dh.metric(i, "ember_bucket_local_blocks_dropped_total")
                   for i in self.ingesters)

    @staticmethod
    def downloads(procs):
        return sum(dh.metric(p, "ember_bucket_cache_downloads_total") for p in procs)

    def local_hours(self, ing):
        names = os.listdir(os.path.join(ing.data_dir, "blocks"))
        return sorted(int(n) * 1000 for n in names if n.isdigit())

    def restart_all(self, local_retention):
        for i in self.ingesters:
            i.stop()
        for i in self.ingesters:
            args = [a for a in i.args if not a.startswith("--storage.local-retention")]
            i.start(args=[*args, f"--storage.local-retention={local_retention}"], timeout=120)
        dh.wait_zones(self.querier, live=3, complete=2, asked=2, timeout=60)

    def test_local_retention(self):
        self.push(90, range(0, 6))
        self.drained()
        self.uploads_settled()
        self.assertEqual(self.sent, self.total())
        all_local = self.week_bytes()
        old_end = self.t0 + 5 * HOUR_MS - 1  # the hours that will leave the volumes
        old_total = dh.merged_total(self.querier, self.t0, old_end)
        old_flame = self.flame_stacks(self.t0, old_end)

        # hours t0 .. t0+4 go; t0+5 stays: the retention puts the drop threshold
        # (now - retention) half an hour after t0+4's end, whatever the minute now,
        # where a fixed 3h made t0+5 droppable at the next full hour
        self.restart_all(f"{(h.now_ms() - (self.t0 + 5 * HOUR_MS + HOUR_MS // 2)) // 1000}s")
        want_local = [self.t0 + 5 * HOUR_MS]
        h.wait_for(lambda: all(set(self.local_hours(i)) <= set(want_local)
                               for i in self.ingesters),
                   timeout=120, interval=1.0, what="old local blocks dropped")
        self.assertGreaterEqual(self.dropped(), 5 * 2, "each zone held every old hour")
        # each one's mark: its oldest local block, below which the bucket holds all
        ids = ("a-0", "a-1", "b-0")
        h.wait_for(lambda: all(dh.mark_ms(self.redis, i) == want_local[0] for i in ids),
                   timeout=60, what="marks at the oldest local hour")
        h.wait_for(lambda: dh.gauge(self.querier, "ember_querier_lowest_mark_seconds")
                   == want_local[0] / 1000, timeout=30, what="the querier seeing the marks")
        ing_downloads = self.downloads(self.ingesters)
        rollups = dh.metric(self.querier, "ember_bucket_rollups_read_total")
        # the dropped hours alone: no ingester is asked, only the querier's bucket shard
        calls = dh.metric(self.querier, "ember_querier_shard_calls_total")
        self.assertEqual(old_total, dh.merged_total(self.querier, self.t0, old_end))
        self.assertEqual(2, dh.metric(self.querier, "ember_querier_shard_calls_total") - calls,
                         "two RPCs (profile types, merge), each to the bucket shard alone")
        self.assertEqual(self.sent, self.total(), "old hours answered from the bucket")
        self.assertEqual(all_local, self.week_bytes(), "7 days, cold cache")
        self.assertEqual(all_local, self.week_bytes(), "7 days, warm cache")
        # below the marks the querier read the bucket itself, the ingesters nothing
        self.assertGreaterEqual(self.downloads([self.querier]), 5, "the querier read the old hours")
        self.assertEqual(ing_downloads, self.downloads(self.ingesters),
                         "no ingester read back what lies below its mark")
        # a flame graph: a 6-hour window of pushed hours that ended below the
        # marks is read from its rollups (guarded entries), not its blocks
        self.assertEqual(old_flame, self.flame_stacks(self.t0 - 5 * HOUR_MS, old_end))
        if self.t0 % (6 * HOUR_MS):
            self.assertGreater(dh.metric(self.querier, "ember_bucket_rollups_read_total"),
                               rollups, "the querier read a window's rollup")

        # an ingester of each zone stopped: no zone is complete, yet what ends below
        # the stopped ones' marks is answered (from the bucket); the rest is 503
        down = [self.ingesters[0], self.ingesters[2]]
        for i in down:
            i.stop()
        dh.wait_zones(self.querier, live=1, complete=0, asked=1, timeout=60)
        self.assertEqual(old_total, dh.merged_total(self.querier, self.t0, old_end))
        cls = h.rpc_classes(f"{h.QUERIER}/LabelNames")[0]
        r = self.querier.call(f"{h.QUERIER}/LabelNames", cls(start=self.t0, end=self.t1),
                              check=False)
        self.assertEqual(503, r.status, r.describe())
        self.assertEqual(200, self.querier.request("GET", "/ready").status,
                         "ready: it answers the history (a Service keeps sending it queries)")
        for i in down:
            i.start(timeout=120)
        dh.wait_zones(self.querier, live=3, complete=2, asked=2, timeout=60)

        # a lost volume: only the recent hour comes back to disk, the rest is read back
        lost = self.ingesters[0]
        lost.stop()
        shutil.rmtree(lost.data_dir)
        lost.start(timeout=120)
        self.assertLessEqual(set(self.local_hours(lost)), set(want_local))
        # its note sends the querier to zone b (one ingester) ...
        h.wait_for(lambda: self.redis.cmd("HGET", dh.NOTES, "a-0"),
                   timeout=60, what="the lost volume's note")
        dh.wait_zones(self.querier, live=3, complete=2, asked=1, timeout=60)
        self.assertEqual(self.sent, self.total(), "zone b, after a volume was lost")
        self.assertEqual(dh.pprof_stacks(all_local), dh.pprof_stacks(self.week_bytes()),
                         "7 days from zone b (its own ids, the same stacks)")
        # ... until the operator clears it: zone a, the lost volume's hours from the bucket
        self.assertEqual(1, self.redis.cmd("HDEL", dh.NOTES, "a-0"))
        dh.wait_zones(self.querier, live=3, complete=2, asked=2, timeout=60)
        self.assertEqual(self.sent, self.total(), "zone a, after a volume was lost")
        self.assertEqual(all_local, self.week_bytes(), "7 days after a volume was lost")

        # late profiles below the marks: each lowers its ingester's mark before it is stored
        lowered = [dh.metric(i, "ember_ingester_mark_lowered_total") for i in self.ingesters]
        self.push(6, [0])
        self.drained()
        now_lowered = [dh.metric(i, "ember_ingester_mark_lowered_total") for i in self.ingesters]
        self.assertGreater(sum(now_lowered[:2]), sum(lowered[:2]), "zone a lowered a mark")
        self.assertGreater(now_lowered[2], lowered[2], "zone b lowered its mark")
        # visible once the querier has seen a lowered mark (its member list: 1 s),
        # or the late block went up and the mark back; never counted twice meanwhile
        def all_counted():
            got = self.total()
            self.assertLessEqual(got, self.sent, "a late profile counted twice")
            return got == self.sent
        h.wait_for(all_counted, timeout=60, interval=0.2, what="late profiles below the marks")


if __name__ == "__main__":
    import unittest
    unittest.main()
