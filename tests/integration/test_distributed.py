"""Distributed mode: 1 redis-server + 3 ember-ingester + 2 ember-querier.

The same profiles go to one all-in-one `ember` and, each to a random
ingester, to the cluster; every query RPC answered by either querier must
equal the all-in-one's answer (flame graphs truncated once at the end, trees,
diffs, series SUM and AVERAGE with group_by and limit, labels, series sets,
profile types, stats, merged pprof totals). Every profile travels through the
streams ember:ingest:<p>: the ingester that received it is not necessarily
the one that stores it.

Last, kill -9 of an ingester while pushes continue, twice: once it stays dead
past --redis.claim-idle (its pending entries are claimed by the others), once
it restarts at once (it re-reads its own pending entries); each time every
acknowledged profile counts exactly once.
"""
import threading
import random
import signal
import time
import unittest

import distributed_harness as dh
import harness as h

SERVICES = ("api", "db", "worker")
REGIONS = ("eu", "us")


def folded(seed):
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(3, 12)):
        depth = rnd.randint(1, 6)
        stack = ";".join(f"fn_{rnd.randint(0, 30)}" for _ in range(depth))
        lines.append(f"{stack} {rnd.randint(1, 500)}")
    return ("\n".join(lines) + "\n").encode()


class DistributedTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A failed set-up skips tearDownClass: stop what was started anyway.
        try:
            cls.set_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def set_up(cls):
        cls.procs = []
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.aio = h.Ember()
        cls.ingesters = [dh.ingester(cls.redis.url) for _ in range(3)]
        cls.queriers = [dh.querier(cls.redis.url) for _ in range(2)]
        for p in [cls.aio, *cls.ingesters, *cls.queriers]:
            cls.procs.append(p)     # before start(): cleaned up even if it fails
            p.start()
        for q in cls.queriers:
            dh.wait_members(q, 3)
        cls.t0 = (h.now_ms() // 1000 - 3600) * 1000
        rnd = random.Random(4)
        for i in range(60):
            svc, region = SERVICES[i % 3], REGIONS[i % 2]
            ts = cls.t0 // 1000 + i * 30
            params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
            name = f"app.cpu{{svc=\"{svc}\",region=\"{region}\"}}"
            body = folded(i)
            r = cls.aio.ingest(name, body, params=params)
            assert r.status == 200, r.describe()
            r = rnd.choice(cls.ingesters).ingest(name, body, params=params)
            assert r.status == 200, r.describe()
        cls.redis.wait_drained()
        cls.t1 = cls.t0 + 60 * 30 * 1000 + 60_000
        cls.ptype = cls.aio.q("ProfileTypes", start=cls.t0, end=cls.t1).profile_types[0].ID

    @classmethod
    def tearDownClass(cls):
        for p in getattr(cls, "procs", []):
            p.cleanup()
        if getattr(cls, "redis", None):
            cls.redis.cleanup()

    def test_profiles_travel_through_the_streams(self):
        self.assertEqual(60, self.redis.totals()["added"])
        consumed = [dh.metric(i, "ember_redis_consumed_total") for i in self.ingesters]
        self.assertEqual(60, sum(consumed), consumed)
        self.assertGreaterEqual(sum(1 for c in consumed if c), 2, consumed)

    def same(self, method, **fields):
        want = self.aio.q(method, **fields)
        for q in self.queriers:
            got = q.q(method, **fields)
            self.assertEqual(want, got, f"{method} {fields} via querier {q.port}")
        return want

    def test_flame_graphs_truncated_once(self):
        for sel in ("{}", '{region="eu"}', '{region="us"}'):
            for max_nodes in (0, 5, 17):
                fg = self.same("SelectMergeStacktraces", profile_typeID=self.ptype,
                               label_selector=sel, start=self.t0, end=self.t1,
                               max_nodes=max_nodes).flamegraph
                if sel == "{}":
                    self.assertGreater(fg.total, 0, (sel, max_nodes))
            self.same("SelectMergeStacktraces", profile_typeID=self.ptype, label_selector=sel,
                      start=self.t0, end=self.t1, max_nodes=9, format=2)  # TREE

    def test_diff(self):
        cls = h.rpc_classes(f"{h.QUERIER}/SelectMergeStacktraces")[0]
        left = cls(profile_typeID=self.ptype, label_selector='{svc="api"}',
                   start=self.t0, end=self.t1, max_nodes=11)
        right = cls(profile_typeID=self.ptype, label_selector='{svc="db"}',
                    start=self.t0, end=self.t1)
        self.same("Diff", left=left, right=right)

    def test_series_sum_average_group_by_limit(self):
        for agg in (0, 1):       # SUM, AVERAGE
            for group_by, limit in (([], 0), (["svc"], 0), (["region"], 1),
                                    (["svc", "region"], 2)):
                m = self.same("SelectSeries", profile_typeID=self.ptype, label_selector="{}",
                              start=self.t0, end=self.t1, step=300.0, group_by=group_by,
                              aggregation=agg, limit=limit)
                self.assertTrue(m.series)

    def test_listings(self):
        self.same("LabelNames", start=self.t0, end=self.t1)
        self.same("LabelValues", name="svc", start=self.t0, end=self.t1)
        self.same("Series", matchers=['{region="eu"}'], start=self.t0, end=self.t1)
        self.same("ProfileTypes", start=self.t0, end=self.t1)
        self.same("GetProfileStats")

    def test_pprof_totals(self):
        def total(e):
            raw = e.merge_profile(self.ptype, "{}", self.t0, self.t1)
            p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
            return sum(s.value[0] for s in p.sample)
        want = total(self.aio)
        self.assertGreater(want, 0)
        for q in self.queriers:
            self.assertEqual(want, total(q))

    def push_while(self, targets, stop, acked):
        """Pushes to random live ingesters until stop is set; each profile an
        ingester acknowledged also goes to the all-in-one (the reference)."""
        rnd = random.Random(len(acked) + 99)
        while not stop.is_set():
            i = len(acked)
            ts = self.t0 // 1000 + (i % 60) * 30 + 5
            params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
            name = f"app.cpu{{svc=\"{SERVICES[i % 3]}\",region=\"{REGIONS[i % 2]}\"}}"
            body = folded(1000 + i)
            r = rnd.choice(targets).ingest(name, body, params=params)
            if r.status == 200:
                r2 = self.aio.ingest(name, body, params=params)
                assert r2.status == 200, r2.describe()
                acked.append(i)
            time.sleep(0.005)

    def kill_under_load(self, victim, dead_for):
        others = [i for i in self.ingesters if i is not victim]
        stop, acked = threading.Event(), []
        pusher = threading.Thread(target=self.push_while, args=(others, stop, acked))
        pusher.start()
        try:
            time.sleep(0.5)
            # Stopped first, so Redis delivers entries to its blocked
            # XREADGROUP that it never acknowledges: the kill leaves some
            # pending for sure, not only when it lands between commit and XACK.
            # If it was stopped between two reads (no XREADGROUP outstanding),
            # nothing is delivered to it: let it run a moment and stop it again.
            cid = dh.consumer_id(victim)
            for _ in range(20):
                victim.proc.send_signal(signal.SIGSTOP)
                try:
                    h.wait_for(lambda: self.redis.pending_of(cid) > 0, timeout=1.5,
                               what="entries pending for the stopped ingester")
                    break
                except AssertionError:
                    victim.proc.send_signal(signal.SIGCONT)
                    time.sleep(0.05)
            self.assertGreater(self.redis.pending_of(cid), 0)
            victim.kill9()
            time.sleep(dead_for)
            if dead_for > 2:    # past claim-idle: nobody but the others can drain it
                self.redis.wait_drained(timeout=30)
                self.assertEqual(0, self.redis.pending_of(dh.consumer_id(victim)))
            victim.start()
            time.sleep(0.5)
        finally:
            stop.set()
            pusher.join()
        self.assertGreater(len(acked), 20)
        self.redis.wait_drained(timeout=30)
        for q in self.queriers:
            dh.wait_members(q, 3)
        self.test_pprof_totals()
        self.test_flame_graphs_truncated_once()
        self.test_series_sum_average_group_by_limit()

    def test_zz_killed_ingester(self):
        """Runs last: kill -9 one ingester; queries say which one is missing;
        every acknowledged profile counts exactly once, whether the victim's
        pending entries were claimed by the others or re-read by itself."""
        victim = self.ingesters[0]
        victim.kill9()
        cls = h.rpc_classes(f"{h.QUERIER}/LabelNames")[0]
        r = self.queriers[0].call(f"{h.QUERIER}/LabelNames", cls(start=self.t0, end=self.t1),
                                  check=False)
        if r.status != 200:     # before the member TTL passes
            self.assertEqual(r.status, 503, r.describe())
            self.assertIn(f"127.0.0.1:{victim.port}", r.body.decode())
        victim.start()
        for q in self.queriers:
            dh.wait_members(q, 3)
        self.kill_under_load(self.ingesters[1], dead_for=4.0)   # claimed by the others
        claimed = sum(dh.metric(i, "ember_redis_claimed_total")
                      for i in (self.ingesters[0], self.ingesters[2]))
        self.assertGreater(claimed, 0)      # XAUTOCLAIM did the work
        self.kill_under_load(self.ingesters[2], dead_for=0.0)   # re-read by itself


if __name__ == "__main__":
    unittest.main()
