"""Query features that narrow or bound a merge, end to end, judged by Go's
own pprof tool: the call-site focus of stack_trace_selector (SelectMergeProfile,
SelectMergeStacktraces flame graph and PROFILE_FORMAT_PPROF, SelectSeries), the
span selector and profile_id_selector, and the §5.9 time-range rules.

Expected totals come from the *input* profile, read here with python protobuf
(never from ember): a sample is under a call site when its frames, root first
(locations from the last, each location's lines from the last = outermost),
begin with the call-site names. MANIFEST.jsonl gives the unfiltered totals.
ember's pprof answers are written to files and read with `go tool pprof`
(-raw for totals, -traces for the stacks, -top must succeed).
"""
import os
import subprocess
import tempfile
import time
import unittest

import harness as h

SAMPLE = "pprof/gopprof-sample.cpu"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
SAMPLES = "process_cpu:samples:count:cpu:nanoseconds"
SITES = {  # call sites in gopprof-sample.cpu, root first
    "busyLoop": ["runtime.main", "main.main", "main.busyLoop"],
    "mapiternext": ["runtime.main", "main.main", "main.busyLoop", "runtime.mapiternext"],
    "inlined Abs": ["runtime.main", "main.main", "main.busyLoop", "math.Abs"],
    "not a prefix": ["main.main"],
}
SPANS = ["00000000000000a1", "00000000000000b2"]


# ------------------------------------------------------------------ oracle

def root_first_frames(prof, sample):
    loc = {l.id: l for l in prof.location}
    fn = {f.id: prof.string_table[f.name] for f in prof.function}
    frames = []
    for lid in reversed(sample.location_id):
        frames += [fn[line.function_id] for line in reversed(loc[lid].line)]
    return frames


def site_total(prof, site, value_index):
    return sum(s.value[value_index] for s in prof.sample
               if root_first_frames(prof, s)[:len(site)] == site)


def with_span_labels(raw):
    """gopprof-sample.cpu with a span_id label on samples 0, 2, 4, ... (a1 on
    every 4th, b2 on the others); odd samples carry none. Returns the bytes
    and {span: (samples total, cpu total)}."""
    prof = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
    key = len(prof.string_table)
    prof.string_table.extend(["span_id"] + SPANS)
    totals = {sp: [0, 0] for sp in SPANS}
    for i, s in enumerate(prof.sample):
        if i % 2:
            continue
        k = 0 if i % 4 == 0 else 1
        s.label.add(key=key, str=key + 1 + k)
        totals[SPANS[k]][0] += s.value[0]
        totals[SPANS[k]][1] += s.value[1]
    return prof, prof.SerializeToString(), totals


# ------------------------------------------------------------ the judge

def go_pprof(body, *args):
    with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
        f.write(body)
        path = f.name
    try:
        r = subprocess.run([h.pprof_tool(), *args, "-symbolize=none", path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise AssertionError(f"go tool pprof {args} failed: {r.stderr[:500]}")
        return r.stdout
    finally:
        os.unlink(path)


def pprof_totals(body):
    with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
        f.write(body)
        path = f.name
    try:
        return h.pprof_raw(path)["totals"]
    finally:
        os.unlink(path)


def pprof_traces(body):
    """Stacks of `pprof -traces`, root first, inline markers dropped."""
    stacks, cur = [], None
    for line in go_pprof(body, "-traces").splitlines():
        if line.startswith("-----------+"):
            if cur:
                stacks.append(list(reversed(cur)))
            cur = []
        elif cur is not None and line[13:].strip():
            cur.append(line[13:].strip().removesuffix(" (inline)"))
    if cur:
        stacks.append(list(reversed(cur)))
    return stacks


class QueryFeaturesTest(h.ServerTestCase):
    # The §5.9 range rules are tested as Pyroscope configures them (ember's
    # default has no limit).
    server_args = ("--querier.max-query-length=24h",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        p = h.pb()
        raw = h.read_testdata(SAMPLE)
        now_ns = time.time_ns() - 120 * 10**9
        cls.window = (now_ns // 10**6 - 60_000, now_ns // 10**6 + 60_000)
        cls.prof = p.profile.Profile.FromString(h.gunzip_if(raw))
        base = {"__name__": "process_cpu", "__delta__": "false"}
        r = cls.srv.push([(dict(base, service_name="feat-sample"),
                           [h.set_time_nanos(raw, now_ns)])])
        assert r.status == 200, r.describe()
        span_prof, span_raw, cls.span_totals = with_span_labels(raw)
        span_prof.time_nanos = now_ns
        r = cls.srv.push([(dict(base, service_name="feat-spans"), [span_prof.SerializeToString()])])
        assert r.status == 200, r.describe()
        for svc in ("feat-sample", "feat-spans"):
            h.wait_for(lambda: cls.srv.flamegraph(CPU, f'{{service_name="{svc}"}}', *cls.window).total
                       == 1760000000, timeout=20, what=f"{svc} to be queryable")

    def selector(self, names):
        t = h.pb().types
        return t.StackTraceSelector(call_site=[t.Location(name=n) for n in names])

    def merge_profile(self, codec="proto", service="feat-sample", **fields):
        q = h.pb().querier
        r = self.srv.call(f"{h.QUERIER}/SelectMergeProfile",
                          q.SelectMergeProfileRequest(profile_typeID=CPU,
                                                      label_selector=f'{{service_name="{service}"}}',
                                                      start=self.window[0], end=self.window[1],
                                                      **fields), codec=codec)
        return r.body if codec == "proto" else r.msg.SerializeToString()

    def stacktraces(self, codec="proto", service="feat-sample", **fields):
        q = h.pb().querier
        return self.srv.call(f"{h.QUERIER}/SelectMergeStacktraces",
                             q.SelectMergeStacktracesRequest(
                                 profile_typeID=CPU, label_selector=f'{{service_name="{service}"}}',
                                 start=self.window[0], end=self.window[1], **fields),
                             codec=codec).msg

    # ------------------------------------------------------- call site

    def test_oracle_is_meaningful(self):
        """The chosen call sites cut the profile differently (MANIFEST: 1.76 s;
        every stack runs under main.busyLoop)."""
        total = h.expected_totals(h.manifest()[SAMPLE])[("cpu", "nanoseconds")]
        self.assertEqual(sum(s.value[1] for s in self.prof.sample), total)
        got = {k: site_total(self.prof, v, 1) for k, v in SITES.items()}
        self.assertTrue(0 < got["mapiternext"] < got["busyLoop"] <= total, got)
        self.assertGreater(got["inlined Abs"], 0)
        self.assertEqual(got["not a prefix"], 0)

    def test_call_site_merge_profile(self):
        """SelectMergeProfile with a call site, proto and JSON: go tool pprof
        reads it, its totals are the call site's, and every stack it holds
        starts, root first, with the call site."""
        for name, site in SITES.items():
            want = site_total(self.prof, site, 1)
            for codec in ("proto", "json"):
                with self.subTest(site=name, codec=codec):
                    body = self.merge_profile(codec, stack_trace_selector=self.selector(site))
                    totals = pprof_totals(body)
                    self.assertEqual(totals.get(("cpu", "nanoseconds"), 0), want)
                    if want:
                        self.assertIn("Showing nodes accounting for", go_pprof(body, "-top"))
                        stacks = pprof_traces(body)
                        self.assertTrue(stacks)
                        for stack in stacks:
                            self.assertEqual(stack[:len(site)], site)

    def test_call_site_flamegraph_and_pprof_format(self):
        for name, site in SITES.items():
            want = site_total(self.prof, site, 1)
            with self.subTest(site=name):
                fg = self.stacktraces(stack_trace_selector=self.selector(site)).flamegraph
                self.assertEqual(fg.total, want)
                if want:
                    levels = h.decode_flamegraph(fg)
                    self.assertEqual([lvl[0]["name"] for lvl in levels[1:len(site) + 1]], site,
                                     "one path from the root through the call site")
                    self.assertTrue(all(len(lvl) == 1 for lvl in levels[1:len(site) + 1]))
                msg = self.stacktraces(stack_trace_selector=self.selector(site),
                                       format=h.pb().querier.PROFILE_FORMAT_PPROF)
                body = msg.pprof.profile.SerializeToString()
                self.assertEqual(pprof_totals(body).get(("cpu", "nanoseconds"), 0), want)

    def test_call_site_series(self):
        for name, site in SITES.items():
            with self.subTest(site=name):
                q = h.pb().querier
                m = self.srv.call(f"{h.QUERIER}/SelectSeries", q.SelectSeriesRequest(
                    profile_typeID=CPU, label_selector='{service_name="feat-sample"}',
                    start=self.window[0], end=self.window[1], step=60,
                    stack_trace_selector=self.selector(site))).msg
                got = sum(pt.value for s in m.series for pt in s.points)
                self.assertEqual(got, site_total(self.prof, site, 1))

    def test_go_pgo(self):
        """go_pgo keep_locations=2: every stack keeps its two leaf-most
        locations; the total is the profile's (the call site is ignored)."""
        t = h.pb().types
        sts = t.StackTraceSelector(call_site=[t.Location(name="nowhere")],
                                   go_pgo=t.GoPGO(keep_locations=2))
        body = self.merge_profile(stack_trace_selector=sts)
        self.assertEqual(pprof_totals(body)[("cpu", "nanoseconds")], 1760000000)
        prof = h.pb().profile.Profile.FromString(body)
        self.assertTrue(all(len(s.location_id) <= 2 for s in prof.sample))

    # ------------------------------------------------------ sample ids

    def test_span_selector_pprof(self):
        """span_selector on SelectMergeStacktraces format PPROF, and the same
        id through profile_id_selector (ember stores one id per sample, from
        the span_id or profile_id pprof label; UUIDs select whole profiles:
        test_profile_ids.py)."""
        pf = h.pb().querier.PROFILE_FORMAT_PPROF
        for span, (_, cpu) in self.span_totals.items():
            with self.subTest(span=span):
                msg = self.stacktraces(service="feat-spans", span_selector=[span], format=pf)
                body = msg.pprof.profile.SerializeToString()
                self.assertEqual(pprof_totals(body)[("cpu", "nanoseconds")], cpu)
                go_pprof(body, "-top")
                body = self.merge_profile(service="feat-spans", profile_id_selector=[span])
                self.assertEqual(pprof_totals(body)[("cpu", "nanoseconds")], cpu)
        both = self.stacktraces(service="feat-spans", span_selector=SPANS).flamegraph.total
        self.assertEqual(both, sum(c for _, c in self.span_totals.values()))

    def test_span_profile_rpc(self):
        q = h.pb().querier
        span = SPANS[0]
        req = q.SelectMergeSpanProfileRequest(profile_typeID=SAMPLES,
                                              label_selector='{service_name="feat-spans"}',
                                              span_selector=[span], start=self.window[0],
                                              end=self.window[1])
        r = self.srv.request("POST", f"/{h.QUERIER}/SelectMergeSpanProfile",
                             req.SerializeToString(), {"Content-Type": "application/proto"})
        self.assertStatus(r, 200)
        fg = q.SelectMergeSpanProfileResponse.FromString(r.body).flamegraph
        self.assertEqual(fg.total, self.span_totals[span][0])

    # ------------------------------------------------------ time range

    def test_time_range_rules(self):
        """§5.9: start > end and a range over 24 h are invalid_argument (400,
        Connect JSON); listing RPCs sent without a start are not limited."""
        q, t = h.pb().querier, h.pb().types
        now = h.now_ms()
        cases = {
            "SelectMergeStacktraces": q.SelectMergeStacktracesRequest(
                profile_typeID=CPU, label_selector="{}", start=now - 25 * 3600_000, end=now),
            "SelectMergeProfile": q.SelectMergeProfileRequest(
                profile_typeID=CPU, label_selector="{}", start=now - 25 * 3600_000, end=now),
            "SelectSeries": q.SelectSeriesRequest(
                profile_typeID=CPU, label_selector="{}", start=now - 25 * 3600_000, end=now,
                step=60),
            "LabelNames": t.LabelNamesRequest(start=now - 25 * 3600_000, end=now),
        }
        for method, req in cases.items():
            for codec in ("proto", "json"):
                with self.subTest(method=method, codec=codec):
                    r = self.srv.call(f"{h.QUERIER}/{method}", req, codec=codec, check=False)
                    self.assertStatus(r, 400)
                    self.assertEqual(r.json["code"], "invalid_argument")
                    self.assertIn("max_query_length, actual: 25h0m0s, limit: 24h0m0s",
                                  r.json["message"])
        r = self.srv.call(f"{h.QUERIER}/SelectMergeStacktraces", q.SelectMergeStacktracesRequest(
            profile_typeID=CPU, label_selector="{}", start=now, end=now - 1), check=False)
        self.assertStatus(r, 400)
        self.assertIn("must not be after", r.json["message"])
        names = self.srv.q("LabelNames", start=0, end=now + 3600_000).names
        self.assertIn("service_name", names)


if __name__ == "__main__":
    unittest.main()
