"""Pyroscope's per-profile ids end to end: Push's RawSample.ID (proto and
JSON) is kept per stored profile, and profile_id_selector with UUIDs keeps only
the profiles pushed with one of them, on SelectMergeStacktraces (flame graph
and PROFILE_FORMAT_PPROF), SelectMergeProfile and Diff.

Expected totals are sums of MANIFEST.jsonl entries (computed by Go's pprof
from the input files), never taken from ember; ember's pprof answers are read
with `go tool pprof -raw`. A malformed ID refuses the whole Push (400) and
stores nothing; a malformed selector is invalid_argument (400)."""
import base64
import itertools
import os
import tempfile
import time
import unittest
import uuid

import distributed_harness as dh
import harness as h

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
NS = ("cpu", "nanoseconds")
# real profiles with a cpu/nanoseconds sample type and period type
PROTO_FILES = ["pprof/gopprof-sample.cpu", "pprof/pyroscope-cpu.pprof",
               "pprof/pyroscope-cpu_go_truncated_1.pb.gz", "pprof/pyroscope-profile_rust"]
JSON_FILES = ["pprof/pyroscope-profile_java", "pprof/pyroscope-no_addr_no_line.pb.gz",
              "pprof/gopprof-sample.cpu"]
BOTH = '{service_name=~"pid-proto|pid-json"}'


def pprof_cpu_total(body):
    with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
        f.write(body)
        path = f.name
    try:
        return h.pprof_raw(path)["totals"].get(NS, 0)
    finally:
        os.unlink(path)


def text_forms(u):
    """The accepted spellings of one id, cycling: canonical lower, canonical
    upper, 32 hex digits."""
    return [str(u), str(u).upper(), u.hex]


def push_all(proto_to, json_to, now_ns, headers=None):
    """Push 1 (application/proto, to proto_to): one series, one RawSample per
    PROTO_FILES entry, each with its own UUID. Push 2 (JSON, to json_to): the
    JSON_FILES, the ids spelled in every accepted form. Returns the ids in
    order and {id: MANIFEST cpu total of its profile}."""
    man = h.manifest()
    ids, totals = [], {}
    base = {"__name__": "process_cpu", "__delta__": "false"}
    req = h.pb().push.PushRequest()
    s = req.series.add()
    for k, v in dict(base, service_name="pid-proto").items():
        s.labels.add(name=k, value=v)
    for i, rel in enumerate(PROTO_FILES):
        u = uuid.uuid4()
        raw = h.set_time_nanos(h.read_testdata(rel), now_ns + i * 10**9)
        s.samples.add(raw_profile=raw, ID=str(u))
        ids.append(u)
        totals[u] = h.expected_totals(man[rel])[NS]
    r = proto_to.call(h.PUSH, req, headers=headers, check=False)
    assert r.status == 200, r.describe()
    samples = []
    for i, rel in enumerate(JSON_FILES):
        u = uuid.uuid4()
        raw = h.set_time_nanos(h.read_testdata(rel), now_ns + (10 + i) * 10**9)
        samples.append({"rawProfile": base64.b64encode(raw).decode(), "ID": text_forms(u)[i % 3]})
        ids.append(u)
        totals[u] = h.expected_totals(man[rel])[NS]
    body = {"series": [{"labels": [{"name": k, "value": v} for k, v in
                                   dict(base, service_name="pid-json").items()],
                        "samples": samples}]}
    r = json_to.call(h.PUSH, body, codec="json", headers=headers, check=False)
    assert r.status == 200, r.describe()
    return ids, totals


class QueryHelpers:
    """Queries of cls.qsrv with cls.headers over cls.window (ms)."""
    headers = None

    @classmethod
    def stacktraces(cls, selector, ids, codec="proto", check=True, headers=None, **fields):
        q = h.pb().querier
        return cls.qsrv.call(f"{h.QUERIER}/SelectMergeStacktraces", q.SelectMergeStacktracesRequest(
            profile_typeID=CPU, label_selector=selector, start=cls.window[0], end=cls.window[1],
            profile_id_selector=ids, **fields), codec=codec, check=check,
            headers=cls.headers if headers is None else headers)

    @classmethod
    def flame_total(cls, selector, ids, codec="proto"):
        return cls.stacktraces(selector, ids, codec).msg.flamegraph.total

    def merge_profile(self, selector, ids, codec="proto", check=True, headers=None):
        q = h.pb().querier
        r = self.qsrv.call(f"{h.QUERIER}/SelectMergeProfile", q.SelectMergeProfileRequest(
            profile_typeID=CPU, label_selector=selector, start=self.window[0], end=self.window[1],
            profile_id_selector=ids), codec=codec, check=check,
            headers=self.headers if headers is None else headers)
        if not check:
            return r
        return r.body if codec == "proto" else r.msg.SerializeToString()

    def subsets(self):
        """Some subsets of the ids, across both pushes."""
        ids = self.ids
        return [ids[:1], ids[1:3], [ids[0], ids[4]], ids[3:6], [ids[2], ids[5], ids[6]], ids]


class ProfileIdsTest(QueryHelpers, h.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.qsrv = cls.srv
        now_ns = time.time_ns() - 300 * 10**9
        cls.window = (now_ns // 10**6 - 60_000, now_ns // 10**6 + 120_000)
        cls.ids, cls.totals = push_all(cls.srv, cls.srv, now_ns)
        cls.all_total = sum(cls.totals.values())
        h.wait_for(lambda: cls.flame_total(BOTH, []) == cls.all_total, timeout=30,
                   what="both pushes to become queryable")

    # -------------------------------------------------------------- tests

    def test_oracle_is_meaningful(self):
        """The profiles' totals differ, so a wrong subset cannot add up."""
        totals = [self.totals[u] for u in self.ids]
        self.assertEqual(len(set(self.ids)), 7)
        sums = {sum(c) for n in range(1, 4) for c in itertools.combinations(totals[:6], n)}
        self.assertGreater(len(sums), 30)
        self.assertTrue(all(t > 0 for t in totals))

    def test_flamegraph_subsets(self):
        for subset in self.subsets():
            want = sum(self.totals[u] for u in subset)
            for codec in ("proto", "json"):
                with self.subTest(n=len(subset), codec=codec):
                    self.assertEqual(self.flame_total(BOTH, [str(u) for u in subset], codec),
                                     want)

    def test_any_accepted_spelling_selects(self):
        """Selector ids may be spelled in any accepted form, whatever form the
        push used."""
        subset = [self.ids[1], self.ids[4], self.ids[5]]
        want = sum(self.totals[u] for u in subset)
        for form in range(3):
            with self.subTest(form=form):
                ids = [text_forms(u)[form] for u in subset]
                self.assertEqual(self.flame_total(BOTH, ids), want)

    def test_merge_profile_subsets(self):
        """SelectMergeProfile, proto and JSON, read by go tool pprof."""
        for subset in self.subsets()[:4]:
            want = sum(self.totals[u] for u in subset)
            for codec in ("proto", "json"):
                with self.subTest(n=len(subset), codec=codec):
                    body = self.merge_profile(BOTH, [str(u) for u in subset], codec)
                    self.assertEqual(pprof_cpu_total(body), want)

    def test_stacktraces_pprof_format(self):
        subset = [self.ids[0], self.ids[2], self.ids[6]]
        msg = self.stacktraces(BOTH, [str(u) for u in subset],
                               format=h.pb().querier.PROFILE_FORMAT_PPROF).msg
        self.assertEqual(pprof_cpu_total(msg.pprof.profile.SerializeToString()),
                         sum(self.totals[u] for u in subset))

    def test_label_selector_and_ids_both_apply(self):
        """ids from the other service select nothing in this one."""
        proto_ids, json_ids = self.ids[:4], self.ids[4:]
        self.assertEqual(self.flame_total('{service_name="pid-proto"}', [str(u) for u in json_ids]),
                         0)
        mixed = [str(self.ids[1]), str(self.ids[5])]
        self.assertEqual(self.flame_total('{service_name="pid-json"}', mixed),
                         self.totals[self.ids[5]])
        self.assertEqual(self.flame_total('{service_name="pid-proto"}', []),
                         sum(self.totals[u] for u in proto_ids))

    def test_unknown_id_selects_nothing(self):
        self.assertEqual(self.flame_total(BOTH, [str(uuid.uuid4())]), 0)
        self.assertEqual(pprof_cpu_total(self.merge_profile(BOTH, [str(uuid.uuid4())])), 0)

    def test_diff_sides_select_by_id(self):
        q = h.pb().querier
        left_ids, right_ids = self.ids[:2], self.ids[3:5]

        def side(ids):
            return q.SelectMergeStacktracesRequest(
                profile_typeID=CPU, label_selector=BOTH, start=self.window[0], end=self.window[1],
                profile_id_selector=[str(u) for u in ids])
        m = self.srv.call(f"{h.QUERIER}/Diff",
                          q.DiffRequest(left=side(left_ids), right=side(right_ids))).msg
        self.assertEqual(m.flamegraph.leftTicks, sum(self.totals[u] for u in left_ids))
        self.assertEqual(m.flamegraph.rightTicks, sum(self.totals[u] for u in right_ids))

    def test_bad_selectors(self):
        """Neither a UUID nor 16 hex digits, the two forms mixed, a UUID one
        digit short, too many ids: invalid_argument, on both merges."""
        good = str(self.ids[0])
        cases = {
            "not an id": ["not-a-uuid"],
            "mixed forms": [good, "00000000000000a1"],
            "mixed forms, sample id first": ["00000000000000a1", good],
            "short": [good[:-1]],
            "braces": ["{" + good + "}"],
            "too many": [str(uuid.uuid4()) for _ in range(4097)],
        }
        for name, ids in cases.items():
            with self.subTest(case=name):
                r = self.stacktraces(BOTH, ids, check=False)
                self.assertStatus(r, 400)
                self.assertEqual(r.json["code"], "invalid_argument")
                r = self.merge_profile(BOTH, ids, check=False)
                self.assertStatus(r, 400)

    def test_bad_push_id_stores_nothing(self):
        """One malformed ID among valid samples: 400 naming it, and none of the
        request's profiles is stored (checked after a later push landed)."""
        raw = h.set_time_nanos(h.read_testdata(PROTO_FILES[1]), (self.window[0] + 30_000) * 10**6)
        for codec, bad in (("proto", "1234"), ("json", str(uuid.uuid4())[:-1] + "g")):
            with self.subTest(codec=codec):
                svc = f"pid-bad-{codec}"
                labels = [{"name": "__name__", "value": "process_cpu"},
                          {"name": "service_name", "value": svc}]
                samples = [{"rawProfile": base64.b64encode(raw).decode(), "ID": str(uuid.uuid4())},
                           {"rawProfile": base64.b64encode(raw).decode(), "ID": bad}]
                body = {"series": [{"labels": labels, "samples": samples}]}
                if codec == "proto":
                    body = h.pb().json_format.ParseDict(body, h.pb().push.PushRequest())
                r = self.srv.call(h.PUSH, body, codec=codec, check=False)
                self.assertStatus(r, 400)
                self.assertEqual(r.json["code"], "invalid_argument")
                self.assertIn(bad, r.json["message"])
                marker = f"pid-marker-{codec}"
                r = self.srv.push([({"__name__": "process_cpu", "service_name": marker}, [raw])])
                self.assertStatus(r, 200)
                h.wait_for(lambda: marker in self.srv.label_values("service_name", start=self.window[0],
                                                                     end=self.window[1]),
                           timeout=20, what="the marker push to become queryable")
                self.assertNotIn(svc, self.srv.label_values("service_name", start=self.window[0],
                                                            end=self.window[1]))

    def test_empty_id_is_no_id(self):
        """ID is optional: a profile pushed without one is stored and
        counted, but no UUID selects it."""
        raw = h.set_time_nanos(h.read_testdata(PROTO_FILES[0]), (self.window[0] + 40_000) * 10**6)
        req = h.pb().push.PushRequest()
        s = req.series.add()
        for k, v in {"__name__": "process_cpu", "service_name": "pid-none"}.items():
            s.labels.add(name=k, value=v)
        s.samples.add(raw_profile=raw)
        self.assertStatus(self.srv.call(h.PUSH, req, check=False), 200)
        want = self.totals[self.ids[0]]
        h.wait_for(lambda: self.flame_total('{service_name="pid-none"}', []) == want, timeout=20,
                   what="the push without an ID to become queryable")
        self.assertEqual(self.flame_total('{service_name="pid-none"}', [str(self.ids[0])]), 0)


class DistributedProfileIdsTest(QueryHelpers, dh.ClusterTestCase):
    """The same ids through the cluster: redis-server, 2 ember-ingester, 1
    ember-querier, multitenancy on. Push 1 goes to one ingester and push 2 to
    the other; the streams spread the profiles over both stores, so only if
    every ingester's shard API honours UUIDs do the totals add up. The querier
    checks the tenant before the request, as the all-in-one does."""
    headers = {"X-Scope-OrgID": "t-ids"}

    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        mt = "--auth.multitenancy-enabled=true"
        cls.ingesters = [dh.ingester(cls.redis.url, [mt]) for _ in range(2)]
        cls.qsrv = dh.querier(cls.redis.url, [mt])
        for p in [*cls.ingesters, cls.qsrv]:
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.qsrv, 2)
        now_ns = time.time_ns() - 300 * 10**9
        cls.window = (now_ns // 10**6 - 60_000, now_ns // 10**6 + 120_000)
        cls.ids, cls.totals = push_all(cls.ingesters[0], cls.ingesters[1], now_ns, cls.headers)
        cls.redis.wait_drained()
        cls.all_total = sum(cls.totals.values())
        h.wait_for(lambda: cls.flame_total(BOTH, []) == cls.all_total, timeout=30,
                   what="both pushes to become queryable through the querier")

    def test_profiles_are_spread(self):
        """Both ingesters hold some of the profiles (else this class would
        test one shard only)."""
        held = []
        for ing in self.ingesters:
            q = h.pb().querier
            r = ing.call(f"{h.QUERIER}/SelectMergeStacktraces", q.SelectMergeStacktracesRequest(
                profile_typeID=CPU, label_selector=BOTH, start=self.window[0], end=self.window[1]),
                headers=self.headers)
            held.append(r.msg.flamegraph.total)
        self.assertEqual(sum(held), self.all_total)
        self.assertTrue(all(t > 0 for t in held), held)

    def test_flamegraph_subsets(self):
        for subset in self.subsets():
            with self.subTest(n=len(subset)):
                self.assertEqual(self.flame_total(BOTH, [str(u) for u in subset]),
                                 sum(self.totals[u] for u in subset))

    def test_merge_profile_subsets(self):
        for subset in self.subsets()[:4]:
            with self.subTest(n=len(subset)):
                self.assertEqual(pprof_cpu_total(self.merge_profile(BOTH, [str(u) for u in subset])),
                                 sum(self.totals[u] for u in subset))

    def test_bad_selector_and_tenant_first(self):
        """A bad selector is 400 with a tenant and 401 without one."""
        r = self.stacktraces(BOTH, ["nope"], check=False)
        self.assertEqual((r.status, r.json["code"]), (400, "invalid_argument"), r.describe())
        r = self.stacktraces(BOTH, ["nope"], check=False, headers={})
        self.assertEqual((r.status, r.json["code"]), (401, "unauthenticated"), r.describe())
        q = h.pb().querier
        bad = {"SelectMergeSpanProfile": q.SelectMergeSpanProfileRequest(profile_typeID=CPU),
               "Diff": q.DiffRequest(),
               "SelectMergeStacktraces": q.SelectMergeStacktracesRequest(profile_typeID=CPU,
                                                                         max_nodes=-1)}
        proto = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}
        for method, req in bad.items():
            with self.subTest(method=method):
                path, body = f"/{h.QUERIER}/{method}", req.SerializeToString()
                r = self.qsrv.request("POST", path, body, dict(proto, **self.headers))
                self.assertEqual(r.status, 400, r.describe())
                r = self.qsrv.request("POST", path, body, proto)
                self.assertEqual(r.status, 401, r.describe())


if __name__ == "__main__":
    unittest.main()
