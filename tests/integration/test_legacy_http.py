"""The legacy query HTTP API (pyroscope-api.md §7) end to end: folded stacks
uploaded to /ingest at known times come back from GET /pyroscope/render as the
flamebearer document worked out by hand below (names, levels, timeline with
its 15 s step, groups), from /pyroscope/render-diff in the 7-number layout,
and from /pyroscope/label-values; format=dot draws them; errors are Connect
error JSON. The shape is compared with testdata/flamebearer/profile.json.

The data, in seconds from B (a multiple of 15, ~15 min ago), type
process_cpu:samples:count:: (suffix .cpu, sampleRate=0: §2.10):
    B+3   region=eu  main;a;b 3  main;a;c 2  main;d 1     (6)
    B+43  region=us  main;a;b 1  main;e 4                  (5)
    B+44  region=us  main;e 1                              (1)
Merged: main;a;b 4, main;a;c 2, main;d 1, main;e 5 (12).
"""
import json
import re
import time
import unittest
from urllib.parse import urlencode

import harness as h

PTYPE = "process_cpu:samples:count::"
SERVICE = "legacy-render"
QUERY = f'{PTYPE}{{service_name="{SERVICE}"}}'

# §5.4 layout: children at parent.x + parent.self in ascending name order;
# names in the order of a DFS that pops siblings in descending order:
# total, main, then e, d, a (pushed a, d, e), then c, b.
NAMES = ["total", "main", "e", "d", "a", "c", "b"]
LEVELS = [[0, 12, 0, 0],
          [0, 12, 0, 1],
          [0, 6, 0, 4, 0, 1, 1, 3, 0, 5, 5, 2],    # a [0,6) d [6,7) e [7,12): gaps 0
          [0, 4, 4, 6, 0, 2, 2, 5]]                # b [0,4) c [4,6)


class LegacyHttpTest(h.ServerTestCase):
    # The §5.9 range rules are tested as Pyroscope configures them (ember's
    # default has no limit).
    server_args = ("--querier.max-query-length=24h",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.B = (int(time.time()) - 900) // 15 * 15
        uploads = [("eu", cls.B + 3, b"main;a;b 3\nmain;a;c 2\nmain;d 1\n"),
                   ("us", cls.B + 43, b"main;a;b 1\nmain;e 4\n"),
                   ("us", cls.B + 44, b"main;e 1\n")]
        for region, at, body in uploads:
            r = cls.srv.ingest(f"{SERVICE}.cpu{{region={region}}}", body,
                               {"from": at, "until": at + 10, "sampleRate": 0})
            assert r.status == 200, r.describe()
        # from B+1 s (seconds) until B+61 s (milliseconds, as Explore Profiles sends)
        cls.window = {"from": str(cls.B + 1), "until": str((cls.B + 61) * 1000)}
        h.wait_for(lambda: cls.render(query=QUERY, **cls.window).json["flamebearer"]["numTicks"] == 12,
                   timeout=20, what="the three uploads to be queryable")

    @classmethod
    def get(cls, path, params, headers=None):
        return cls.srv.request("GET", f"{path}?{urlencode(params)}", headers=headers)

    @classmethod
    def render(cls, pairs=(), **params):
        return cls.get("/pyroscope/render", list(params.items()) + list(pairs))

    def render_ok(self, pairs=(), **params):
        r = self.render(pairs, **params)
        self.assertStatus(r, 200, f"render {params} {pairs}")
        self.assertEqual(r.header("content-type"), "application/json")
        self.assertTrue(r.body.endswith(b"}\n"), "json.Encoder ends with a newline")
        return r.json

    def assertConnectError(self, r, status, code, needle=""):
        self.assertStatus(r, status)
        self.assertEqual(r.header("content-type"), "application/json")
        self.assertEqual(r.json["code"], code, r.describe())
        self.assertIn(needle, r.json.get("message", ""), r.describe())

    # ------------------------------------------------------------ render

    def test_render_golden(self):
        """The whole document. Timeline: CalcPointInterval(60 s) = 60000/1500
        ms < 15 s -> step 15; start B+1 snaps to B, end B+61 to B+60: 4
        samples. SelectSeries boundaries B+1+15k: the eu profile (B+3) lands
        on B+16 (index 1), both us ones (B+43, B+44) on B+46 (index 3, 5+1)."""
        doc = self.render_ok(query=QUERY, **self.window)
        want = {
            "version": 1,
            "flamebearer": {"names": NAMES, "levels": LEVELS, "numTicks": 12, "maxSelf": 5},
            "metadata": {"format": "single", "spyName": "", "sampleRate": 100,
                         "units": "objects", "name": "samples"},
            "timeline": {"startTime": self.B, "samples": [0, 6, 0, 6], "durationDelta": 15,
                         "watermarks": None},
            "groups": None,
            "heatmap": None,
        }
        self.assertEqual(doc, want)
        self.assertEqual(list(doc), list(want), "key order of Go's struct")

    def test_render_group_by(self):
        """groupBy=region: two series, so `timeline` is the empty series (4
        zeros) and groups hold eu [0,6,0,0] and us [0,0,0,6]; a label no
        series has gives one series without it: timeline and group "*"."""
        doc = self.render_ok([("groupBy", "region")], query=QUERY, **self.window)
        self.assertEqual(doc["timeline"]["samples"], [0, 0, 0, 0])
        self.assertEqual(list(doc["groups"]), ["eu", "us"])
        self.assertEqual(doc["groups"]["eu"], {"startTime": self.B, "samples": [0, 6, 0, 0],
                                               "durationDelta": 15, "watermarks": None})
        self.assertEqual(doc["groups"]["us"]["samples"], [0, 0, 0, 6])
        doc = self.render_ok([("groupBy", "zone")], query=QUERY, **self.window)
        self.assertEqual(doc["timeline"]["samples"], [0, 6, 0, 6])
        self.assertEqual(list(doc["groups"]), ["*"])
        self.assertEqual(doc["groups"]["*"]["samples"], [0, 6, 0, 6])

    def test_render_aggregation_avg(self):
        """aggregation=avg: the B+46 bucket holds two profiles (5, 1) -> 3."""
        doc = self.render_ok(query=QUERY, aggregation="avg", **self.window)
        self.assertEqual(doc["timeline"]["samples"], [0, 6, 0, 3])
        doc = self.render_ok(query=QUERY, aggregation="whatever", **self.window)
        self.assertEqual(doc["timeline"]["samples"], [0, 6, 0, 6], "anything else is SUM")

    def test_render_max_nodes(self):
        """max-nodes=2 (§5.5): the heap keeps main (12) and a (6) over e (5), so
        minVal 6: under main, d and e become other (6); under a, b and c do.
        maxNodes wins over max-nodes; 0 means the default."""
        want = {"names": ["total", "main", "other", "a"],
                "levels": [[0, 12, 0, 0], [0, 12, 0, 1], [0, 6, 0, 3, 0, 6, 6, 2], [0, 6, 6, 2]],
                "numTicks": 12, "maxSelf": 6}
        for params in ({"max-nodes": 2}, {"maxNodes": 2}, {"maxNodes": 0, "max-nodes": 2},
                       {"maxNodes": 2, "max-nodes": 100}):
            doc = self.render_ok(query=QUERY, **params, **self.window)
            self.assertEqual(doc["flamebearer"], want, params)
        doc = self.render_ok(query=QUERY, maxNodes=100, **{"max-nodes": 2}, **self.window)
        self.assertEqual(doc["flamebearer"]["levels"], LEVELS)

    def test_render_time_formats(self):
        """attime (§7.6): the same range as ms, as µs, relative to now, and
        with no `from` at all (= now: nothing)."""
        ms = {"from": str((self.B + 1) * 1000), "until": str((self.B + 61) * 1000)}
        us = {"from": str((self.B + 1) * 1000_000), "until": str((self.B + 61) * 1000_000)}
        for window in (ms, us):
            self.assertEqual(self.render_ok(query=QUERY, **window)["timeline"]["samples"],
                             [0, 6, 0, 6], window)
        self.assertEqual(self.render_ok(query=QUERY, **{"from": "now-1h", "until": "now"})
                         ["flamebearer"]["numTicks"], 12)
        self.assertEqual(self.render_ok(query=QUERY)["flamebearer"]["numTicks"], 0)

    def test_render_query_forms(self):
        """The profile type as __name__, and as a bare name (all services)."""
        doc = self.render_ok(query=f'{{__name__="{PTYPE}", service_name="{SERVICE}"}}',
                             **self.window)
        self.assertEqual(doc["flamebearer"]["levels"], LEVELS)
        doc = self.render_ok(query=PTYPE, **self.window)
        self.assertEqual(doc["flamebearer"]["numTicks"], 12)
        doc = self.render_ok(query=f'{PTYPE}{{service_name="{SERVICE}", region="eu"}}',
                             **self.window)
        self.assertEqual(doc["flamebearer"]["numTicks"], 6)

    def test_render_gzip(self):
        r = self.get("/pyroscope/render", {"query": QUERY, **self.window},
                     headers={"Accept-Encoding": "gzip"})
        self.assertStatus(r, 200)
        self.assertEqual(r.header("content-encoding"), "gzip")
        self.assertEqual(r.json["flamebearer"]["numTicks"], 12)   # harness gunzipped it

    def test_shape_matches_pyroscope_document(self):
        """testdata/flamebearer/profile.json (a real document) against ours:
        the same flamebearer keys; every metadata key we send exists there
        with the same JSON type (§7.1 drops appName/startTime/...); every
        timeline key there exists here with the same type."""
        ref = json.loads(h.read_testdata("flamebearer/profile.json"))
        doc = self.render_ok(query=QUERY, **self.window)
        jtype = lambda v: type(v).__name__
        self.assertEqual(list(doc["flamebearer"]), list(ref["flamebearer"]))
        for k, v in ref["flamebearer"].items():
            self.assertEqual(jtype(doc["flamebearer"][k]), jtype(v), k)
        self.assertTrue(all(isinstance(x, int) for lvl in doc["flamebearer"]["levels"] for x in lvl))
        for k, v in doc["metadata"].items():
            self.assertIn(k, ref["metadata"])
            self.assertEqual(jtype(v), jtype(ref["metadata"][k]), k)
        for k, v in ref["timeline"].items():
            self.assertEqual(jtype(doc["timeline"][k]), jtype(v), k)
        self.assertEqual(doc["version"], ref["version"])
        self.assertEqual(len(ref["flamebearer"]["levels"][0]) % 4, 0)

    def test_render_dot(self):
        """format=dot: a call graph of the merged pprof; cum main 12, a 6, e 5,
        b 4, c 2, d 1; the heaviest edge main -> a (6). No data: empty body."""
        r = self.render(query=QUERY, format="dot", **self.window)
        self.assertStatus(r, 200)
        self.assertTrue(r.header("content-type").startswith("text/plain"))
        text = r.body.decode()
        self.assertTrue(text.startswith('digraph "unnamed" {\n'), text[:80])
        self.assertIn('N1 [label="main\\n0 of 12 (100%)"', text)
        self.assertIn('N2 [label="a\\n0 of 6 (50.00%)"', text)
        self.assertIn('N3 [label="e\\n5 (41.67%)"', text)
        self.assertIn('N1 -> N2 [label=" 6"', text)
        edges = [l for l in text.splitlines() if re.match(r"N\d+ -> N\d+ ", l)]
        self.assertEqual(len(edges), 5)   # main->a, main->e, a->b, a->c, main->d
        self.assertTrue(text.endswith("}\n"))
        r = self.render(query=QUERY, format="dot", maxNodes=2, **self.window)
        self.assertIn("Showing top 2 nodes out of 6", r.body.decode())
        r = self.render(query=f'{PTYPE}{{service_name="nobody"}}', format="dot", **self.window)
        self.assertStatus(r, 200)
        self.assertEqual(r.body, b"")

    def test_render_errors(self):
        """§7.5: Connect error JSON with the code's status."""
        self.assertConnectError(self.render(), 400, "invalid_argument", "'query' is required")
        self.assertConnectError(self.render(query='{service_name="x"}'), 400, "invalid_argument",
                                "must contain a profile-type selection")
        self.assertConnectError(self.render(query="process_cpu{}"), 400, "invalid_argument",
                                "failed to parse 'query'")
        self.assertConnectError(self.render(query=PTYPE + "{a="), 400, "invalid_argument",
                                "failed to parse 'query'")
        self.assertConnectError(self.render(query=QUERY, **{"from": "now", "until": "now-1h"}),
                                400, "invalid_argument", "must not be after")
        self.assertConnectError(self.render(query=QUERY, **{"from": "now-2d", "until": "now"}),
                                400, "invalid_argument",
                                "max_query_length, actual: 48h0m0s, limit: 24h0m0s")
        r = self.srv.request("POST", "/pyroscope/render?" + urlencode({"query": QUERY}), b"")
        self.assertStatus(r, 405)

    # ------------------------------------------------------- render-diff

    def test_render_diff(self):
        """Left eu (main;a;b 3, main;a;c 2, main;d 1), right us (main;a;b 1,
        main;e 5). Per side, x follows that side's widths: left a [0,5) d [5,6)
        e [6,6); right a [0,1) d [1,1) e [1,6); every gap 0. Each node is
        [xL, totalL, selfL, xR, totalR, selfR, name]."""
        params = {"leftQuery": f'{PTYPE}{{service_name="{SERVICE}", region="eu"}}',
                  "rightQuery": f'{PTYPE}{{service_name="{SERVICE}", region="us"}}',
                  "leftFrom": self.window["from"], "leftUntil": self.window["until"],
                  "rightFrom": self.window["from"], "rightUntil": self.window["until"]}
        r = self.get("/pyroscope/render-diff", params)
        self.assertStatus(r, 200)
        want = {
            "version": 1,
            "flamebearer": {
                "names": NAMES,
                "levels": [[0, 6, 0, 0, 6, 0, 0],
                           [0, 6, 0, 0, 6, 0, 1],
                           [0, 5, 0, 0, 1, 0, 4, 0, 1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 5, 5, 2],
                           [0, 3, 3, 0, 1, 1, 6, 0, 2, 2, 0, 0, 0, 5]],
                "numTicks": 12, "maxSelf": 5},
            "metadata": {"format": "double", "spyName": "", "sampleRate": 100,
                         "units": "objects", "name": "samples"},
            "timeline": None, "groups": None, "heatmap": None,
            "leftTicks": 6, "rightTicks": 6,
        }
        self.assertEqual(r.json, want)
        self.assertEqual(list(r.json), list(want))
        # An empty side: its ticks key is omitted (omitempty).
        r = self.get("/pyroscope/render-diff", dict(
            params, rightQuery=f'{PTYPE}{{service_name="nobody"}}'))
        self.assertStatus(r, 200)
        self.assertNotIn("rightTicks", r.json)
        self.assertEqual(r.json["leftTicks"], 6)

    def test_render_diff_errors(self):
        params = {"leftQuery": QUERY, "rightQuery": "memory:alloc_space:bytes:space:bytes{}",
                  "leftFrom": "now-1h", "leftUntil": "now", "rightFrom": "now-1h",
                  "rightUntil": "now"}
        self.assertConnectError(self.get("/pyroscope/render-diff", params), 400,
                                "invalid_argument", "profile types must match")
        del params["leftQuery"]
        self.assertConnectError(self.get("/pyroscope/render-diff", params), 400,
                                "invalid_argument", "'leftQuery' is required")

    # ------------------------------------------------------ label-values

    def test_label_values(self):
        """label=__name__ lists the profile types (ProfileTypes of the last
        24 h); any other label is rejected by LabelValues, as in Pyroscope."""
        r = self.get("/pyroscope/label-values", {"label": "__name__"})
        self.assertStatus(r, 200)
        self.assertEqual(r.header("content-type"), "application/json")
        self.assertEqual(r.json, [PTYPE])
        self.assertConnectError(self.get("/pyroscope/label-values", {"label": "service_name"}),
                                400, "invalid_argument", "name is required")
        self.assertConnectError(self.get("/pyroscope/label-values", {}), 400, "invalid_argument",
                                "label parameter is required")


if __name__ == "__main__":
    unittest.main()
