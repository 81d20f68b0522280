"""Replication by zones: 1 redis-server, zone a (2 ember-ingester), zone b
(2 ember-ingester), 2 ember-querier, and an all-in-one `ember` fed every
profile the cluster acknowledged (the oracle).

Every zone's consumer group reads every stream entry, so each zone stores a
full copy. A zone-a ingester is killed (-9) under load and NEVER restarted:
its zone-a peer claims what it left pending, but what it had stored is gone
from zone a. Zone a is then incomplete (its registry names an id that is not
live), so the queriers answer from zone b, and every answer (flame graphs,
series, pprof totals) equals the oracle's: every acknowledged profile
exactly once.

Then: with zone b also incomplete (one of its ingesters stopped), queries
answer 503 naming the missing ingesters. Last, the operator removes the dead
id from zone a's registry: zone a is complete again and first by name, so
the queriers answer from it — without the dead ingester's profiles. That is
the documented rule (docs/architecture.md), checked here. Then zone a's
survivor restarts on a new volume (its data dir deleted) under its id: it
records a note (it lacks what it held), so zone a, complete, gives way to
zone b and the answers equal the oracle's again. (First, a bad
--ingester.zone makes `ember` and `ember-ingester` exit 2.)
"""
import os
import shutil
import random
import signal
import subprocess
import threading
import time
import unittest

import distributed_harness as dh
import harness as h

SERVICES = ("api", "db", "worker")
REGIONS = ("eu", "us")


class ZonesTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.aio = h.Ember()
        cls.zone_a = [dh.zoned_ingester(cls.redis.url, "a", f"zone-a-{i}") for i in range(2)]
        cls.zone_b = [dh.zoned_ingester(cls.redis.url, "b", f"zone-b-{i}") for i in range(2)]
        cls.queriers = [dh.querier(cls.redis.url) for _ in range(2)]
        for p in [cls.aio, *cls.zone_a, *cls.zone_b, *cls.queriers]:
            cls.procs.append(p)     # before start(): cleaned up even if it fails
            p.start()
        for q in cls.queriers:
            dh.wait_zones(q, live=4, complete=2, asked=2)
        cls.t0 = (h.now_ms() // 1000 - 3600) * 1000
        cls.t1 = cls.t0 + 60 * 30 * 1000 + 60_000
        cls.n = 0

    # ---- pushes: each one a target acknowledged also goes to the oracle

    def push_one(self, targets, rnd):
        i = ZonesTest.n
        ZonesTest.n += 1
        ts = self.t0 // 1000 + (i % 60) * 30
        params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
        name = f"app.cpu{{svc=\"{SERVICES[i % 3]}\",region=\"{REGIONS[i % 2]}\"}}"
        body = dh.folded(i)
        r = rnd.choice(targets).ingest(name, body, params=params)
        if r.status == 200:
            r2 = self.aio.ingest(name, body, params=params)
            assert r2.status == 200, r2.describe()
        return r.status

    def push_while(self, targets, stop, statuses):
        rnd = random.Random(7)
        while not stop.is_set():
            s = self.push_one(targets, rnd)
            statuses[s] = statuses.get(s, 0) + 1
            time.sleep(0.005)

    # ---- answers

    def ptype(self):
        return self.aio.q("ProfileTypes", start=self.t0, end=self.t1).profile_types[0].ID

    def total(self, e):
        raw = e.merge_profile(self.ptype(), "{}", self.t0, self.t1)
        p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
        return sum(s.value[0] for s in p.sample)

    def assert_same_as_oracle(self):
        pt = self.ptype()
        want_total = self.total(self.aio)
        self.assertGreater(want_total, 0)
        for q in self.queriers:
            self.assertEqual(want_total, self.total(q), f"pprof total via {q.port}")
            for sel in ("{}", '{region="eu"}', '{svc="db"}'):
                for max_nodes in (0, 7):
                    want = self.aio.q("SelectMergeStacktraces", profile_typeID=pt,
                                      label_selector=sel, start=self.t0, end=self.t1,
                                      max_nodes=max_nodes)
                    got = q.q("SelectMergeStacktraces", profile_typeID=pt, label_selector=sel,
                              start=self.t0, end=self.t1, max_nodes=max_nodes)
                    self.assertEqual(want, got, f"flame graph {sel} {max_nodes} via {q.port}")
            for group_by in ([], ["svc"], ["svc", "region"]):
                fields = dict(profile_typeID=pt, label_selector="{}", start=self.t0,
                              end=self.t1, step=300.0, group_by=group_by)
                self.assertEqual(self.aio.q("SelectSeries", **fields),
                                 q.q("SelectSeries", **fields), f"series {group_by}")
            self.assertEqual(self.aio.q("Series", matchers=["{}"], start=self.t0, end=self.t1),
                             q.q("Series", matchers=["{}"], start=self.t0, end=self.t1))

    def label_names(self, q):
        cls = h.rpc_classes(f"{h.QUERIER}/LabelNames")[0]
        return q.call(f"{h.QUERIER}/LabelNames", cls(start=self.t0, end=self.t1), check=False)

    # ---- the story, in order

    def test_0_bad_zone_is_refused(self):
        for binary in (h.ember_binary(), self.zone_a[0].binary):
            for zone in ("a b", "a/b", "x" * 65):
                r = subprocess.run([binary, f"--ingester.zone={zone}"], capture_output=True,
                                   timeout=10, env=dict(os.environ))
                self.assertEqual(2, r.returncode, (binary, zone, r.stderr))
                self.assertIn(b"--ingester.zone", r.stderr)

    def test_1_every_zone_stores_everything(self):
        rnd = random.Random(1)
        targets = [*self.zone_a, *self.zone_b]
        for _ in range(60):
            self.assertEqual(200, self.push_one(targets, rnd))
        dh.wait_groups_drained(self.redis, ["ingesters.a", "ingesters.b"])
        for zone in (self.zone_a, self.zone_b):
            consumed = [dh.metric(i, "ember_redis_consumed_total") for i in zone]
            self.assertEqual(ZonesTest.n, sum(consumed), consumed)
        # The victim must hold profiles of its own, or losing it proves nothing.
        self.assertGreater(dh.metric(self.zone_a[0], "ember_redis_consumed_total"), 0)
        # No group but the zones' (receivers create none).
        for key in self.redis.cmd("KEYS", "ember:ingest:*"):
            names = sorted(dh._pairs(g)["name"] for g in self.redis.cmd("XINFO", "GROUPS", key))
            self.assertEqual(["ingesters.a", "ingesters.b"], names)
        self.assertEqual({b"zone-a-0": b"a", b"zone-a-1": b"a", b"zone-b-0": b"b",
                          b"zone-b-1": b"b"},
                         dict(zip(*[iter(self.redis.cmd("HGETALL", dh.REGISTRY))] * 2)))
        # first starts on new volumes: no earlier life lacks anything
        self.assertEqual([], self.redis.cmd("HGETALL", dh.NOTES))
        self.assert_same_as_oracle()

    def test_2_zone_a_ingester_lost_for_good(self):
        victim = self.zone_a[0]
        others = [self.zone_a[1], *self.zone_b]
        stop, statuses = threading.Event(), {}
        pusher = threading.Thread(target=self.push_while, args=(others, stop, statuses))
        pusher.start()
        try:
            time.sleep(0.5)
            # Stopped first so Redis delivers entries to its blocked read that
            # it never acknowledges: the kill leaves some pending for sure.
            for _ in range(20):
                victim.proc.send_signal(signal.SIGSTOP)
                try:
                    h.wait_for(lambda: dh.pending_in_group(self.redis, "zone-a-0",
                                                           "ingesters.a") > 0,
                               timeout=1.5, what="entries pending for the stopped ingester")
                    break
                except AssertionError:
                    victim.proc.send_signal(signal.SIGCONT)
                    time.sleep(0.05)
            self.assertGreater(dh.pending_in_group(self.redis, "zone-a-0", "ingesters.a"), 0)
            victim.kill9()          # and never restarted
            time.sleep(3.0)         # pushes go on
            # ... until enough were acknowledged to judge (counted, not timed).
            h.wait_for(lambda: statuses.get(200, 0) > 20, timeout=60, what="20 pushes answered 200")
        finally:
            stop.set()
            pusher.join()
        self.assertGreater(statuses.get(200, 0), 20, statuses)
        # zone-a-1 claimed what the victim left pending; zone b read everything.
        dh.wait_groups_drained(self.redis, ["ingesters.a", "ingesters.b"], timeout=40)
        self.assertEqual(0, dh.pending_in_group(self.redis, "zone-a-0", "ingesters.a"))
        self.assertGreater(dh.metric(self.zone_a[1], "ember_redis_claimed_total"), 0)
        for q in self.queriers:
            dh.wait_zones(q, live=3, complete=1, asked=2)   # zone b's two
        self.assert_same_as_oracle()

    def test_3_no_complete_zone_is_503_naming_the_missing(self):
        dh.wait_groups_drained(self.redis, ["ingesters.a", "ingesters.b"])
        stopped = self.zone_b[1]
        stopped.proc.send_signal(signal.SIGSTOP)  # no pushes: nothing pending to claim
        try:
            for q in self.queriers:
                dh.wait_zones(q, live=2, complete=0, asked=0)
                r = self.label_names(q)
                self.assertEqual(503, r.status, r.describe())
                body = r.body.decode()
                self.assertIn("zone-a-0", body)
                self.assertIn(f"last seen at http://127.0.0.1:{self.zone_a[0].port}", body)
                self.assertIn("zone-b-1", body)
                self.assertNotIn("zone-a-1", body)
                self.assertEqual(503, q.request("GET", "/ready").status)
        finally:
            stopped.proc.send_signal(signal.SIGCONT)
        for q in self.queriers:
            dh.wait_zones(q, live=3, complete=1, asked=2)
            self.assertEqual(200, q.request("GET", "/ready").status)
        self.assert_same_as_oracle()

    def test_4_registry_edit_makes_zone_a_answer_without_the_lost(self):
        """The operator declares zone-a-0 gone (HDEL from the registry): zone a
        is complete again and first by name, so queries ask it — and it lacks
        the profiles only zone-a-0 had. The documented rule, not a wish."""
        self.assertEqual(1, self.redis.cmd("HDEL", dh.REGISTRY, "zone-a-0"))
        for q in self.queriers:
            dh.wait_zones(q, live=3, complete=2, asked=1)   # zone a's survivor
        want = self.total(self.aio)
        for q in self.queriers:
            got = self.total(q)
            self.assertGreater(got, 0)
            self.assertLess(got, want)
            self.assertEqual(200, self.label_names(q).status)

    def test_5_restart_on_a_new_volume_gives_way(self):
        """zone-a-1 (zone a's only registered member now) stops and starts on
        an empty data dir: what it stored is gone from zone a. Its first
        heartbeat records a note, so the queriers answer from zone b again."""
        survivor = self.zone_a[1]
        survivor.stop()
        shutil.rmtree(survivor.data_dir)
        survivor.start()
        for q in self.queriers:
            dh.wait_zones(q, live=3, complete=2, asked=2)   # zone b's two, not zone a's one
        note = self.redis.cmd("HGET", dh.NOTES, "zone-a-1")
        self.assertIn(b"new volume", note or b"")
        self.assertIsNone(self.redis.cmd("HGET", dh.NOTES, "zone-b-0"))
        self.assert_same_as_oracle()
        # the note stands across the member's next restarts (its volume is intact now)
        survivor.stop()
        survivor.start()
        for q in self.queriers:
            dh.wait_zones(q, live=3, complete=2, asked=2)
        self.assertEqual(note, self.redis.cmd("HGET", dh.NOTES, "zone-a-1"))
        self.assert_same_as_oracle()
        # the new volume's mark went once the note was taken; a start that died
        # before that (its mark left beside blocks/) still counts as a new volume
        marker = os.path.join(survivor.data_dir, "new-volume")
        self.assertFalse(os.path.exists(marker))
        survivor.stop()
        self.assertEqual(1, self.redis.cmd("HDEL", dh.NOTES, "zone-a-1"))
        open(marker, "wb").close()
        survivor.start()
        h.wait_for(lambda: self.redis.cmd("HGET", dh.NOTES, "zone-a-1"), what="the note again")
        self.assertFalse(os.path.exists(marker))
        for q in self.queriers:
            dh.wait_zones(q, live=3, complete=2, asked=2)


if __name__ == "__main__":
    unittest.main()
