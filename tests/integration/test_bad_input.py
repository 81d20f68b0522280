"""Bad input gets a clear error (HTTP status + JSON {code, message}) and
changes nothing: after every rejected request, LabelValues(service_name),
Series and ProfileTypes are exactly what they were before.

Inputs that must be rejected are checked against `go tool pprof` too, so a
"truncated" profile is one Go's parser refuses as well."""
import gzip
import os
import random
import select
import socket
import tempfile
import time
import unittest
import zlib

import harness as h

GOOD = "pprof/pyroscope-cpu.pprof"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
LEGACY_CODE = {400: "invalid_argument", 413: "invalid_argument", 422: "unknown"}


def go_pprof_rejects(data):
    with tempfile.NamedTemporaryFile(suffix=".pb") as f:
        f.write(data)
        f.flush()
        try:
            h.pprof_raw(f.name)
            return False
        except AssertionError:
            return True


def gzip_bomb(size=1 << 30):
    """gzip of `size` zero bytes (about 1 MB for 1 GiB), built in chunks."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    out = [c.compress(chunk) for _ in range(size // len(chunk))]
    out.append(c.flush())
    return b"".join(out)


class BadInputTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = cls.srv.ingest("good-app{env=test}", h.read_testdata(GOOD), {"format": "pprof"},
                           content_type="application/octet-stream")
        assert r.status == 200, f"baseline ingest failed: {r.describe()}"
        tn = h.manifest()[GOOD]["time_nanos"]
        h.wait_for(lambda: cls.srv.flamegraph(CPU, '{service_name="good-app"}', *h.time_window_ms(tn)).total,
                   timeout=15, what="baseline profile stored")
        cls.good_raw = gzip.decompress(h.read_testdata(GOOD))
        cls.baseline = cls.snapshot()

    @classmethod
    def snapshot(cls):
        end = h.now_ms() + 3600_000
        srv = cls.srv
        return {"services": srv.label_values("service_name", start=0, end=end),
                "series": srv.series_labels(start=0, end=end),
                "types": sorted(pt.ID for pt in srv.q("ProfileTypes", start=0, end=end).profile_types)}

    def assertUnchanged(self, what):
        time.sleep(0.3)     # an erroneously queued write would land by now
        self.assertEqual(self.snapshot(), self.baseline, f"{what} changed the stored data")
        self.assertTrue(self.srv.alive(), f"ember died after {what}\n{self.srv.log_tail()}")

    def assertError(self, r, statuses, code, what):
        """status in statuses, JSON body with the expected code and a message."""
        self.assertStatus(r, statuses, what)
        self.assertIsNotNone(r.json, f"{what}: error body must be JSON: {r.describe()}")
        want = code if code else LEGACY_CODE.get(r.status)
        if want:
            self.assertEqual(r.json.get("code"), want, f"{what}: {r.describe()}")
        self.assertTrue(r.json.get("message"), f"{what}: error without message: {r.describe()}")

    def ingest(self, body, name="bad-app{env=test}", params=None, **kw):
        return self.srv.ingest(name, body, dict({"format": "pprof"}, **(params or {})),
                               content_type=kw.pop("content_type", "application/octet-stream"), **kw)

    # ----------------------------------------------------------- /ingest pprof

    def test_truncated_pprof(self):
        cut = len(self.good_raw) * 2 // 3
        while not go_pprof_rejects(self.good_raw[:cut]):
            cut -= 1
        bodies = {"truncated raw pprof": self.good_raw[:cut],
                  "truncated gzip pprof": h.read_testdata(GOOD)[:600]}
        for what, body in bodies.items():
            with self.subTest(what):
                self.assertError(self.ingest(body), 422, None, f"/ingest {what}")
                self.assertUnchanged(what)
                r = self.srv.push([({"__name__": "process_cpu", "service_name": "bad-push"}, [body])])
                self.assertError(r, 400, "invalid_argument", f"Push {what}")
                self.assertUnchanged(f"Push {what}")

    def test_garbage_pprof(self):
        rnd = random.Random(42)
        garbage = bytes(rnd.getrandbits(8) for _ in range(4096))
        self.assertTrue(go_pprof_rejects(garbage))
        self.assertError(self.ingest(garbage), 422, None, "/ingest garbage")
        self.assertUnchanged("/ingest garbage")
        gz = gzip.compress(garbage)
        self.assertError(self.ingest(gz), 422, None, "/ingest gzipped garbage")
        self.assertUnchanged("/ingest gzipped garbage")
        self.assertError(self.srv.ingest("bad-app", h.go_sdk_multipart(garbage), {"spyName": "gospy"}),
                         422, None, "/ingest multipart garbage")
        self.assertUnchanged("/ingest multipart garbage")
        r = self.srv.push([({"__name__": "process_cpu", "service_name": "bad-push"}, [garbage])])
        self.assertError(r, 400, "invalid_argument", "Push garbage")
        self.assertUnchanged("Push garbage")

    def test_gzip_bomb(self):
        bomb = gzip_bomb()
        self.assertLess(len(bomb), 2 << 20)
        self.assertError(self.ingest(bomb), (413, 422), None, "/ingest pprof gzip bomb (1 GiB of zeros)")
        self.assertUnchanged("/ingest gzip bomb")
        r = self.srv.push([({"__name__": "process_cpu", "service_name": "bad-push"}, [bomb])])
        self.assertError(r, 400, "invalid_argument", "Push gzip bomb")
        self.assertUnchanged("Push gzip bomb")
        # the same bomb as an HTTP Content-Encoding of a Connect request
        r = self.srv.request("POST", f"/{h.QUERIER}/LabelNames", bomb,
                             {"Content-Type": "application/proto", "Content-Encoding": "gzip"})
        self.assertError(r, (400, 413, 429), None, "Connect request with Content-Encoding: gzip bomb")
        peak = self.srv.rss_peak_kib()
        self.assertLess(peak, 512 * 1024, f"ember peak RSS {peak} KiB: a bomb must not be inflated in full")

    def test_oversize_body(self):
        """A body over the 256 MiB limit -> 413, ideally before it is all sent."""
        size = 300 << 20
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=60)
        try:
            s.sendall(b"POST /ingest?name=big-app&format=pprof HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Content-Type: application/octet-stream\r\n"
                      b"Content-Length: " + str(size).encode() + b"\r\n\r\n")
            chunk, sent = bytes(1 << 20), 0
            while sent < size:
                if select.select([s], [], [], 0)[0]:
                    break                          # the server answered early
                try:
                    s.sendall(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    break
                sent += len(chunk)
            resp = b""
            try:
                while b"\r\n\r\n" not in resp:
                    d = s.recv(65536)
                    if not d:
                        break
                    resp += d
            except ConnectionResetError:
                pass
        finally:
            s.close()
        self.assertTrue(resp.startswith(b"HTTP/1.1 413"), f"oversize body: got {resp[:200]!r}")
        self.assertUnchanged("oversize body")

    # ---------------------------------------------------------- /ingest other

    def test_malformed_name(self):
        for name in ("my app{", "{env=test}", "", "my$app", "app{k-ey=v}", "app{=v}"):
            with self.subTest(name=name):
                r = self.ingest(self.good_raw, name=name)
                self.assertError(r, 400, "invalid_argument", f"/ingest name={name!r}")
                self.assertUnchanged(f"name={name!r}")
        r = self.srv.request("POST", "/ingest?format=pprof", self.good_raw,
                             {"Content-Type": "application/octet-stream"})
        self.assertError(r, 400, "invalid_argument", "/ingest without name")
        self.assertUnchanged("/ingest without name")

    def test_prev_profile_rejected(self):
        mp = h.Multipart([("profile", "profile.pprof", "application/octet-stream", self.good_raw),
                          ("prev_profile", "profile.pprof", "application/octet-stream", self.good_raw)])
        self.assertError(self.srv.ingest("bad-app", mp, {"spyName": "gospy"}), 422, None,
                         "/ingest with prev_profile")
        self.assertUnchanged("prev_profile")

    def test_bad_folded(self):
        r = self.srv.ingest("bad-folded.cpu", b"a;b 3\na;c x\n", {"from": int(time.time())})
        self.assertError(r, 422, None, "folded line with a non-integer count")
        self.assertUnchanged("bad folded")
        r = self.srv.ingest("bad.folded", b"a;b 3\n", {"from": int(time.time())})
        self.assertError(r, 400, "invalid_argument", "folded with an unknown profile-type suffix")
        self.assertUnchanged("unknown suffix")

    # ------------------------------------------------------------------ Push

    def test_bad_push(self):
        srv, p = self.srv, h.pb().push
        raw_post = lambda body, codec: lambda: srv.request(
            "POST", "/" + h.PUSH, body, {"Content-Type": f"application/{codec}"})
        cases = {
            "empty PushRequest": lambda: srv.call(h.PUSH, p.PushRequest(), check=False),
            "empty JSON PushRequest": raw_post(b"{}", "json"),
            "series without __name__": lambda: srv.push([({"service_name": "bad-push"}, [self.good_raw])]),
            "series without samples": lambda: srv.push([({"__name__": "process_cpu",
                                                         "service_name": "bad-push"}, [])]),
            "garbage proto body": raw_post(b"\xff\xff\xff\xff\x0f garbage", "proto"),
            "truncated JSON": raw_post(b'{"series":[{"labels":[', "json"),
            "JSON of the wrong shape": raw_post(b'{"series":"x"}', "json"),
        }
        for what, send in cases.items():
            with self.subTest(what):
                self.assertError(send(), 400, "invalid_argument", f"Push {what}")
                self.assertUnchanged(f"Push {what}")

    # --------------------------------------------------------------- queries

    def test_bad_selectors(self):
        q = h.pb().querier
        t = h.pb().types
        end = h.now_ms()
        for sel in ('{a=~"("}', '{a="b"', 'a="b"}', '{a="b",,}', '{="b"}', '{a=b}'):
            reqs = {
                "SelectMergeStacktraces": q.SelectMergeStacktracesRequest(
                    profile_typeID=CPU, label_selector=sel, start=end - 3600_000, end=end),
                "SelectSeries": q.SelectSeriesRequest(profile_typeID=CPU, label_selector=sel,
                                                      start=end - 3600_000, end=end, step=15),
                "SelectMergeProfile": q.SelectMergeProfileRequest(profile_typeID=CPU, label_selector=sel,
                                                                  start=end - 3600_000, end=end),
                "LabelNames": t.LabelNamesRequest(matchers=[sel], start=end - 3600_000, end=end),
                "LabelValues": t.LabelValuesRequest(name="service_name", matchers=[sel],
                                                    start=end - 3600_000, end=end),
                "Series": q.SeriesRequest(matchers=[sel], start=end - 3600_000, end=end),
            }
            for method, req in reqs.items():
                for codec in ("proto", "json"):
                    with self.subTest(selector=sel, method=method, codec=codec):
                        r = self.srv.call(f"{h.QUERIER}/{method}", req, codec=codec, check=False)
                        self.assertError(r, 400, "invalid_argument", f"{method} selector {sel!r} ({codec})")

    def test_bad_ranges_and_params(self):
        q = h.pb().querier
        end = h.now_ms()
        cases = {
            "SelectMergeStacktraces start > end": ("SelectMergeStacktraces", q.SelectMergeStacktracesRequest(
                profile_typeID=CPU, label_selector="{}", start=end, end=end - 3600_000)),
            "SelectSeries start > end": ("SelectSeries", q.SelectSeriesRequest(
                profile_typeID=CPU, label_selector="{}", start=end, end=end - 3600_000, step=15)),
            "SelectMergeProfile start > end": ("SelectMergeProfile", q.SelectMergeProfileRequest(
                profile_typeID=CPU, label_selector="{}", start=end, end=end - 3600_000)),
            "SelectSeries step 0": ("SelectSeries", q.SelectSeriesRequest(
                profile_typeID=CPU, label_selector="{}", start=end - 3600_000, end=end, step=0)),
            "SelectMergeStacktraces max_nodes < 0": ("SelectMergeStacktraces", q.SelectMergeStacktracesRequest(
                profile_typeID=CPU, label_selector="{}", start=end - 3600_000, end=end, max_nodes=-1)),
            "SelectMergeStacktraces bad profile type": ("SelectMergeStacktraces", q.SelectMergeStacktracesRequest(
                profile_typeID="process_cpu", label_selector="{}", start=end - 3600_000, end=end)),
        }
        for what, (method, req) in cases.items():
            with self.subTest(what):
                r = self.srv.call(f"{h.QUERIER}/{method}", req, check=False)
                self.assertError(r, 400, "invalid_argument", what)


if __name__ == "__main__":
    unittest.main()
