"""Tenant isolation with --auth.multitenancy-enabled (pyroscope-api.md §9).

Two tenants push series with overlapping label sets: both have
service_name="shared-svc", env="prod" (process_cpu, hand-made stacks that
differ per tenant: t-a gets main;a;b=3 main;a;c=2 main;d=1, t-b gets
main;a;b=1 main;e=4), plus one service of their own (t-a: "only-a" with label
team_a; t-b: "only-b" with label team_b and a profile type of its own,
custom_b). t-a's profiles are at t0, t-b's at t0 + 1 s.

Every read (all of querier.v1, settings.v1, and the legacy /pyroscope/render,
render-diff and label-values when they are served) must answer with the
caller's data only; "t-a|t-b" reads see both; a missing X-Scope-OrgID is 401
unauthenticated on reads and writes. Expected values are worked out from the
stacks above, never taken from ember."""
import json
import time
import unittest
from urllib.parse import urlencode

import harness as h
from test_connect_rpcs import CPU, SAMPLES, SPAN_B, SPAN_C, STACKS_A, STACKS_B, cpu_profile

Q = h.QUERIER
SHARED = '{service_name="shared-svc"}'
CUSTOM_B = "custom_b:samples:count:cpu:nanoseconds"
CUSTOM_B_CPU = "custom_b:cpu:nanoseconds:cpu:nanoseconds"
BOTH = "t-a|t-b"


class TenancyTest(h.ServerTestCase):
    server_args = ("--auth.multitenancy-enabled=true",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.t0 = (int(time.time()) - 600) * 1000
        cls.rng = dict(start=cls.t0 - 60_000, end=cls.t0 + 60_000)
        pushes = [
            ("t-a", {"__name__": "process_cpu", "service_name": "shared-svc", "env": "prod"},
             cpu_profile(STACKS_A, cls.t0 * 1_000_000, {"main;a;b": SPAN_B, "main;a;c": SPAN_C})),
            ("t-a", {"__name__": "process_cpu", "service_name": "only-a", "team_a": "x"},
             cpu_profile({"x;y": 7}, cls.t0 * 1_000_000)),
            ("t-b", {"__name__": "process_cpu", "service_name": "shared-svc", "env": "prod"},
             cpu_profile(STACKS_B, (cls.t0 + 1000) * 1_000_000)),
            ("t-b", {"__name__": "custom_b", "service_name": "only-b", "team_b": "y"},
             cpu_profile({"p;q": 9}, (cls.t0 + 1000) * 1_000_000)),
        ]
        for tenant, labels, raw in pushes:
            r = cls.srv.push([(labels, [raw])], headers={"X-Scope-OrgID": tenant})
            assert r.status == 200, r.describe()
        h.wait_for(lambda: cls.values("t-a|t-b", "service_name") == ["only-a", "only-b", "shared-svc"],
                   timeout=20, what="both tenants' pushes to become queryable")

    # ------------------------------------------------------------ helpers

    @classmethod
    def rpc(cls, tenant, method, req, resp_cls=None):
        """Connect call with application/proto; .msg decoded on 200."""
        headers = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}
        if tenant is not None:
            headers["X-Scope-OrgID"] = tenant
        r = cls.srv.request("POST", "/" + method, req.SerializeToString(), headers)
        if r.status == 200 and resp_cls is not None:
            r.msg = resp_cls.FromString(r.body)
        return r

    @classmethod
    def rpc_json(cls, tenant, method, body):
        headers = {"Content-Type": "application/json"}
        if tenant is not None:
            headers["X-Scope-OrgID"] = tenant
        return cls.srv.request("POST", "/" + method, json.dumps(body).encode(), headers)

    @classmethod
    def values(cls, tenant, name):
        t = h.pb().types
        r = cls.rpc(tenant, f"{Q}/LabelValues",
                    t.LabelValuesRequest(name=name, start=cls.t0 - 60_000, end=cls.t0 + 60_000),
                    t.LabelValuesResponse)
        assert r.status == 200, r.describe()
        return list(r.msg.names)

    def ok(self, r, what):
        self.assertEqual(r.status, 200, f"{what}: {r.describe()}")
        return r.msg if r.msg is not None else r.json

    def flame(self, tenant, **kw):
        q = h.pb().querier
        req = q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES, label_selector=SHARED, **self.rng)
        for k, v in kw.items():  # only repeated fields here
            getattr(req, k).extend(v)
        fg = self.ok(self.rpc(tenant, f"{Q}/SelectMergeStacktraces", req, q.SelectMergeStacktracesResponse),
                     f"SelectMergeStacktraces as {tenant}").flamegraph
        return fg.total, h.flamegraph_names(fg) if fg.total else set()

    def legacy(self, tenant, path, params):
        headers = {"X-Scope-OrgID": tenant} if tenant is not None else {}
        r = self.srv.request("GET", f"{path}?{urlencode(params)}", headers=headers)
        if r.status == 404 and tenant is not None:
            self.skipTest(f"{path} is not served yet (404)")
        return r

    # ------------------------------------------------------------- reads

    def test_listing_rpcs(self):
        q, t = h.pb().querier, h.pb().types
        want_types = {"t-a": [CPU, SAMPLES], "t-b": [CUSTOM_B_CPU, CUSTOM_B, CPU, SAMPLES]}
        want_types[BOTH] = want_types["t-b"]
        want_names = {"t-a": ["env", "service_name", "team_a"], "t-b": ["env", "service_name", "team_b"],
                      BOTH: ["env", "service_name", "team_a", "team_b"]}
        want_services = {"t-a": ["only-a", "shared-svc"], "t-b": ["only-b", "shared-svc"],
                         BOTH: ["only-a", "only-b", "shared-svc"]}
        for tenant in ("t-a", "t-b", BOTH):
            with self.subTest(tenant=tenant):
                m = self.ok(self.rpc(tenant, f"{Q}/ProfileTypes", q.ProfileTypesRequest(**self.rng),
                                     q.ProfileTypesResponse), "ProfileTypes")
                self.assertEqual([pt.ID for pt in m.profile_types], want_types[tenant])
                m = self.ok(self.rpc(tenant, f"{Q}/LabelNames", t.LabelNamesRequest(**self.rng),
                                     t.LabelNamesResponse), "LabelNames")
                self.assertEqual([n for n in m.names if not n.startswith("__")], want_names[tenant])
                self.assertEqual(self.values(tenant, "service_name"), want_services[tenant])
                m = self.ok(self.rpc(tenant, f"{Q}/Series", q.SeriesRequest(
                    matchers=[SHARED], label_names=["service_name", "env", "__profile_type__"], **self.rng),
                    q.SeriesResponse), "Series")
                got = {tuple(sorted((lp.name, lp.value) for lp in ls.labels)) for ls in m.labels_set}
                # the label sets overlap: a|b reads show the same two sets
                self.assertEqual(got, {(("__profile_type__", pt), ("env", "prod"),
                                        ("service_name", "shared-svc")) for pt in (CPU, SAMPLES)})

    def test_flame_graphs_and_profiles(self):
        names_a = {"total", "main", "a", "b", "c", "d"}
        names_b = {"total", "main", "a", "b", "e"}
        self.assertEqual(self.flame("t-a"), (6, names_a))
        self.assertEqual(self.flame("t-b"), (5, names_b))
        self.assertEqual(self.flame(BOTH), (11, names_a | names_b))
        # span ids are t-a's: t-b has no sample with them
        self.assertEqual(self.flame("t-a", span_selector=[SPAN_B])[0], 3)
        self.assertEqual(self.flame("t-b", span_selector=[SPAN_B])[0], 0)
        q = h.pb().querier
        for tenant, total in (("t-a", 5), ("t-b", 0), (BOTH, 5)):
            with self.subTest(rpc="SelectMergeSpanProfile", tenant=tenant):
                m = self.ok(self.rpc(tenant, f"{Q}/SelectMergeSpanProfile", q.SelectMergeSpanProfileRequest(
                    profile_typeID=SAMPLES, label_selector=SHARED, span_selector=[SPAN_B, SPAN_C],
                    **self.rng),
                    q.SelectMergeSpanProfileResponse), "SelectMergeSpanProfile")
                self.assertEqual(m.flamegraph.total if m.HasField("flamegraph") else 0, total)
        both = {k: STACKS_A.get(k, 0) + STACKS_B.get(k, 0) for k in set(STACKS_A) | set(STACKS_B)}
        for tenant, stacks in (("t-a", STACKS_A), ("t-b", STACKS_B), (BOTH, both)):
            with self.subTest(rpc="SelectMergeProfile", tenant=tenant):
                r = self.rpc(tenant, f"{Q}/SelectMergeProfile", q.SelectMergeProfileRequest(
                    profile_typeID=SAMPLES, label_selector=SHARED, **self.rng), h.pb().profile.Profile)
                self.assertEqual(self.folded(self.ok(r, "SelectMergeProfile")), stacks)

    @staticmethod
    def folded(p):
        st = p.string_table
        fn = {f.id: st[f.name] for f in p.function}
        loc = {l.id: [fn[line.function_id] for line in l.line] for l in p.location}
        out = {}
        for s in p.sample:
            key = ";".join(reversed([n for lid in s.location_id for n in loc[lid]]))
            out[key] = out.get(key, 0) + s.value[0]
        return out

    def test_series_diff_stats(self):
        q, t = h.pb().querier, h.pb().types
        rng = dict(start=self.t0 - 30_000, end=self.t0 + 30_000)
        for tenant, total in (("t-a", 6), ("t-b", 5), (BOTH, 11)):
            with self.subTest(rpc="SelectSeries", tenant=tenant):
                m = self.ok(self.rpc(tenant, f"{Q}/SelectSeries", q.SelectSeriesRequest(
                    profile_typeID=SAMPLES, label_selector=SHARED, step=60, **rng),
                    q.SelectSeriesResponse), "SelectSeries")
                self.assertEqual(sum(p.value for s in m.series for p in s.points), total)
        for tenant, ticks in (("t-a", 6), ("t-b", 5), (BOTH, 11)):
            with self.subTest(rpc="Diff", tenant=tenant):
                side = q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES, label_selector=SHARED,
                                                       **self.rng)
                m = self.ok(self.rpc(tenant, f"{Q}/Diff", q.DiffRequest(left=side, right=side),
                                     q.DiffResponse), "Diff")
                self.assertEqual((m.flamegraph.leftTicks, m.flamegraph.rightTicks), (ticks, ticks))
        t_b = self.t0 + 1000
        for tenant, want in (("t-a", (True, self.t0, self.t0)), ("t-b", (True, t_b, t_b)),
                             (BOTH, (True, self.t0, t_b))):
            with self.subTest(rpc="GetProfileStats", tenant=tenant):
                m = self.ok(self.rpc(tenant, f"{Q}/GetProfileStats", t.GetProfileStatsRequest(),
                                     t.GetProfileStatsResponse), "GetProfileStats")
                self.assertEqual((m.data_ingested, m.oldest_profile_time, m.newest_profile_time), want)
        m = self.ok(self.rpc("t-c", f"{Q}/GetProfileStats", t.GetProfileStatsRequest(),
                             t.GetProfileStatsResponse), "GetProfileStats")
        self.assertFalse(m.data_ingested, "a tenant that never pushed")
        for tenant, series in (("t-a", 1), ("t-b", 1), (BOTH, 2)):
            with self.subTest(rpc="AnalyzeQuery", tenant=tenant):
                m = self.ok(self.rpc(tenant, f"{Q}/AnalyzeQuery", q.AnalyzeQueryRequest(
                    query=SAMPLES + SHARED, **self.rng), q.AnalyzeQueryResponse), "AnalyzeQuery")
                if m.HasField("query_impact"):  # an empty answer is allowed (§5.9)
                    self.assertEqual(m.query_impact.total_queried_series, series)

    def test_settings(self):
        s = "settings.v1.SettingsService"
        for tenant, value in (("t-a", "dark"), ("t-b", "light")):
            r = self.rpc_json(tenant, f"{s}/Set", {"setting": {"name": "theme", "value": value,
                                                               "modifiedAt": "100"}})
            self.assertEqual(r.status, 200, r.describe())
        for tenant, value in (("t-a", "dark"), ("t-b", "light")):
            r = self.rpc_json(tenant, f"{s}/Get", {})
            self.assertEqual(r.json, {"settings": [{"name": "theme", "value": value, "modifiedAt": "100"}]})
        r = self.rpc_json("t-c", f"{s}/Get", {})
        self.assertEqual((r.status, r.json), (200, {}), "a tenant without settings sees none")
        r = self.rpc_json(BOTH, f"{s}/Get", {})
        self.assertEqual((r.status, (r.json or {}).get("code")), (400, "invalid_argument"),
                         "settings belong to one tenant")
        r = self.rpc_json("t-a", f"{s}/Delete", {"name": "theme"})
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.rpc_json("t-a", f"{s}/Get", {}).json, {})
        self.assertEqual(self.rpc_json("t-b", f"{s}/Get", {}).json,
                         {"settings": [{"name": "theme", "value": "light", "modifiedAt": "100"}]})

    # ------------------------------------------------------------ legacy

    def test_legacy_render(self):
        base = {"from": self.t0 - 60_000, "until": self.t0 + 60_000}
        for tenant, ticks in (("t-a", 6), ("t-b", 5), (BOTH, 11)):
            with self.subTest(tenant=tenant):
                r = self.legacy(tenant, "/pyroscope/render",
                                dict(base, query=SAMPLES + SHARED, format="json"))
                self.assertEqual(r.status, 200, r.describe())
                self.assertEqual(r.json["flamebearer"]["numTicks"], ticks)

    def test_legacy_render_diff(self):
        side = {"Query": SAMPLES + SHARED, "From": self.t0 - 60_000, "Until": self.t0 + 60_000}
        params = {f"{lr}{k}": v for lr in ("left", "right") for k, v in side.items()}
        for tenant, ticks in (("t-a", 6), ("t-b", 5), (BOTH, 11)):
            with self.subTest(tenant=tenant):
                r = self.legacy(tenant, "/pyroscope/render-diff", params)
                self.assertEqual(r.status, 200, r.describe())
                self.assertEqual((r.json["leftTicks"], r.json["rightTicks"]), (ticks, ticks))

    def test_legacy_label_values(self):
        want = {"t-a": [CPU, SAMPLES], "t-b": [CUSTOM_B_CPU, CUSTOM_B, CPU, SAMPLES]}
        want[BOTH] = want["t-b"]
        for tenant in ("t-a", "t-b", BOTH):
            with self.subTest(tenant=tenant):
                r = self.legacy(tenant, "/pyroscope/label-values", {"label": "__name__"})
                self.assertEqual(r.status, 200, r.describe())
                self.assertEqual(sorted(r.json), sorted(want[tenant]))

    # ------------------------------------------------------ no tenant: 401

    def test_missing_org_id_is_unauthenticated(self):
        q, t = h.pb().querier, h.pb().types
        side = q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES, label_selector="{}", **self.rng)
        # valid requests: the 401 must come from the missing tenant alone
        connect = {
            f"{Q}/ProfileTypes": q.ProfileTypesRequest(), f"{Q}/LabelNames": t.LabelNamesRequest(),
            f"{Q}/LabelValues": t.LabelValuesRequest(name="service_name"), f"{Q}/Series": q.SeriesRequest(),
            f"{Q}/SelectMergeStacktraces": q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES,
                                                                           label_selector="{}", **self.rng),
            f"{Q}/SelectMergeSpanProfile": q.SelectMergeSpanProfileRequest(
                profile_typeID=SAMPLES, label_selector="{}", span_selector=[SPAN_B], **self.rng),
            f"{Q}/SelectMergeProfile": q.SelectMergeProfileRequest(profile_typeID=SAMPLES,
                                                                   label_selector="{}", **self.rng),
            f"{Q}/SelectSeries": q.SelectSeriesRequest(profile_typeID=SAMPLES, label_selector="{}", step=15,
                                                       **self.rng),
            f"{Q}/Diff": q.DiffRequest(left=side, right=side),
            f"{Q}/GetProfileStats": t.GetProfileStatsRequest(),
            f"{Q}/AnalyzeQuery": q.AnalyzeQueryRequest(query=SAMPLES + "{}", **self.rng),
            h.PUSH: h.pb().push.PushRequest(),
        }
        json_only = ("settings.v1.SettingsService/Get", "settings.v1.SettingsService/Set",
                     "settings.v1.SettingsService/Delete",
                     "capabilities.v1.FeatureFlagsService/GetFeatureFlags")
        for method, req in connect.items():
            with self.subTest(method=method):
                self.assertUnauthenticated(self.rpc(None, method, req), method)
        for method in json_only:
            with self.subTest(method=method):
                body = {"setting": {"name": "x", "value": "y"}} if method.endswith("/Set") else {"name": "x"}
                self.assertUnauthenticated(self.rpc_json(None, method, body), method)
        r = self.srv.ingest("noauth-app", b"a;b 1\n")
        self.assertUnauthenticated(r, "/ingest")
        # version.v1 has no auth interceptor in Pyroscope: served without a tenant
        r = self.rpc_json(None, "version.v1.Version/Version", {})
        self.assertEqual((r.status, r.json), (200, {"QuerierAPI": "1"}))
        query = {"query": SAMPLES + "{}", "from": self.rng["start"], "until": self.rng["end"]}
        legacy = {"/pyroscope/render": query,
                  "/pyroscope/render-diff": {f"{side}{k.capitalize()}": v for side in ("left", "right")
                                             for k, v in query.items()},
                  "/pyroscope/label-values": {"label": "__name__"}}
        for path, params in legacy.items():
            with self.subTest(path=path):
                r = self.legacy(None, path, params)
                if r.status == 404:
                    self.skipTest(f"{path} is not served yet (404)")
                self.assertUnauthenticated(r, path)
        # nothing was written by the rejected calls
        self.assertEqual(self.values(BOTH, "service_name"), ["only-a", "only-b", "shared-svc"])

    def test_bad_request_without_tenant_is_401(self):
        """The tenant is checked before the request is looked at (as
        Pyroscope's HTTP middleware does): a request that is bad AND has no
        X-Scope-OrgID is 401, not 400. Each request below is shown to be a
        400 with a tenant first, so the 401 cannot come from anything else."""
        q = h.pb().querier
        side = q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES, label_selector="{}", **self.rng)
        connect = {
            "SelectMergeStacktraces max_nodes -1": (f"{Q}/SelectMergeStacktraces",
                q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES, label_selector="{}",
                                                max_nodes=-1, **self.rng)),
            "SelectMergeStacktraces bad profile id": (f"{Q}/SelectMergeStacktraces",
                q.SelectMergeStacktracesRequest(profile_typeID=SAMPLES, label_selector="{}",
                                                profile_id_selector=["nope"], **self.rng)),
            "SelectMergeProfile no type": (f"{Q}/SelectMergeProfile",
                q.SelectMergeProfileRequest(label_selector="{}", **self.rng)),
            "SelectMergeSpanProfile no spans": (f"{Q}/SelectMergeSpanProfile",
                q.SelectMergeSpanProfileRequest(profile_typeID=SAMPLES, label_selector="{}",
                                                **self.rng)),
            "SelectMergeSpanProfile bad format": (f"{Q}/SelectMergeSpanProfile",
                q.SelectMergeSpanProfileRequest(profile_typeID=SAMPLES, label_selector="{}",
                                                span_selector=[SPAN_B],
                                                format=q.PROFILE_FORMAT_PPROF, **self.rng)),
            "Diff no sides": (f"{Q}/Diff", q.DiffRequest()),
            "Diff one side": (f"{Q}/Diff", q.DiffRequest(left=side)),
            "SelectSeries no type": (f"{Q}/SelectSeries",
                q.SelectSeriesRequest(label_selector="{}", step=15, **self.rng)),
            "Series start after end": (f"{Q}/Series",
                q.SeriesRequest(start=self.rng["end"], end=self.rng["start"])),
        }
        for name, (method, req) in connect.items():
            with self.subTest(case=name):
                self.assertStatus(self.rpc("t-a", method, req), 400, f"{name} with a tenant")
                self.assertUnauthenticated(self.rpc(None, method, req), name)
        # a body that does not even decode
        headers = {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"}
        for method in ("SelectMergeSpanProfile", "Diff", "SelectMergeStacktraces"):
            with self.subTest(case=f"{method} undecodable"):
                r = self.srv.request("POST", f"/{Q}/{method}", b"\xff\xff\xff",
                                     dict(headers, **{"X-Scope-OrgID": "t-a"}))
                self.assertStatus(r, 400, f"{method} undecodable with a tenant")
                r = self.srv.request("POST", f"/{Q}/{method}", b"\xff\xff\xff", headers)
                self.assertUnauthenticated(r, f"{method} undecodable")
        json_h = {"Content-Type": "application/json"}
        for method in ("settings.v1.SettingsService/Set",
                       "capabilities.v1.FeatureFlagsService/GetFeatureFlags"):
            with self.subTest(case=f"{method} not JSON"):
                r = self.srv.request("POST", f"/{method}", b"{not json",
                                     dict(json_h, **{"X-Scope-OrgID": "t-a"}))
                self.assertStatus(r, 400, f"{method} not JSON with a tenant")
                r = self.srv.request("POST", f"/{method}", b"{not json", json_h)
                self.assertUnauthenticated(r, f"{method} not JSON")
        rng = {"from": self.rng["start"], "until": self.rng["end"]}
        legacy = {
            "render no query": ("/pyroscope/render", rng),
            "render bad query": ("/pyroscope/render", dict(rng, query="no-braces")),
            "render-diff no right side": ("/pyroscope/render-diff",
                {"leftQuery": SAMPLES + "{}", "leftFrom": rng["from"], "leftUntil": rng["until"]}),
            "render-diff types differ": ("/pyroscope/render-diff",
                {"leftQuery": SAMPLES + "{}", "rightQuery": CPU + "{}",
                 **{f"{s}{k}": v for s in ("left", "right")
                    for k, v in (("From", rng["from"]), ("Until", rng["until"]))}}),
            "label-values no label": ("/pyroscope/label-values", {}),
        }
        for name, (path, params) in legacy.items():
            with self.subTest(case=name):
                self.assertStatus(self.legacy("t-a", path, params), 400, f"{name} with a tenant")
                self.assertUnauthenticated(self.legacy(None, path, params), name)

    def assertUnauthenticated(self, r, what):
        self.assertEqual(r.status, 401, f"{what} without X-Scope-OrgID: {r.describe()}")
        self.assertEqual((r.json or {}).get("code"), "unauthenticated", f"{what}: {r.describe()}")


if __name__ == "__main__":
    unittest.main()
