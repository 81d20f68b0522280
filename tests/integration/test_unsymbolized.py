"""Unsymbolized frames (issue 31): locations with a mapping and an address but
no line never vanish from a query; they show as `module+0xoffset`.

The profile is built here with protoc's Python classes (google.v1.Profile),
not by ember: four mappings (libc with a file offset, a program, one without
a file name but with a build id, a JIT region with neither), locations
without lines in each and one without a mapping, beside symbolized and inlined
locations. The expected frame names are computed here from the pprof itself
(basename(mapping.filename) + "+0x" + hex(address - memory_start +
file_offset); the build id when the file name is empty; the bare address
without a module), the expected stacks likewise, and the totals come from
`go tool pprof -raw` on the very bytes pushed. Each query path is compared
with them: the flame graph (stack by stack), a call site through an
unsymbolized frame, Diff, the merged pprof (the locations come back as they
were: mapping and address, no line, no made-up function; `go tool pprof`
reads it), the Parca TOP report and /pyroscope/render (JSON and dot).
Before the fix every stack of this profile lost its unsymbolized frames and
a fully unsymbolized one folded into the root."""
import collections
import json
import os
import tempfile
import time
import urllib.parse
import unittest

import harness as h

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
SERVICE = "unsym"
SEL = f'{{service_name="{SERVICE}"}}'
PERIOD = 10_000_000

# (filename, build id, memory_start, memory_limit, file_offset)
MAPPINGS = [("/usr/lib/x86_64-linux-gnu/libc.so.6", "c0ffee01", 0x7F0000028000, 0x7F00001A0000, 0x28000),
            ("/opt/app/bin/server", "", 0x400000, 0x500000, 0),
            ("", "b00b1e5deadbeef", 0x10000000, 0x10100000, 0x1000),
            ("", "", 0x20000000, 0x20100000, 0)]


def build_profile(now_ns):
    """The test pprof (a google.v1.Profile message)."""
    pb = h.pb().profile
    p = pb.Profile()
    strings = [""]

    def s(v):
        if v not in strings:
            strings.append(v)
        return strings.index(v)

    p.sample_type.add(type=s("samples"), unit=s("count"))
    p.sample_type.add(type=s("cpu"), unit=s("nanoseconds"))
    p.period_type.type, p.period_type.unit, p.period = s("cpu"), s("nanoseconds"), PERIOD
    p.time_nanos, p.duration_nanos = now_ns, 10_000_000_000
    for i, (fname, bid, start, limit, off) in enumerate(MAPPINGS, 1):
        p.mapping.add(id=i, memory_start=start, memory_limit=limit, file_offset=off,
                      filename=s(fname), build_id=s(bid))
    for i, name in enumerate(["main", "outer", "inner"], 1):
        p.function.add(id=i, name=s(name), system_name=s(name), filename=s("server.c"))
    locs = [  # (mapping id, address, [function ids, innermost first])
        (2, 0x401000, [1]),              # 1 main
        (2, 0x401200, [3, 2]),           # 2 inner inlined into outer
        (1, 0x7F0000029234, []),         # 3 libc.so.6+0x29234
        (1, 0x7F00000300A0, []),         # 4 libc.so.6+0x300a0
        (2, 0x401777, []),               # 5 server+0x1777
        (3, 0x10000010, []),             # 6 b00b1e5deadbeef+0x1010
        (4, 0x20000044, []),             # 7 0x20000044 (neither file nor build id)
        (0, 0x7FFFF00, []),              # 8 0x7ffff00 (no mapping)
    ]
    for i, (mid, addr, fns) in enumerate(locs, 1):
        loc = p.location.add(id=i, mapping_id=mid, address=addr)
        for f in fns:
            loc.line.add(function_id=f, line=10 * f)
    stacks = [  # leaf first, count
        ([3, 2, 1], 7),      # libc under inner/outer/main
        ([4, 3, 1], 5),
        ([5, 1], 3),
        ([3, 5, 1], 2),
        ([6, 4], 4),         # fully unsymbolized: used to fold into the root
        ([7], 1),
        ([8, 3], 6),
        ([2, 1], 9),
    ]
    for ids, n in stacks:
        p.sample.add(location_id=ids, value=[n, n * PERIOD])
    p.string_table.extend(strings)
    return p


def frame_name(p, loc):
    """The name issue 31 specifies, computed from the pprof."""
    maps = {m.id: m for m in p.mapping}
    m = maps.get(loc.mapping_id)
    if m is not None:
        module = os.path.basename(p.string_table[m.filename]) or p.string_table[m.build_id]
        if module:
            off = loc.address - m.memory_start + m.file_offset if loc.address >= m.memory_start \
                else loc.address
            return f"{module}+0x{off:x}"
    return f"0x{loc.address:x}"


def expected_stacks(p, value_index=1):
    """{root-first frame names: value}: lines outermost first, a location
    without lines its one module+offset frame."""
    fns = {f.id: p.string_table[f.name] for f in p.function}
    frames = {}
    for loc in p.location:
        frames[loc.id] = [fns[l.function_id] for l in reversed(loc.line)] if loc.line \
            else [frame_name(p, loc)]
    out = collections.Counter()
    for smp in p.sample:
        names = []
        for lid in reversed(smp.location_id):
            names.extend(frames[lid])
        out[tuple(names)] += smp.value[value_index]
    return out


def self_by_name(stacks):
    c = collections.Counter()
    for st, v in stacks.items():
        if st:
            c[st[-1]] += v
    return c


def timestamp(ms):
    """google.protobuf.Timestamp as ember's JSON reads it."""
    return {"seconds": str(ms // 1000), "nanos": ms % 1000 * 1_000_000}


class UnsymbolizedTest(h.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        now_ns = time.time_ns() - 60_000_000_000
        cls.profile = build_profile(now_ns)
        cls.raw = cls.profile.SerializeToString()
        cls.window = (now_ns // 1_000_000 - 60_000, now_ns // 1_000_000 + 60_000)
        r = cls.srv.push([({"__name__": "process_cpu", "service_name": SERVICE}, [cls.raw])])
        assert r.status == 200, r.describe()
        d = tempfile.mkdtemp(prefix="ember-unsym-")
        cls.pprof_path = os.path.join(d, "in.pprof")
        with open(cls.pprof_path, "wb") as f:
            f.write(cls.raw)
        cls.go_total = h.pprof_raw(cls.pprof_path)["totals"][("cpu", "nanoseconds")]
        cls.want = expected_stacks(cls.profile)
        h.wait_for(lambda: cls.srv.flamegraph(CPU, SEL, *cls.window).total == cls.go_total,
                   timeout=20, what="the profile to be queryable")

    def unsymbolized_names(self):
        return {frame_name(self.profile, l) for l in self.profile.location if not l.line}

    def test_oracle_agrees_with_itself(self):
        # the stacks computed here add up to what Go's pprof sums
        self.assertEqual(sum(self.want.values()), self.go_total)
        self.assertEqual(self.unsymbolized_names(),
                         {"libc.so.6+0x29234", "libc.so.6+0x300a0", "server+0x1777",
                          "b00b1e5deadbeef+0x1010", "0x20000044", "0x7ffff00"})

    def test_flamegraph_stack_by_stack(self):
        fg = self.srv.flamegraph(CPU, SEL, *self.window)
        self.assertEqual(fg.total, self.go_total)
        got = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
        self.assertEqual(got, self.want)
        self.assertTrue(self.unsymbolized_names() <= set(fg.names))

    def test_flamegraph_json_codec(self):
        fg = self.srv.flamegraph(CPU, SEL, *self.window, codec="json")
        self.assertEqual(fg.total, self.go_total)
        self.assertTrue(self.unsymbolized_names() <= set(fg.names))

    def test_call_site_through_an_unsymbolized_frame(self):
        t = h.pb().types
        site = ["main", "server+0x1777"]
        m = self.srv.q("SelectMergeStacktraces", profile_typeID=CPU, label_selector=SEL,
                       start=self.window[0], end=self.window[1],
                       stack_trace_selector=t.StackTraceSelector(
                           call_site=[t.Location(name=n) for n in site]))
        want = {k: v for k, v in self.want.items() if k[:2] == tuple(site)}
        self.assertTrue(want)
        got = h.flamegraph_stacks(list(m.flamegraph.names), [list(l.values) for l in m.flamegraph.levels])
        self.assertEqual(got, want)

    def test_diff(self):
        q = h.pb().querier
        req = q.SelectMergeStacktracesRequest(profile_typeID=CPU, label_selector=SEL,
                                              start=self.window[0], end=self.window[1])
        m = self.srv.call(f"{h.QUERIER}/Diff", q.DiffRequest(left=req, right=req)).msg
        self.assertEqual(m.flamegraph.leftTicks, self.go_total)
        self.assertEqual(m.flamegraph.rightTicks, self.go_total)
        self.assertTrue(self.unsymbolized_names() <= set(m.flamegraph.names))

    def test_merged_pprof_keeps_locations_as_they_were(self):
        raw = self.srv.merge_profile(CPU, SEL, *self.window)
        path = self.pprof_path + ".merged"
        with open(path, "wb") as f:
            f.write(h.gunzip_if(raw))
        self.assertEqual(h.pprof_raw(path)["totals"][("cpu", "nanoseconds")], self.go_total)
        p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
        fn_names = {p.string_table[f.name] for f in p.function}
        self.assertEqual(fn_names, {"main", "outer", "inner"})  # no made-up function
        got = {frame_name(p, l) for l in p.location if not l.line}
        self.assertEqual(got, self.unsymbolized_names())
        self.assertEqual(expected_stacks(p, 0), expected_stacks(self.profile, 1))

    def test_parca_top(self):
        body = {"mode": "MODE_MERGE", "reportType": "REPORT_TYPE_TOP",
                "merge": {"query": f"{CPU}:delta{SEL}", "start": timestamp(self.window[0]),
                          "end": timestamp(self.window[1])}}
        r = self.srv.request("POST", "/parca.query.v1alpha1.QueryService/Query",
                             json.dumps(body).encode(), {"content-type": "application/json"})
        self.assertStatus(r, 200, "Parca Query TOP")
        doc = json.loads(r.body)
        flat = collections.Counter()
        for node in doc["top"]["list"]:
            flat[node["meta"]["function"]["name"]] += int(node.get("flat", 0))
        self.assertEqual(int(doc["total"]), self.go_total)
        want = self_by_name(self.want)
        for name in self.unsymbolized_names():
            self.assertEqual(flat[name], want[name], name)

    def test_legacy_render(self):
        q = {"query": f"{CPU}{SEL}", "from": str(self.window[0]), "until": str(self.window[1])}
        r = self.srv.request("GET", "/pyroscope/render?" + urllib.parse.urlencode(q))
        self.assertStatus(r, 200, "render")
        fb = json.loads(r.body)["flamebearer"]
        self.assertEqual(fb["numTicks"], self.go_total)
        self.assertEqual(h.flamegraph_stacks(fb["names"], fb["levels"]), self.want)
        r = self.srv.request("GET", "/pyroscope/render?" + urllib.parse.urlencode(dict(q, format="dot")))
        self.assertStatus(r, 200, "render dot")
        text = r.body.decode()
        for name in ("libc.so.6+0x29234", "server+0x1777"):
            self.assertIn(f'[label="{name}\\n', text)


if __name__ == "__main__":
    unittest.main()
