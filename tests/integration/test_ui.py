"""The web UI (services/ui) in Debian's headless Chromium, driven by
playwright-core (ui/ui_driver.mjs; npm packages from ui/package-lock.json,
installed once under .work/ui). Folded profiles with known function names and
values are pushed to /ingest; the page must show the same numbers as the API
(the DOM table against SelectMergeStacktraces / Diff), draw the flame graph,
zoom and search, log no console errors, and answer bad input in the URL with a
message. Screenshots go to <build>/ui-screenshots/ for a person to look at.

The data (service ui-shop, sampleRate 100 so one sample is 10 ms of CPU):
    B     region=eu  main;net/http.serve;shop/api.handle;shop/db.Query 300
                     main;net/http.serve;shop/api.handle;encoding/json.Marshal 120
                     main;runtime.gcBgMarkWorker 50
    B+60  region=us  main;net/http.serve;shop/api.handle;shop/db.Query 100
                     main;runtime.mallocgc 70
"""
import base64
import filecmp
import json
import os
import re
import shutil
import subprocess
import time
import unittest
from urllib.parse import quote

import harness as h
import distributed_harness as dh

UI_SRC = os.path.join(h.HERE, "ui")
UI_WORK = os.path.join(h.WORK_DIR, "ui")
SHOTS = os.path.join(h.BIN_DIR, "ui-screenshots")
CHROMIUM = "/usr/bin/chromium"

PTYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
SERVICE = "ui-shop"
NS = 10_000_000     # one sample at sampleRate 100
EU = (b"main;net/http.serve;shop/api.handle;shop/db.Query 300\n"
      b"main;net/http.serve;shop/api.handle;encoding/json.Marshal 120\n"
      b"main;runtime.gcBgMarkWorker 50\n")
US = (b"main;net/http.serve;shop/api.handle;shop/db.Query 100\n"
      b"main;runtime.mallocgc 70\n")
SELF = {"shop/db.Query": 400, "encoding/json.Marshal": 120, "runtime.gcBgMarkWorker": 50,
        "runtime.mallocgc": 70, "main": 0, "net/http.serve": 0, "shop/api.handle": 0}
TOTAL = {"shop/db.Query": 400, "encoding/json.Marshal": 120, "runtime.gcBgMarkWorker": 50,
         "runtime.mallocgc": 70, "main": 640, "net/http.serve": 520, "shop/api.handle": 520}


def node_modules():
    """npm ci from the committed lockfile into .work/ui (once: kept while the
    lockfile is unchanged). SkipTest without chromium or the npm registry."""
    if not os.path.exists(CHROMIUM):
        raise unittest.SkipTest(f"{CHROMIUM} missing (scripts/install-deps.sh installs Debian's chromium)")
    os.makedirs(UI_WORK, exist_ok=True)
    lock = os.path.join(UI_SRC, "package-lock.json")
    have = os.path.join(UI_WORK, "package-lock.json")
    if os.path.isdir(os.path.join(UI_WORK, "node_modules", "playwright-core")) and \
            os.path.exists(have) and filecmp.cmp(lock, have, shallow=False):
        return
    for f in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(UI_SRC, f), UI_WORK)
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=UI_WORK,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise unittest.SkipTest(f"npm ci of playwright-core failed (no registry?): {r.stderr.strip()[-400:]}")


def drive(base, steps, color_scheme="light"):
    """Runs ui_driver.mjs; returns its JSON (results, console, pageErrors, failed)."""
    os.makedirs(SHOTS, exist_ok=True)
    cfg = os.path.join(h.temp_dir("ember-ui-"), "cfg.json")
    with open(cfg, "w") as f:
        json.dump({"base": base, "shots": SHOTS, "colorScheme": color_scheme, "steps": steps}, f)
    driver = os.path.join(UI_WORK, "ui_driver.mjs")
    shutil.copy(os.path.join(UI_SRC, "ui_driver.mjs"), driver)   # resolves playwright-core there
    r = subprocess.run(["node", driver, cfg], capture_output=True, text=True, timeout=180,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError(f"ui_driver failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout)


def api_table(fg, diff=False):
    """{name: {self, total}} from a FlameGraph (or FlameGraphDiff: {lt, rt})
    the way a top table counts: self summed, total over outermost frames."""
    step = 7 if diff else 4
    names = list(fg.names)
    levels = []
    for lvl in fg.levels:
        v = list(lvl.values)
        nodes, prev_l, prev_r = [], 0, 0
        for k in range(0, len(v), step):
            if diff:
                lx, rx = prev_l + v[k], prev_r + v[k + 3]
                prev_l, prev_r = lx + v[k + 1], rx + v[k + 4]
                nodes.append({"x": lx + rx, "w": v[k + 1] + v[k + 4], "lt": v[k + 1], "rt": v[k + 4],
                              "self": v[k + 2] + v[k + 5], "name": names[v[k + 6]]})
            else:
                x = prev_l + v[k]
                prev_l = x + v[k + 1]
                nodes.append({"x": x, "w": v[k + 1], "total": v[k + 1], "self": v[k + 2],
                              "name": names[v[k + 3]]})
        levels.append(nodes)
    out = {}

    def walk(li, node, stack):
        r = out.setdefault(node["name"], {"self": 0, "total": 0, "lt": 0, "rt": 0})
        r["self"] += node["self"]
        if node["name"] not in stack:
            for k in ("total", "lt", "rt"):
                r[k] += node.get(k, 0)
        if li + 1 < len(levels):
            for c in levels[li + 1]:
                if node["x"] <= c["x"] < node["x"] + node["w"]:
                    walk(li + 1, c, stack + [node["name"]])
    for root in (levels[0] if levels else []):
        if root["name"] == "total" and len(levels) > 1:
            for c in levels[1]:
                walk(1, c, [])
        else:
            walk(0, root, [])
    return out


def ingest_data(srv, b, headers=None):
    for region, at, body in (("eu", b, EU), ("us", b + 60, US)):
        r = srv.ingest(f"{SERVICE}.cpu{{region={region}}}", body,
                       {"from": at, "until": at + 10, "sampleRate": 100}, headers=headers)
        assert r.status == 200, r.describe()


CLIENT_NAMED = "ui_client_named"


def symbolized_profile(prog, now_ns):
    """A pprof of the stripped program (test_symbols.Program): main -> burn_a and
    main -> burn_b sampled as addresses in its mapping with no function (the server
    names them), and main -> ui_client_named whose function the client sent. Returns
    the bytes and the names binutils gives the addresses (those the server must mark)."""
    pb = h.pb().profile
    p = pb.Profile()
    strings = ["", "cpu", "nanoseconds", "/opt/burner/burner", prog.build_id, CLIENT_NAMED]
    p.sample_type.add(type=1, unit=2)
    p.period_type.type, p.period_type.unit, p.period = 1, 2, NS
    p.time_nanos, p.duration_nanos = now_ns, 10_000_000_000
    base = 0x555555554000
    p.mapping.add(id=1, memory_start=base, memory_limit=base + 0x100000, filename=3, build_id=4)
    named = set()
    for lid, fn in ((1, "main"), (2, "burn_a"), (3, "burn_b")):
        va = prog.symbols[fn][0] + 4
        p.location.add(id=lid, mapping_id=1, address=base + prog.file_offset(va))
        named.update(prog.addr2line(va))
    p.function.add(id=1, name=5, system_name=5)
    p.location.add(id=4, line=[pb.Line(function_id=1, line=7)])
    for ids, n in (([2, 1], 20), ([3, 1], 10), ([4, 1], 10)):
        p.sample.add(location_id=ids, value=[n * NS])
    p.string_table.extend(strings)
    return p.SerializeToString(), named


def close_colour(a, b, tolerance=3):
    """Whether two RGB triples are the same colour up to canvas rounding."""
    return all(abs(x - y) <= tolerance for x, y in zip(a, b))


def q(sel):
    return quote(f"{PTYPE}{sel}", safe="")


class UiMixin:
    def merged(self, srv, sel, headers=None):
        req_cls, _ = h.rpc_classes(f"{h.QUERIER}/SelectMergeStacktraces")
        r = srv.call(f"{h.QUERIER}/SelectMergeStacktraces",
                     req_cls(profile_typeID=PTYPE, label_selector=sel, start=self.start_ms, end=self.end_ms),
                     headers=headers)
        return r.msg.flamegraph

    def assertNoConsoleErrors(self, out, allow=()):
        self.assertIsNone(out["failed"], out["failed"])
        self.assertEqual([], out["pageErrors"])
        bad = [c for c in out["console"] if not any(a in c["text"] for a in allow)]
        self.assertEqual([], bad, "console errors")

    def assertTableMatches(self, rows, api):
        self.assertTrue(rows, "the table is empty")
        dom = {r["name"]: r["values"] for r in rows}
        self.assertEqual(set(api), set(dom), "the table's functions are the API's")
        for name, v in api.items():
            self.assertEqual(v["self"], dom[name]["self"], f"self of {name}")
            self.assertEqual(v["total"], dom[name]["total"], f"total of {name}")

    def single_url(self, sel='{service_name="ui-shop"}', extra=""):
        return f"/?query={q(sel)}&from={self.B - 60}&until={self.B + 300}{extra}"


class UiModulesTest(unittest.TestCase):
    """The UI's pure modules (time parsing, selectors, flame graph decode, top
    table, sandwich, diff) under node's test runner: ui/web_unit.test.mjs."""

    def test_web_modules(self):
        env = dict(os.environ, EMBER_UI_WEB=os.path.join(h.SRC_DIR, "services", "ui", "web"))
        r = subprocess.run(["node", "--test", os.path.join(UI_SRC, "web_unit.test.mjs")], env=env,
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(0, r.returncode, r.stdout[-3000:] + r.stderr[-2000:])
        self.assertIn("# fail 0", r.stdout)


class UiSingleTest(UiMixin, h.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        node_modules()
        super().setUpClass()
        cls.B = int(time.time()) - 1200
        cls.start_ms, cls.end_ms = (cls.B - 60) * 1000, (cls.B + 300) * 1000
        ingest_data(cls.srv, cls.B)
        h.wait_for(lambda: cls.srv.flamegraph(PTYPE, '{service_name="ui-shop"}', cls.start_ms,
                                              cls.end_ms).total == 640 * NS,
                   timeout=20, what="the uploads to be queryable")

    def test_served_compressed_cached_with_csp(self):
        r = self.srv.request("GET", "/", headers={"Accept-Encoding": "gzip, deflate"})
        self.assertStatus(r, 200)
        self.assertEqual("gzip", r.header("content-encoding"))
        self.assertEqual("no-cache", r.header("cache-control"))
        self.assertIn("default-src 'none'", r.header("content-security-policy"))
        self.assertIn("script-src 'self'", r.header("content-security-policy"))
        html = r.body.decode()
        import re
        assets = re.findall(r'/assets/([a-z]+\.[0-9a-f]{12}\.(?:js|css))', html)
        self.assertEqual(2, len(assets), html)
        for a in assets:
            g = self.srv.request("GET", f"/assets/{a}", headers={"Accept-Encoding": "gzip"})
            self.assertStatus(g, 200)
            self.assertEqual("public, max-age=31536000, immutable", g.header("cache-control"))
            self.assertEqual("gzip", g.header("content-encoding"))
            plain = self.srv.request("GET", f"/assets/{a}", headers={"Accept-Encoding": "identity"})
            self.assertIsNone(plain.header("content-encoding"))
            self.assertEqual(g.body, plain.body)      # harness gunzips the first
        self.assertStatus(self.srv.request("GET", "/assets/nope.js"), 404)
        self.assertStatus(self.srv.request("GET", "/comparison-diff"), 200)

    def test_single_view_table_flame_zoom_search(self):
        api = api_table(self.merged(self.srv, '{service_name="ui-shop"}'))
        name_form = quote('{__name__="%s",service_name="ui-shop"}' % PTYPE, safe="")
        self.assertEqual({k: {"self": v * NS, "total": TOTAL[k] * NS} for k, v in SELF.items()},
                         {k: {"self": v["self"], "total": v["total"]} for k, v in api.items()})
        out = drive(self.srv_url(), [
            {"do": "goto", "url": self.single_url()},
            {"do": "state", "key": "state"},
            {"do": "table", "id": "top-table", "key": "table"},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas"},
            {"do": "canvas", "sel": "#chart canvas", "key": "chart"},
            {"do": "shot", "file": "single.png"},
            {"do": "search", "term": "shop/", "key": "search"},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas_search"},
            {"do": "shot", "file": "single-search.png"},
            {"do": "search", "term": "", "key": "search_cleared"},
            {"do": "click-frame", "name": "shop/api.handle", "key": "zoom"},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas_zoom"},
            {"do": "shot", "file": "single-zoom.png"},
            {"do": "keys", "sel": "#flame canvas", "keys": ["Escape"], "key": "unzoom"},
            {"do": "keys", "sel": "#flame canvas", "keys": ["ArrowDown", "ArrowDown", "ArrowDown", "ArrowDown", "Enter"], "key": "kbd"},
            {"do": "click", "sel": '#top-table th button[data-key="total"]'},
            {"do": "table", "id": "top-table", "key": "by_total"},
            {"do": "fill", "sel": ".table-filter", "value": "json"},
            {"do": "table", "id": "top-table", "key": "filtered"},
            {"do": "goto", "url": self.single_url(extra="&view=sandwich&fn=" + quote("shop/db.Query", safe=""))},
            {"do": "canvas", "sel": "#sandwich-callers canvas", "key": "callers"},
            {"do": "canvas", "sel": "#sandwich-callees canvas", "key": "callees"},
            {"do": "shot", "file": "single-sandwich.png"},
            {"do": "goto", "url": self.single_url(extra="&groupBy=region")},
            {"do": "text", "sel": ".chart-legend", "key": "legend"},
            {"do": "shot", "file": "single-groupby.png"},
            {"do": "download", "sel": "#download-pprof", "key": "pprof"},
            {"do": "download", "sel": "#download-svg", "key": "svg"},
            {"do": "drag", "sel": "#chart canvas", "from": 0.3, "to": 0.7, "key": "dragged"},
            {"do": "goto", "url": self.single_url()},
            {"do": "fill", "sel": "#selector", "value": "{"},
            {"do": "type", "sel": "#selector", "value": "reg", "key": "complete_name"},
            {"do": "fill", "sel": "#selector", "value": '{region="'},
            {"do": "type", "sel": "#selector", "value": "u", "key": "complete_value"},
            {"do": "keys", "sel": "#selector", "keys": ["Enter"], "key": "accepted"},
            {"do": "goto", "url": f"/?query={name_form}&from={self.B - 60}&until={self.B + 300}"},
            {"do": "state", "key": "name_form"},
            {"do": "table", "id": "top-table", "key": "name_form_table"},
            {"do": "perf", "key": "perf"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertEqual("ready", R["state"]["state"], R["state"])
        self.assertTableMatches(R["table"], api)
        db = next(r for r in R["table"] if r["name"] == "shop/db.Query")
        self.assertEqual("4.00 s", db["cells"]["self"])
        self.assertEqual("62.5%", db["cells"]["selfPct"])
        self.assertGreater(R["canvas"]["nonBlank"], 1000, "the flame graph is drawn")
        self.assertGreater(R["chart"]["nonBlank"], 100, "the time series is drawn")
        # shop/api.handle and shop/db.Query inside it: the outer one counted only
        self.assertEqual(520 * NS, R["search"]["total"], R["search"])
        self.assertEqual(2, R["search"]["count"], R["search"])
        self.assertIn("total 5.20 s (81.3%)", R["search"]["text"])
        self.assertNotEqual(R["canvas"]["hash"], R["canvas_search"]["hash"], "search redraws")
        self.assertEqual("shop/api.handle", R["zoom"]["zoom"])
        self.assertIn("shop/api.handle", R["zoom"]["tooltip"])
        self.assertIn("Total: 5.20 s (81.3%)", R["zoom"]["tooltip"])
        self.assertNotEqual(R["canvas"]["hash"], R["canvas_zoom"]["hash"], "zoom redraws")
        self.assertEqual("", R["unzoom"]["zoom"])
        self.assertEqual("shop/api.handle", R["kbd"]["zoom"], "first key selects total, then main, net/http.serve, api.handle")
        self.assertIn("shop/api.handle: total 5.20 s (81.3%)", R["kbd"]["live"], "read to screen readers")
        totals = [r["values"]["total"] for r in R["by_total"]]
        self.assertEqual(sorted(totals, reverse=True), totals)
        self.assertEqual(["encoding/json.Marshal"], [r["name"] for r in R["filtered"]])
        self.assertGreater(R["callers"]["nonBlank"], 500)
        self.assertGreater(R["callees"]["nonBlank"], 100)
        self.assertIn("region", R["complete_name"]["options"])
        self.assertEqual(["us"], R["complete_value"]["options"])
        self.assertEqual('{region="us"', R["accepted"]["value"])
        self.assertEqual("ready", R["name_form"]["state"], R["name_form"])
        self.assertTableMatches(R["name_form_table"], api)
        self.assertIn("region=eu", R["legend"]["text"])
        self.assertIn("region=us", R["legend"]["text"])
        # the merged pprof as SelectMergeProfile answers it, and the SVG
        self.assertEqual("profile.pb", R["pprof"]["name"])
        prof = h.pb().profile.Profile.FromString(h.gunzip_if(base64.b64decode(R["pprof"]["base64"])))
        self.assertEqual(640 * NS, sum(s.value[0] for s in prof.sample))
        svg = base64.b64decode(R["svg"]["base64"]).decode()
        self.assertTrue(svg.startswith("<svg"), svg[:100])
        self.assertIn("shop/api.handle", svg)
        # dragging across the middle of the chart narrows the range to it
        f, u = int(R["dragged"]["from"]), int(R["dragged"]["until"])
        self.assertLess((self.B - 60) * 1000, f)
        self.assertLess(f, u)
        self.assertLess(u, (self.B + 300) * 1000)

    def test_unresolved_frames_marked(self):
        """A frame the server shows as module+0xoffset (issue 31) is drawn in its own
        colour and its tooltip says it is unresolved; a named frame's does not."""
        r = self.srv.ingest("ui-native.cpu", b"main;libmystery.so+0x1234 300\nmain;work 100\n",
                            {"from": self.B, "until": self.B + 10, "sampleRate": 100})
        self.assertEqual(r.status, 200, r.describe())
        h.wait_for(lambda: self.merged(self.srv, '{service_name="ui-native"}').total == 400 * NS,
                   timeout=20, what="the upload to be queryable")
        out = drive(self.srv_url(), [
            {"do": "goto", "url": self.single_url('{service_name="ui-native"}')},
            {"do": "state", "key": "state"},
            {"do": "click-frame", "name": "libmystery.so+0x1234", "key": "unresolved"},
            {"do": "goto", "url": self.single_url('{service_name="ui-native"}')},
            {"do": "click-frame", "name": "work", "key": "named"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertIn("Unresolved", R["unresolved"]["tooltip"])
        self.assertIn("libmystery.so+0x1234", R["unresolved"]["tooltip"])
        self.assertIn("work", R["named"]["tooltip"])
        self.assertNotIn("Unresolved", R["named"]["tooltip"])

    def test_frames_symbolized_on_the_server_marked(self):
        """A stripped program's frames sent as addresses and named through an uploaded
        debug file (issue 31) come with FlameGraph.symbolized, are drawn in the legend's
        "symbolized on the server" colour and say so in their tooltip; a frame whose name
        the client sent does not. The oracle of the names: binutils (test_symbols)."""
        import test_symbols as ts
        prog = ts.Program()
        raw, server_named = symbolized_profile(prog, self.B * 10**9)
        r = self.srv.push([({"__name__": "process_cpu", "service_name": "ui-stripped"}, [raw])])
        self.assertEqual(r.status, 200, r.describe())
        with open(prog.debug, "rb") as f:
            r = self.srv.request("POST", f"{ts.PYRO}/Upload/{prog.build_id}", f.read(),
                                 {"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 200, r.describe())
        sel = '{service_name="ui-stripped"}'
        h.wait_for(lambda: self.merged(self.srv, sel).total == 40 * NS, timeout=20,
                   what="the upload to be queryable")
        fg = self.merged(self.srv, sel)
        self.assertEqual({fg.names[i] for i in fg.symbolized}, server_named)
        out = drive(self.srv_url(), [
            {"do": "goto", "url": self.single_url(sel)},
            {"do": "frame-colour", "name": "burn_a", "key": "server_colour"},
            {"do": "frame-colour", "name": CLIENT_NAMED, "key": "client_colour"},
            {"do": "click-frame", "name": "burn_a", "key": "server"},
            {"do": "goto", "url": self.single_url(sel)},
            {"do": "click-frame", "name": CLIENT_NAMED, "key": "client"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertIn("Symbolized on the server", R["server"]["tooltip"])
        self.assertNotIn("Symbolized on the server", R["client"]["tooltip"])
        self.assertNotIn("Unresolved", R["client"]["tooltip"])
        swatch = [int(v) for v in re.findall(r"\d+", R["server_colour"]["swatch"])[:3]]
        self.assertTrue(R["server_colour"]["legendShown"])
        self.assertTrue(close_colour(R["server_colour"]["pixel"], swatch),
                        (R["server_colour"], swatch))
        self.assertFalse(close_colour(R["client_colour"]["pixel"], swatch),
                         (R["client_colour"], swatch))

    def test_exemplar_list_opens_one_profile(self):
        """Under the chart, the profiles of the range by value (eu: 470
        samples, us: 170); a click shows that profile alone (the flame graph's
        total is its samples), and 'show all profiles' goes back. With
        chart=heatmap, the two profiles are two cells of the heatmap."""
        out = drive(self.srv_url(), [
            {"do": "goto", "url": self.single_url()},
            {"do": "text", "sel": "#exemplar-table", "key": "list"},
            {"do": "click", "sel": "#exemplar-table button.exemplar"},
            {"do": "settle"},
            {"do": "text", "sel": "#flame", "key": "one"},
            {"do": "text", "sel": "#profile-note", "key": "note"},
            {"do": "state", "key": "state"},
            {"do": "shot", "file": "single-exemplar.png"},
            {"do": "click", "sel": "#all-profiles"},
            {"do": "settle"},
            {"do": "text", "sel": "#flame", "key": "all"},
            {"do": "goto", "url": self.single_url(extra="&chart=heatmap")},
            {"do": "text", "sel": "#heatmap", "key": "heat"},
            {"do": "canvas", "sel": "#heatmap canvas", "key": "heat_canvas"},
            {"do": "shot", "file": "single-heatmap.png"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        text = R["list"]["text"]
        self.assertIn("region=eu", text)
        self.assertIn("region=us", text)
        self.assertLess(text.index("4.70 s"), text.index("1.70 s"), "highest value first")
        self.assertEqual(str(470 * NS), R["one"]["data"]["total"], R["one"])
        self.assertIn("profile=", R["state"]["url"])
        self.assertIn("Flame graph of profile", R["note"]["text"])
        self.assertEqual(str(640 * NS), R["all"]["data"]["total"], R["all"])
        # the heatmap: the two profiles, a minute apart, in two cells
        self.assertEqual({"cells": "2", "count": "2"},
                         {k: R["heat"]["data"].get(k) for k in ("cells", "count")}, R["heat"])
        self.assertGreater(R["heat_canvas"]["nonBlank"], 100, "the heatmap is drawn")

    def test_label_explorer(self):
        """/explore-labels: the labels of the service, and for region each
        value's share of what was sent (eu 470 samples, us 170: 73.4% and
        26.6%) with a drawn series; a value links to the single view of it."""
        sel = '{service_name="ui-shop"}'
        url = f"/explore-labels?query={q(sel)}&from={self.B - 60}&until={self.B + 300}&label=region"
        out = drive(self.srv_url(), [
            {"do": "goto", "url": url},
            {"do": "text", "sel": "#label-names", "key": "names"},
            {"do": "state", "key": "state"},
            {"do": "shot", "file": "label-explorer.png"},
            {"do": "click", "sel": '#label-values tr[data-value="us"] a'},
            {"do": "settle"},
            {"do": "state", "key": "single"},
            {"do": "text", "sel": "#flame", "key": "flame"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertEqual("ready", R["state"]["state"], R["state"])
        self.assertIn("region", R["names"]["text"])
        self.assertIn("service_name", R["names"]["text"])
        shares = drive(self.srv_url(), [{"do": "goto", "url": url}] + [
            {"do": "text", "sel": f'#label-values tr[data-value="{v}"]', "key": v} for v in ("eu", "us")])
        S = shares["results"]
        self.assertAlmostEqual(470 / 640, float(S["eu"]["data"]["share"]), places=5)
        self.assertAlmostEqual(170 / 640, float(S["us"]["data"]["share"]), places=5)
        self.assertIn("73.4%", S["eu"]["text"])
        self.assertEqual("1", S["us"]["data"]["points"], "one profile, one bar")
        self.assertTrue(R["single"]["url"].startswith("/?"), R["single"])
        self.assertIn("us", R["single"]["url"])
        self.assertEqual(str(170 * NS), R["flame"]["data"]["total"], R["flame"])

    def test_recording_rules_page(self):
        """/recording-rules: a rule typed into the form is created (read back
        through the API, not the page), listed, and deleted by its button; a
        metric name Pyroscope refuses shows the server's message and creates
        nothing."""
        cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        matcher = f'{{__profile_type__="{cpu}", service_name="ui-shop"}}'

        def api_rules():
            r = self.srv.request("POST", "/settings.v1.RecordingRulesService/ListRecordingRules", b"{}",
                                 {"Content-Type": "application/json"})
            self.assertEqual(200, r.status, r.body)
            return json.loads(r.body or b"{}").get("rules", [])

        out = drive(self.srv_url(), [
            {"do": "goto", "url": "/recording-rules"},
            {"do": "text", "sel": "#rules-table", "key": "empty"},
            {"do": "fill", "sel": "#rule-metric", "value": "profiles_recorded_ui_cpu_nanoseconds"},
            {"do": "fill", "sel": "#rule-matchers", "value": matcher},
            {"do": "fill", "sel": "#rule-group-by", "value": "region, pod"},
            {"do": "fill", "sel": "#rule-external", "value": "team=ui"},
            {"do": "fill", "sel": "#rule-function", "value": "main.work"},
            {"do": "click", "sel": "#rule-form button[type=submit]"},
            {"do": "settle"},
            {"do": "text", "sel": "#rules-table", "key": "one"},
            {"do": "shot", "file": "recording-rules.png"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertIn("No recording rules yet", R["empty"]["text"])
        rules = api_rules()
        self.assertEqual(1, len(rules), rules)
        got = rules[0]
        self.assertEqual("profiles_recorded_ui_cpu_nanoseconds", got["metricName"])
        self.assertEqual([matcher], got["matchers"])
        self.assertEqual(["region", "pod"], got["groupBy"])
        self.assertEqual([{"name": "team", "value": "ui"}], got["externalLabels"])
        self.assertEqual("main.work", got["stacktraceFilter"]["functionName"]["functionName"])
        self.assertIn(got["id"], R["one"]["text"])
        self.assertIn("profiles_recorded_ui_cpu_nanoseconds", R["one"]["text"])

        out = drive(self.srv_url(), [
            {"do": "goto", "url": "/recording-rules"},
            {"do": "click", "sel": f'#rules-table tr[data-id="{got["id"]}"] button.rule-delete'},
            {"do": "settle"},
            {"do": "text", "sel": "#rules-table", "key": "after"},
            {"do": "fill", "sel": "#rule-metric", "value": "cpu_total_without_prefix"},
            {"do": "fill", "sel": "#rule-matchers", "value": matcher},
            {"do": "click", "sel": "#rule-form button[type=submit]"},
            {"do": "settle"},
            {"do": "state", "key": "refused"},
        ])
        self.assertNoConsoleErrors(out, allow=("status of 400",))
        R = out["results"]
        self.assertEqual([], api_rules())
        self.assertIn("No recording rules yet", R["after"]["text"])
        self.assertEqual("error", R["refused"]["state"], R["refused"])
        self.assertIn("profiles_recorded_", R["refused"]["msg"])

    def test_dark_theme(self):
        out = drive(self.srv_url(), [
            {"do": "goto", "url": self.single_url(extra="&search=shop")},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas"},
            {"do": "shot", "file": "single-dark.png"},
        ], color_scheme="dark")
        self.assertNoConsoleErrors(out)
        self.assertGreater(out["results"]["canvas"]["nonBlank"], 1000)

    def test_diff_view_at_pyroscope_url(self):
        eu, us = '{service_name="ui-shop",region="eu"}', '{service_name="ui-shop",region="us"}'
        req_cls, _ = h.rpc_classes(f"{h.QUERIER}/SelectMergeStacktraces")
        side = lambda sel: req_cls(profile_typeID=PTYPE, label_selector=sel, start=self.start_ms,  # noqa: E731
                                   end=self.end_ms)
        fg = self.srv.q("Diff", left=side(eu), right=side(us)).flamegraph
        api = api_table(fg, diff=True)
        url = (f"/comparison-diff?leftQuery={q(eu)}&rightQuery={q(us)}"
               f"&leftFrom={self.B - 60}&leftUntil={self.B + 300}&rightFrom={self.B - 60}&rightUntil={self.B + 300}")
        out = drive(self.srv_url(), [
            {"do": "goto", "url": url},
            {"do": "state", "key": "state"},
            {"do": "text", "sel": "#diff-totals", "key": "totals"},
            {"do": "table", "id": "diff-table", "key": "table"},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas"},
            {"do": "shot", "file": "diff.png"},
            {"do": "search", "term": "mallocgc", "key": "search"},
            {"do": "click-frame", "name": "net/http.serve", "key": "zoom"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertEqual("ready", R["state"]["state"], R["state"])
        self.assertEqual(str(fg.leftTicks), R["totals"]["data"]["left"])
        self.assertEqual(str(fg.rightTicks), R["totals"]["data"]["right"])
        self.assertEqual(470 * NS, fg.leftTicks)
        self.assertEqual(170 * NS, fg.rightTicks)
        dom = {r["name"]: r["values"] for r in R["table"]}
        self.assertEqual(set(api), set(dom))
        for name, v in api.items():
            self.assertEqual(v["lt"], dom[name]["lt"], name)
            self.assertEqual(v["rt"], dom[name]["rt"], name)
        # the largest change first: mallocgc is 0% left, 70/170 right
        self.assertEqual("runtime.mallocgc", R["table"][0]["name"], [r["name"] for r in R["table"]])
        self.assertGreater(R["canvas"]["nonBlank"], 1000)
        self.assertEqual(1, R["search"]["count"])
        self.assertEqual("net/http.serve", R["zoom"]["zoom"])

    def test_bad_input_shows_a_message(self):
        cases = [
            ("broken_selector", self.single_url(sel='{service_name="ui-shop"'), "refused"),
            ("unknown_type", f"/?query={quote('nope:cpu:nanoseconds:cpu:nanoseconds{}')}&from=now-1h&until=now",
             "Unknown profile type"),
            ("empty_range", f"/?query={q('{}')}&from=now&until=now-1h", "time range is empty"),
            ("bad_time", f"/?query={q('{}')}&from=yesterday-ish&until=now", "Cannot read"),
            ("diff_types", f"/comparison-diff?leftQuery={q('{}')}&rightQuery=other:a:b:c:d%7B%7D", "same profile type"),
        ]
        steps = []
        for key, url, _ in cases:
            steps += [{"do": "goto", "url": url}, {"do": "state", "key": key}, {"do": "shot", "file": f"bad-{key}.png"}]
        out = drive(self.srv_url(), steps)
        self.assertNoConsoleErrors(out, allow=("status of 400",))
        for key, _, needle in cases:
            st = out["results"][key]
            self.assertEqual("error", st["state"], st)
            self.assertIn(needle, st["msg"], st)
            self.assertGreater(st["mainChildren"], 0, "the page is not blank")

    def srv_url(self):
        return f"http://127.0.0.1:{self.srv.port}"


class UiMultitenancyTest(UiMixin, h.ServerTestCase):
    server_args = ("--auth.multitenancy-enabled",)

    @classmethod
    def setUpClass(cls):
        node_modules()
        super().setUpClass()
        cls.B = int(time.time()) - 1200
        cls.start_ms, cls.end_ms = (cls.B - 60) * 1000, (cls.B + 300) * 1000
        cls.org = {"X-Scope-OrgID": "acme"}
        ingest_data(cls.srv, cls.B, headers=cls.org)
        h.wait_for(lambda: cls.merged_total() == 640 * NS, timeout=20, what="the uploads to be queryable")

    @classmethod
    def merged_total(cls):
        return UiMixin.merged(cls, cls.srv, '{service_name="ui-shop"}', headers=cls.org).total

    def test_tenant_chosen_in_the_ui(self):
        api = api_table(self.merged(self.srv, '{service_name="ui-shop"}', headers=self.org))
        base = f"http://127.0.0.1:{self.srv.port}"
        out = drive(base, [
            {"do": "goto", "url": self.single_url()},
            {"do": "state", "key": "no_tenant"},
            {"do": "shot", "file": "tenant-missing.png"},
            {"do": "fill", "sel": "#tenant", "value": "acme", "press": "Enter"},
            {"do": "settle"},
            {"do": "state", "key": "state"},
            {"do": "table", "id": "top-table", "key": "table"},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas"},
            {"do": "shot", "file": "tenant-acme.png"},
        ])
        self.assertNoConsoleErrors(out, allow=("status of 401",))
        R = out["results"]
        self.assertEqual("error", R["no_tenant"]["state"])
        self.assertIn("tenant", R["no_tenant"]["msg"])
        self.assertEqual("ready", R["state"]["state"], R["state"])
        self.assertIn("tenant=acme", R["state"]["url"])
        self.assertTableMatches(R["table"], api)
        self.assertGreater(R["canvas"]["nonBlank"], 1000)


class UiQuerierTest(UiMixin, dh.ClusterTestCase):
    """ember-querier over two ingesters serves the same UI and numbers."""

    @classmethod
    def set_up(cls):
        node_modules()
        cls.redis = dh.Redis(aof=False)
        cls.redis.start()
        cls.ingesters = [dh.ingester(cls.redis.url) for _ in range(2)]
        cls.querier = dh.querier(cls.redis.url)
        for p in [*cls.ingesters, cls.querier]:
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.querier, 2)
        cls.B = int(time.time()) - 1200
        cls.start_ms, cls.end_ms = (cls.B - 60) * 1000, (cls.B + 300) * 1000
        ingest_data(cls.ingesters[0], cls.B)
        cls.redis.wait_drained()
        h.wait_for(lambda: UiMixin.merged(cls, cls.querier, '{service_name="ui-shop"}').total == 640 * NS,
                   timeout=20, what="the uploads to be queryable through the querier")

    def test_single_view_through_the_querier(self):
        api = api_table(self.merged(self.querier, '{service_name="ui-shop"}'))
        out = drive(self.querier.url, [
            {"do": "goto", "url": self.single_url()},
            {"do": "state", "key": "state"},
            {"do": "table", "id": "top-table", "key": "table"},
            {"do": "canvas", "sel": "#flame canvas", "key": "canvas"},
            {"do": "shot", "file": "querier-single.png"},
        ])
        self.assertNoConsoleErrors(out)
        R = out["results"]
        self.assertEqual("ready", R["state"]["state"], R["state"])
        self.assertTableMatches(R["table"], api)
        self.assertGreater(R["canvas"]["nonBlank"], 1000)


if __name__ == "__main__":
    unittest.main()
