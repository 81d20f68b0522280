"""What goes in must come out: every real profile of testdata/ pushed through
/ingest, Push (proto) and Push (JSON) comes back from SelectMergeStacktraces,
SelectSeries and SelectMergeProfile with the totals Go's pprof library
computed (MANIFEST.jsonl); SelectMergeProfile's output is read back by
`go tool pprof -raw`. Invalid UTF-8 is rejected and leaves nothing behind.

Each (upload path, file) pair gets its own service_name, so one server holds
everything and every query is scoped to one upload.
"""
import json
import os
import re
import time
import unittest

import harness as h

INVALID = "ingest/invalid_utf8.pb.gz"
LARGE = "pprof/gopprof-large.cpu"
PATHS = ("ingest", "pushproto", "pushjson")
YEAR_1971_NS = 365 * 24 * 3600 * 10**9


def slug(rel):
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", os.path.basename(rel))


def st_config(rel):
    """The sample_type_config JSON shipped next to ingest/req_N.pprof."""
    p = os.path.join(h.TESTDATA, re.sub(r"\.pprof$", ".st.json", rel))
    if rel.startswith("ingest/req_") and os.path.exists(p):
        with open(p, "rb") as f:
            return f.read()
    return None


class Upload:
    """One file pushed through one path, and what must come back."""

    def __init__(self, path, rel, entry):
        self.path, self.rel, self.entry = path, rel, entry
        self.service = f"{path}-{slug(rel)}"
        cfg = st_config(rel)
        self.st_config = cfg
        types = [st["type"] for st in entry["sample_types"]]
        self.name = h.ingest_metric_name(types, json.loads(cfg) if cfg else None)
        self.totals = {h.profile_type_id(self.name, t, u, entry): v
                       for (t, u), v in h.expected_totals(entry).items()}
        self.window = None
        self.response = None

    @property
    def selector(self):
        return f'{{service_name="{self.service}"}}'

    def __repr__(self):
        return f"{self.path}:{self.rel} (service {self.service})"


class IngestQueryTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        srv = cls.srv
        man = h.manifest()
        cls.manifest = man
        cls.uploads = []
        cls.ingest_from_s = int(time.time()) - 120      # the `from` of every /ingest call
        for rel in sorted(man):
            if rel == INVALID:
                continue
            for path in PATHS:
                cls.uploads.append(Upload(path, rel, man[rel]))
        for u in cls.uploads:
            raw = h.read_testdata(u.rel)
            tn = u.entry["time_nanos"]
            if u.path == "ingest":
                u.response = cls.ingest_one(u, raw)
                if tn == 0 or tn < YEAR_1971_NS:        # replaced by `from` (§2.5)
                    u.window = (cls.ingest_from_s * 1000 - 5000, cls.ingest_from_s * 1000 + 5000)
                else:
                    u.window = h.time_window_ms(tn)
            else:
                t0 = h.now_ms()
                labels = {"__name__": u.name, "service_name": u.service, "__delta__": "false",
                          "env": "test"}
                u.response = srv.push([(labels, [raw])], codec=u.path[len("push"):])
                if tn == 0:                              # time_nanos 0 -> now (§3.3)
                    u.window = (t0 - 5000, h.now_ms() + 5000)
                elif tn < YEAR_1971_NS:                  # kept as sent by Pyroscope; don't insist
                    u.window = (0, h.now_ms() + 3600_000)
                else:
                    u.window = h.time_window_ms(tn)
        # The writer is asynchronous: wait until every accepted upload is visible.
        accepted = {u.service for u in cls.uploads if u.response.status == 200}
        try:
            h.wait_for(lambda: accepted <= set(srv.label_values("service_name")), timeout=30,
                       what="all accepted uploads to appear in LabelValues(service_name)")
        except AssertionError as e:
            print(f"setUpClass: {e}")

    @classmethod
    def ingest_one(cls, u, raw):
        """Each file is sent the way a real client of its kind sends it."""
        srv = cls.srv
        name = f"{u.service}{{env=test}}"
        if u.st_config is not None:      # pyroscope-go: multipart + sample_type_config, ns times
            now_ns = time.time_ns()
            return srv.ingest(name, h.go_sdk_multipart(raw, u.st_config),
                              {"aggregationType": "", "from": now_ns - 10 * 10**9, "sampleRate": 0,
                               "spyName": "gospy", "units": "", "until": now_ns})
        if os.path.basename(u.rel).startswith(("nodejs-", "cpu-js", "heap-js")):
            # @pyroscope/nodejs <= 0.6.1: multipart, one `profile` part, no format=
            params = {"from": cls.ingest_from_s, "spyName": "nodespy", "until": cls.ingest_from_s + 10}
            if "wall" in u.name:
                params["sampleRate"] = 17
            return srv.ingest(name, h.node_sdk_multipart(raw), params)
        spy = "pyspy" if "pyspy" in u.rel else "gospy"
        return srv.ingest(name, raw, {"format": "pprof", "from": cls.ingest_from_s,
                                      "spyName": spy, "until": cls.ingest_from_s + 10},
                          content_type="application/octet-stream")

    def codec_for(self, u):
        return "json" if u.path == "pushjson" else "proto"

    grace = 10.0    # seconds the writer may still need; spent once per class

    def eventually(self, fn, expected, what):
        t0 = time.monotonic()
        got = h.eventually(fn, expected, IngestQueryTest.grace)
        IngestQueryTest.grace = max(0.0, IngestQueryTest.grace - (time.monotonic() - t0))
        self.assertEqual(got, expected, what)

    # ------------------------------------------------------------------ tests

    def test_01_uploads_accepted(self):
        for u in self.uploads:
            with self.subTest(upload=repr(u)):
                self.assertEqual(u.response.status, 200, f"{u}: {u.response.describe()}")

    def test_02_profile_types(self):
        """Series lists exactly the expected __profile_type__ values per
        service; ProfileTypes over the window contains them, well formed."""
        srv = self.srv
        for u in self.uploads:
            with self.subTest(upload=repr(u)):
                got = lambda: {v for ls in srv.series_labels([u.selector], ["__profile_type__"],
                                                             *u.window) for k, v in ls
                               if k == "__profile_type__"}
                self.eventually(got, set(u.totals), f"{u}: Series __profile_type__ values")
                pts = srv.q("ProfileTypes", start=u.window[0], end=u.window[1]).profile_types
                ids = [pt.ID for pt in pts]
                self.assertEqual(ids, sorted(ids), "ProfileTypes must be sorted by ID")
                for pid in u.totals:
                    self.assertIn(pid, ids, f"{u}: ProfileTypes{u.window}")
                for pt in pts:
                    parts = pt.ID.split(":")
                    self.assertEqual([pt.name, pt.sample_type, pt.sample_unit, pt.period_type,
                                      pt.period_unit], parts[:5], f"ProfileType fields of {pt.ID}")

    def test_03_flamegraph_totals(self):
        srv = self.srv
        for u in self.uploads:
            for pid, total in u.totals.items():
                with self.subTest(upload=repr(u), profile_type=pid):
                    self.eventually(lambda: srv.flamegraph(pid, u.selector, *u.window,
                                                           codec=self.codec_for(u)).total,
                                    total, f"{u}: SelectMergeStacktraces {pid} flamegraph.total")
                    fg = srv.flamegraph(pid, u.selector, *u.window, codec=self.codec_for(u))
                    self.assertEqual(fg.names[0], "total")
                    lv = h.decode_flamegraph(fg)
                    self.assertEqual(lv[0][0]["total"], total, "root node total")
                    if total:
                        self.assertEqual(fg.max_self, max(n["self"] for lvl in lv for n in lvl))

    def test_04_series_totals(self):
        srv = self.srv
        for u in self.uploads:
            for pid, total in u.totals.items():
                with self.subTest(upload=repr(u), profile_type=pid):
                    self.eventually(lambda: srv.series_sum(pid, u.selector, *u.window,
                                                           codec=self.codec_for(u)),
                                    total, f"{u}: SelectSeries {pid} sum of points")

    def test_05_merge_profile_read_by_go_pprof(self):
        """SelectMergeProfile's body, written to a file, is a pprof that
        `go tool pprof -raw` reads with the requested sample type and total."""
        srv = self.srv
        tmp = h.temp_dir("ember-merge-")
        for u in self.uploads:
            for pid, total in u.totals.items():
                with self.subTest(upload=repr(u), profile_type=pid):
                    body = srv.merge_profile(pid, u.selector, *u.window, codec=self.codec_for(u))
                    path = os.path.join(tmp, f"{u.service}.{pid.replace(':', '_')}.pb")
                    with open(path, "wb") as f:
                        f.write(body)
                    raw = h.pprof_raw(path)
                    _, st, su, _, _ = pid.split(":")
                    self.assertEqual(raw["sample_types"], [(st, su)],
                                     f"{u}: sample types of SelectMergeProfile({pid})")
                    self.assertEqual(raw["totals"][(st, su)], total,
                                     f"{u}: go tool pprof -raw total of SelectMergeProfile({pid})")

    def test_06_invalid_utf8_rejected_and_not_stored(self):
        srv = self.srv
        raw = h.read_testdata(INVALID)
        end = h.now_ms() + 3600_000

        def snapshot():
            return (srv.label_values("service_name", start=0, end=end),
                    srv.series_labels(start=0, end=end),
                    [pt.ID for pt in srv.q("ProfileTypes", start=0, end=end).profile_types])

        before = snapshot()
        r = srv.ingest("invalid-utf8-ingest{env=test}", raw,
                       {"format": "pprof", "from": self.ingest_from_s, "spyName": "gospy"},
                       content_type="application/octet-stream")
        self.assertStatus(r, 422, "/ingest invalid_utf8.pb.gz")
        self.assertIsNotNone(r.json, f"/ingest error body must be JSON: {r.describe()}")
        self.assertIn("code", r.json)
        self.assertTrue(r.json.get("message"), f"error without message: {r.describe()}")
        r = srv.ingest("invalid-utf8-ingest-mp{env=test}", h.go_sdk_multipart(raw), {"spyName": "gospy"})
        self.assertStatus(r, 422, "/ingest multipart invalid_utf8.pb.gz")
        for codec in ("proto", "json"):
            r = srv.push([({"__name__": "process_cpu", "service_name": f"invalid-utf8-{codec}"}, [raw])],
                         codec=codec)
            self.assertStatus(r, 400, f"Push ({codec}) invalid_utf8.pb.gz")
            self.assertEqual((r.json or {}).get("code"), "invalid_argument", r.describe())
        time.sleep(1.0)     # give an (erroneously) queued write the chance to land
        self.assertEqual(snapshot(), before, "invalid profile changed the stored data")

    def test_07_large_profile_admitted(self):
        u = next(u for u in self.uploads if u.rel == LARGE and u.path == "ingest")
        self.assertEqual(u.response.status, 200, u.response.describe())
        self.assertGreater(self.manifest[LARGE]["samples"], 16000)
        pid = h.profile_type_id("process_cpu", "cpu", "nanoseconds", self.manifest[LARGE])
        self.assertEqual(self.srv.flamegraph(pid, u.selector, *u.window).total,
                         u.totals[pid])


if __name__ == "__main__":
    unittest.main()
