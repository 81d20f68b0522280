"""Distributed mode: 1 redis-server + 3 ember-ingester + 2 ember-querier.

The same profiles go to one all-in-one `ember` and, each to a random
ingester, to the cluster; every query RPC answered by either querier must
equal the all-in-one's answer (flame graphs truncated once at the end, trees,
diffs, series SUM and AVERAGE with group_by and limit, labels, series sets,
profile types, stats, merged pprof totals). Every profile travels through the
streams ember:ingest:<p>: the ingester that received it is not necessarily
the one that stores it.

The rest of what an all-in-one serves is answered too, and the same:
AnalyzeQuery (figures summed over ingesters; SplitSeriesAnalyzeTest: a series
held by two ingesters counted once), SelectHeatmap and SelectSeries exemplars, the legacy /pyroscope/render (JSON with timeline
and groups, DOT), render-diff and label-values, version and feature flags;
settings written through one querier are read through the other (they live
in Redis). MultiTenantSettingsTest: settings per tenant across queriers and a
querier restart, and what a Redis outage does to them.

Last, kill -9 of an ingester while pushes continue, twice: once it stays dead
past --redis.claim-idle (its pending entries are claimed by the others), once
it restarts at once (it re-reads its own pending entries); each time every
acknowledged profile counts exactly once.
"""
import json
import os
import threading
import random
import signal
import time
import unittest
import uuid
from urllib.parse import urlencode

import distributed_harness as dh
import harness as h

SERVICES = ("api", "db", "worker")
REGIONS = ("eu", "us")


def connect_json(e, path, body, org=None):
    """A Connect unary call with the JSON codec (for the methods harness.py
    has no classes for); returns the Response (JSON decoded into .json)."""
    hdrs = {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
    if org:
        hdrs["X-Scope-OrgID"] = org
    return e.request("POST", path, json.dumps(body).encode(), hdrs)


SETTINGS = "/settings.v1.SettingsService"


class DistributedTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
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
            name = f"app.cpu{{svc={svc},region={region}}}"
            body = dh.folded(i)
            r = cls.aio.ingest(name, body, params=params)
            assert r.status == 200, r.describe()
            r = rnd.choice(cls.ingesters).ingest(name, body, params=params)
            assert r.status == 200, r.describe()
        cls.redis.wait_drained()
        cls.t1 = cls.t0 + 60 * 30 * 1000 + 60_000
        cls.ptype = cls.aio.q("ProfileTypes", start=cls.t0, end=cls.t1).profile_types[0].ID

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
                self.assertGreater(fg.total, 0, (sel, max_nodes))  # the selector matched
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

    # -------------------------------------------- the rest of the all-in-one

    def same_json(self, path, body):
        """The Connect JSON answer of path (status, then decoded body) is the
        all-in-one's through both queriers."""
        want = connect_json(self.aio, path, body)
        for q in self.queriers:
            got = connect_json(q, path, body)
            self.assertEqual((want.status, want.json), (got.status, got.json),
                             f"{path} {body} via querier {q.port}: {got.describe()}")
        return want

    def test_analyze_query(self):
        """Series, profiles and samples equal the all-in-one's; the blocks and
        their bytes are the ingesters' own (summed), and a series whose
        profiles sit on several ingesters counts once."""
        rng = {"start": str(self.t0), "end": str(self.t1)}
        path = f"/{h.QUERIER}/AnalyzeQuery"
        for sel in ("{}", '{region="eu"}', '{svc="db",region="us"}'):
            body = {"query": self.ptype + sel, **rng}
            want = connect_json(self.aio, path, body)
            self.assertEqual(want.status, 200, want.describe())
            ws = want.json["queryScopes"][0]
            self.assertGreater(int(ws.get("profileCount", "0")), 0, (sel, want.json))
            if sel == "{}":
                self.assertEqual(ws["seriesCount"], "6")    # 3 svc x 2 regions
                self.assertEqual(ws["profileCount"], "60")
            per_ingester = [connect_json(i, path, body).json["queryScopes"][0]
                            for i in self.ingesters]
            for q in self.queriers:
                r = connect_json(q, path, body)
                self.assertEqual(r.status, 200, r.describe())
                gs, gi = r.json["queryScopes"][0], r.json["queryImpact"]
                for k in ("seriesCount", "profileCount", "sampleCount"):
                    self.assertEqual(ws[k], gs[k], f"{k} {sel} via querier {q.port}")
                self.assertEqual(want.json["queryImpact"]["totalQueriedSeries"],
                                 gi["totalQueriedSeries"])
                self.assertEqual(gs["componentType"], "ember ingester")
                self.assertEqual(gs["componentCount"], "3")
                for k in ("blockCount", "profileBytes"):
                    self.assertEqual(sum(int(p.get(k, "0")) for p in per_ingester),
                                     int(gs[k]), k)
                self.assertGreater(int(gi["totalBytesInTimeRange"]), 0)
            # Ingesters hold overlapping series: summing them would over-count.
            self.assertGreaterEqual(sum(int(p.get("seriesCount", "0")) for p in per_ingester),
                                    int(ws["seriesCount"]))
        # A bad query is the same error everywhere.
        self.same_json(path, {"query": self.ptype + "{svc=", **rng})
        self.same_json(path, {"query": "nonsense", **rng})

    def same_but_ids(self, path, body):
        """As same_json, but profile ids are compared only as UUIDs: ember
        gives /ingest profiles random ids, so the all-in-one's and the
        cluster's copies differ."""
        def strip(x):
            if isinstance(x, dict):
                if "profileId" in x:
                    self.assertEqual(str(uuid.UUID(x["profileId"])), x["profileId"])
                return {k: ("uuid" if k == "profileId" else strip(v)) for k, v in x.items()}
            return [strip(v) for v in x] if isinstance(x, list) else x
        want = connect_json(self.aio, path, body)
        for q in self.queriers:
            got = connect_json(q, path, body)
            self.assertEqual((want.status, strip(want.json)), (got.status, strip(got.json)),
                             f"{path} {body} via querier {q.port}: {got.describe()}")
        return want

    def test_heatmap_and_exemplars_through_the_fanout(self):
        """Built from every ingester's profiles (ShardService/SelectProfiles):
        the all-in-one's answer (ids aside), and the heatmap counts the 60
        profiles sent."""
        rng = {"start": str(self.t0), "end": str(self.t1), "step": 300}
        for group_by in ([], ["region"], ["svc", "region"]):
            r = self.same_but_ids(f"/{h.QUERIER}/SelectHeatmap",
                                  {"profileTypeID": self.ptype, "labelSelector": "{}", **rng,
                                   "groupBy": group_by, "queryType": "HEATMAP_QUERY_TYPE_INDIVIDUAL",
                                   "exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL"})
            self.assertEqual(r.status, 200, r.describe())
            counts = [int(c) for s in r.json["series"] for sl in s["slots"] for c in sl["counts"]]
            self.assertEqual(sum(counts), 60, (group_by, r.json))
            r = self.same_but_ids(f"/{h.QUERIER}/SelectSeries",
                                  {"profileTypeID": self.ptype, "labelSelector": "{}", **rng,
                                   "groupBy": group_by, "exemplarType": "EXEMPLAR_TYPE_INDIVIDUAL"})
            self.assertEqual(r.status, 200, r.describe())
            self.assertTrue(all(p.get("exemplars") for s in r.json["series"] for p in s["points"]),
                            r.json)
        # a bad request is the same error everywhere
        r = self.same_json(f"/{h.QUERIER}/SelectHeatmap",
                           {"profileTypeID": self.ptype, "labelSelector": "{", **rng})
        self.assertEqual(r.json["code"], "invalid_argument")

    def same_get(self, path, params):
        """GET path?params: status, content type and body equal the
        all-in-one's through both queriers; returns the all-in-one's."""
        want = self.aio.request("GET", f"{path}?{urlencode(params)}")
        for q in self.queriers:
            got = q.request("GET", f"{path}?{urlencode(params)}")
            what = f"GET {path} {params} via querier {q.port}"
            self.assertEqual(want.status, got.status, f"{what}: {got.describe()}")
            self.assertEqual(want.header("content-type"), got.header("content-type"), what)
            if want.json is not None:
                self.assertEqual(want.json, got.json, what)
            else:
                self.assertEqual(want.body.decode(), got.body.decode(), what)
        return want

    def window(self):
        return {"from": str(self.t0 // 1000), "until": str(self.t1 // 1000)}

    def test_legacy_render(self):
        for sel in ("{}", '{region="eu"}'):
            for extra in ({}, {"maxNodes": "7"}, {"groupBy": "svc"},
                          {"groupBy": "region", "aggregation": "avg"}):
                r = self.same_get("/pyroscope/render",
                                  {"query": self.ptype + sel, **self.window(), **extra})
                self.assertEqual(r.status, 200, r.describe())
                fb = r.json["flamebearer"]
                self.assertGreater(fb["numTicks"], 0)
                if "groupBy" in extra:      # one timeline per group instead
                    self.assertGreaterEqual(len(r.json["groups"]), 2 if sel == "{}" else 1,
                                            r.json["groups"].keys())
                    for g in r.json["groups"].values():
                        self.assertTrue(any(g["samples"]), g)
                else:
                    self.assertTrue(any(r.json["timeline"]["samples"]))
                if "maxNodes" in extra:
                    self.assertLessEqual(len(fb["names"]), 9)    # total, 7, "other"
        # errors are the same too
        r = self.same_get("/pyroscope/render", {"query": "{}", **self.window()})
        self.assertEqual(r.status, 400)
        r = self.same_get("/pyroscope/render", {"query": self.ptype + "{}", "maxNodes": "-3",
                                                **self.window()})
        self.assertEqual(r.status, 400)

    def test_legacy_render_dot(self):
        for params in ({}, {"maxNodes": "5"}):
            r = self.same_get("/pyroscope/render",
                              {"query": self.ptype + "{}", "format": "dot", **self.window(),
                               **params})
            self.assertEqual(r.status, 200, r.describe())
            self.assertTrue(r.body.startswith(b"digraph "), r.body[:80])
            self.assertIn(b" -> ", r.body)

    def test_legacy_render_diff(self):
        w = self.window()
        for max_nodes in ("0", "6"):
            r = self.same_get("/pyroscope/render-diff", {
                "leftQuery": self.ptype + '{svc="api"}', "leftFrom": w["from"],
                "leftUntil": w["until"], "rightQuery": self.ptype + '{svc="db"}',
                "rightFrom": w["from"], "rightUntil": w["until"], "maxNodes": max_nodes})
            self.assertEqual(r.status, 200, r.describe())
            fb = r.json["flamebearer"]
            self.assertGreater(r.json["leftTicks"], 0)
            self.assertGreater(r.json["rightTicks"], 0)
            self.assertEqual(len(fb["levels"][0]), 7)       # the diff layout
        r = self.same_get("/pyroscope/render-diff", {"leftQuery": self.ptype + "{}"})
        self.assertEqual(r.status, 400)

    def test_legacy_label_values(self):
        r = self.same_get("/pyroscope/label-values", {"label": "__name__"})
        self.assertEqual(r.status, 200)
        self.assertIn(self.ptype, r.json)
        r = self.same_get("/pyroscope/label-values", {"label": "svc"})
        self.assertEqual(r.status, 400)     # as Pyroscope: the label is not forwarded
        self.same_get("/pyroscope/label-values", {})

    def test_version_and_feature_flags(self):
        r = self.same_json("/version.v1.Version/Version", {})
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json["QuerierAPI"], "1")
        r = self.same_json("/capabilities.v1.FeatureFlagsService/GetFeatureFlags", {})
        self.assertEqual(r.status, 200)
        flags = {f["name"]: f.get("enabled", False) for f in r.json["featureFlags"]}
        self.assertEqual(flags.get("utf8LabelNames"), True)
        self.assertEqual(flags.get("v2StorageLayer"), True)

    def test_settings_shared_between_queriers(self):
        q0, q1 = self.queriers
        setting = {"name": "dist.shared", "value": '{"x":1}', "modifiedAt": "1700000000001"}
        r = connect_json(q0, f"{SETTINGS}/Set", {"setting": setting})
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(r.json, {"setting": setting})
        got = connect_json(q1, f"{SETTINGS}/Get", {})
        self.assertEqual(got.status, 200, got.describe())
        self.assertIn(setting, got.json.get("settings", []))
        # an older write through the other querier loses, as in one process
        older = dict(setting, value="old", modifiedAt="1700000000000")
        r = connect_json(q1, f"{SETTINGS}/Set", {"setting": older})
        self.assertEqual((r.status, r.json["code"]), (409, "already_exists"), r.describe())
        r = connect_json(q1, f"{SETTINGS}/Delete", {"name": "dist.shared"})
        self.assertEqual(r.status, 200, r.describe())
        got = connect_json(q0, f"{SETTINGS}/Get", {})
        self.assertNotIn("dist.shared", [s["name"] for s in got.json.get("settings", [])])

    def push_while(self, targets, stop, acked):
        """Pushes to random live ingesters until stop is set; each profile an
        ingester acknowledged also goes to the all-in-one (the reference)."""
        rnd = random.Random(len(acked) + 99)
        while not stop.is_set():
            i = len(acked)
            ts = self.t0 // 1000 + (i % 60) * 30 + 5
            params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
            name = f"app.cpu{{svc={SERVICES[i % 3]},region={REGIONS[i % 2]}}}"
            body = dh.folded(1000 + i)
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
            # Enough acknowledged pushes around the kill to judge, counted
            # rather than assumed from a sleep: a busy machine pushes slower.
            h.wait_for(lambda: len(acked) > 20, timeout=60, what="20 acknowledged pushes")
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


class SplitSeriesAnalyzeTest(dh.ClusterTestCase):
    """AnalyzeQuery when one series has profiles on two ingesters, made
    deterministic: two standalone ingesters (no Redis: each stores what it is
    sent) asked by a querier through --querier.ingesters. Series `split`
    goes to both, series `only0` to the first: the ingesters count 2 + 1
    series, the querier and the all-in-one 2."""

    @classmethod
    def set_up(cls):
        ing = os.path.join(h.BIN_DIR, "services", "ingester", "ember-ingester")
        qry = os.path.join(h.BIN_DIR, "services", "querier", "ember-querier")
        cls.aio = h.Ember()
        cls.ingesters = [dh.Role(ing, True) for _ in range(2)]
        for p in [cls.aio, *cls.ingesters]:
            cls.procs.append(p)
            p.start()
        urls = ",".join(i.url for i in cls.ingesters)
        cls.querier = dh.Role(qry, False, args=[f"--querier.ingesters={urls}"])
        cls.procs.append(cls.querier)
        cls.querier.start()
        cls.t0 = (h.now_ms() // 1000 - 600) * 1000
        pushes = [("split", 0), ("split", 1), ("split", 0), ("only0", 0), ("split", 1)]
        for k, (svc, target) in enumerate(pushes):
            ts = cls.t0 // 1000 + k * 10
            params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
            body = dh.folded(500 + k)
            for e in (cls.aio, cls.ingesters[target]):
                r = e.ingest(f"split.cpu{{svc={svc}}}", body, params=params)
                assert r.status == 200, r.describe()
        cls.body = {"query": "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}",
                    "start": str(cls.t0), "end": str(cls.t0 + 120_000)}

    def scope(self, e):
        r = connect_json(e, f"/{h.QUERIER}/AnalyzeQuery", self.body)
        self.assertEqual(r.status, 200, r.describe())
        return r.json["queryScopes"][0]

    def test_a_series_on_two_ingesters_counts_once(self):
        want = h.wait_for(lambda: (lambda s: s if s.get("profileCount") == "5" else None)(
            self.scope(self.aio)), what="5 profiles in the all-in-one")
        self.assertEqual(want["seriesCount"], "2")
        per = h.wait_for(lambda: (lambda v: v if sum(int(x.get("profileCount", "0"))
                                                     for x in v) == 5 else None)(
            [self.scope(i) for i in self.ingesters]), what="5 profiles in the ingesters")
        self.assertEqual([x["seriesCount"] for x in per], ["2", "1"])
        got = self.scope(self.querier)
        for k in ("seriesCount", "profileCount", "sampleCount"):
            self.assertEqual(want[k], got[k], k)
        self.assertEqual(got["componentCount"], "2")


class MultiTenantSettingsTest(dh.ClusterTestCase):
    """Two multi-tenant queriers sharing one redis-server (no ingesters: the
    settings do not need them; a static ingester URL makes /ready answer).
    Each tenant sees its own settings through either querier, also after a
    querier restart; a Redis outage is `unavailable`, and settings return
    with Redis."""

    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        nowhere = f"--querier.ingesters=http://127.0.0.1:{h.free_port()}"
        cls.queriers = [dh.querier(cls.redis.url, ["--auth.multitenancy-enabled=true",
                                                   nowhere]) for _ in range(2)]
        for q in cls.queriers:
            cls.procs.append(q)
            q.start()

    def get(self, q, org):
        r = connect_json(q, f"{SETTINGS}/Get", {}, org=org)
        self.assertEqual(r.status, 200, r.describe())
        return {s["name"]: s["value"] for s in r.json.get("settings", [])}

    def set(self, q, org, name, value):
        r = connect_json(q, f"{SETTINGS}/Set", {"setting": {"name": name, "value": value}},
                         org=org)
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual((r.json["setting"]["name"], r.json["setting"]["value"]), (name, value))

    def test_tenants_isolated_across_queriers_and_restart(self):
        q0, q1 = self.queriers
        self.set(q0, "tenant-a", "theme", "dark")
        self.set(q1, "tenant-b", "theme", "light")
        self.set(q1, "tenant-a", "zoom", "2")
        for q in (q0, q1):
            self.assertEqual(self.get(q, "tenant-a"), {"theme": "dark", "zoom": "2"})
            self.assertEqual(self.get(q, "tenant-b"), {"theme": "light"})
            self.assertEqual(self.get(q, "tenant-c"), {})
        r = connect_json(q0, f"{SETTINGS}/Get", {})
        self.assertEqual((r.status, r.json["code"]), (401, "unauthenticated"), r.describe())
        r = connect_json(q0, f"{SETTINGS}/Get", {}, org="tenant-a|tenant-b")
        self.assertEqual((r.status, r.json["code"]), (400, "invalid_argument"), r.describe())
        q0.restart()
        self.assertEqual(self.get(q0, "tenant-a"), {"theme": "dark", "zoom": "2"})
        r = connect_json(q0, f"{SETTINGS}/Delete", {"name": "theme"}, org="tenant-a")
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.get(q1, "tenant-a"), {"zoom": "2"})
        self.assertEqual(self.get(q1, "tenant-b"), {"theme": "light"})   # untouched

    def test_version_and_flags_answer(self):
        q = self.queriers[0]
        r = connect_json(q, "/version.v1.Version/Version", {})
        self.assertEqual((r.status, r.json), (200, {"QuerierAPI": "1"}), r.describe())
        r = connect_json(q, "/capabilities.v1.FeatureFlagsService/GetFeatureFlags", {},
                         org="tenant-a")
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual([f["name"] for f in r.json["featureFlags"]],
                         ["pyroscopeRuler", "pyroscopeRulerFunctions", "utf8LabelNames",
                          "v2StorageLayer"])
        r = connect_json(q, "/capabilities.v1.FeatureFlagsService/GetFeatureFlags", {})
        self.assertEqual(r.status, 401, r.describe())

    def test_without_redis_settings_are_unimplemented(self):
        b = os.path.join(h.BIN_DIR, "services", "querier", "ember-querier")
        q = dh.Role(b, False, args=[f"--querier.ingesters=http://127.0.0.1:{h.free_port()}"])
        self.procs.append(q)
        q.start()
        r = connect_json(q, f"{SETTINGS}/Get", {})
        self.assertEqual((r.status, r.json["code"]), (501, "unimplemented"), r.describe())
        self.assertIn("--redis.url", r.json["message"])
        r = connect_json(q, "/version.v1.Version/Version", {})
        self.assertEqual(r.status, 200, r.describe())

    def test_zz_redis_outage(self):
        """Runs last: Redis stopped -> unavailable (503); back (AOF) -> the
        settings are there and writes work again, without restarting."""
        q0, q1 = self.queriers
        self.set(q0, "tenant-d", "kept", "yes")
        self.redis.stop()
        try:
            r = connect_json(q1, f"{SETTINGS}/Get", {}, org="tenant-d")
            self.assertEqual((r.status, r.json["code"]), (503, "unavailable"), r.describe())
            r = connect_json(q0, f"{SETTINGS}/Set", {"setting": {"name": "n", "value": "v"}},
                             org="tenant-d")
            self.assertEqual(r.status, 503, r.describe())
        finally:
            self.redis.start()
        self.assertEqual(self.get(q1, "tenant-d"), {"kept": "yes"})
        self.set(q1, "tenant-d", "after", "1")
        self.assertEqual(self.get(q0, "tenant-d"), {"after": "1", "kept": "yes"})


if __name__ == "__main__":
    unittest.main()
