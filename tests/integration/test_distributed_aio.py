"""`ember --redis.url`: the all-in-one with its ingest path through Redis
streams (receivers XADD, its writer consumes the group) answers like the
plain all-in-one (direct transport) for the same pushes; /ready is false and
pushes get 503 while redis-server is down, and both recover by themselves.
Its writer applies what its own receivers decoded (the handover, issue 32)
rather than decoding the entries again: every profile is taken from there,
and the answers still equal the direct all-in-one's.
"""
import time
import unittest

import distributed_harness as dh
import harness as h


class AllInOneOverRedisTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.direct = h.Ember()
        cls.viaredis = h.Ember(args=[f"--redis.url={cls.redis.url}"])
        for p in (cls.direct, cls.viaredis):
            cls.procs.append(p)     # before start(): cleaned up even if it fails
            p.start()
        cls.t0 = (h.now_ms() // 1000 - 3600) * 1000
        cls.t1 = cls.t0 + 40 * 30 * 1000 + 60_000

    def push(self, i, both=True):
        ts = self.t0 // 1000 + (i % 40) * 30
        params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
        name = f"app.cpu{{svc=s{i % 3}}}"  # /ingest's name takes values unquoted
        r = self.viaredis.ingest(name, dh.folded(i), params=params)
        if r.status == 200 and both:
            self.assertEqual(200, self.direct.ingest(name, dh.folded(i), params=params).status)
        return r

    def same(self):
        self.redis.wait_drained()
        pt = self.direct.q("ProfileTypes", start=self.t0, end=self.t1).profile_types[0].ID
        for sel in ("{}", '{svc="s1"}'):
            want = self.direct.q("SelectMergeStacktraces", profile_typeID=pt,
                                 label_selector=sel, start=self.t0, end=self.t1, max_nodes=8)
            got = self.viaredis.q("SelectMergeStacktraces", profile_typeID=pt,
                                  label_selector=sel, start=self.t0, end=self.t1, max_nodes=8)
            self.assertEqual(want, got, sel)
            self.assertGreater(want.flamegraph.total, 0, f"{sel} matched no data")

    def handover(self, result):
        m = self.viaredis.metrics()
        return sum(v for (name, labels), v in m.items()
                   if name == "ember_ingest_handover_total" and ("result", result) in labels)

    def test_same_answers_and_outage(self):
        for i in range(30):
            self.assertEqual(200, self.push(i).status)
        self.assertEqual(30, self.redis.totals()["added"])
        self.same()
        self.assertEqual(30, self.handover("taken"))

        self.redis.kill9()
        h.wait_for(lambda: self.viaredis.request("GET", "/ready").status == 503, timeout=10,
                   what="/ready false while redis is down")
        r = self.push(100, both=False)
        self.assertEqual(503, r.status, r.describe())
        self.redis.start()
        h.wait_for(lambda: self.viaredis.request("GET", "/ready").status == 200, timeout=20,
                   what="/ready again")
        # r was a 503 before any XADD (the link was down): it is not stored.
        for i in range(30, 50):
            self.assertEqual(200, self.push(i).status)
        self.same()
        self.assertEqual(50, self.handover("taken"))
        self.assertEqual(1, self.handover("dropped"))  # the 503: never published


if __name__ == "__main__":
    unittest.main()
