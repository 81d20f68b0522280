"""HTTP-level behaviour: /ready, /metrics, keep-alive, chunked and gzip
request bodies, gzip responses, and the Connect status codes 404/405/415."""
import gzip
import socket
import time
import unittest

import harness as h

GOOD = "pprof/pyroscope-cpu.pprof"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"


class HttpTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.entry = h.manifest()[GOOD]
        cls.window = h.time_window_ms(cls.entry["time_nanos"])
        cls.cpu_total = h.expected_totals(cls.entry)[("cpu", "nanoseconds")]

    def stored_total(self, service):
        return h.eventually(lambda: self.srv.flamegraph(CPU, f'{{service_name="{service}"}}', *self.window).total,
                            self.cpu_total)

    def test_ready(self):
        r = self.srv.request("GET", "/ready")
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(r.body.strip(), b"ready")

    def test_live(self):
        r = self.srv.request("GET", "/live")
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(r.body.strip(), b"alive")

    def test_metrics_count_ingest_and_queries(self):
        before = self.srv.metrics()
        r = self.srv.ingest("metrics-app", h.read_testdata(GOOD), {"format": "pprof"},
                            content_type="application/octet-stream")
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.stored_total("metrics-app"), self.cpu_total)
        for _ in range(3):
            self.srv.q("LabelNames", start=0, end=h.now_ms())
        after = self.srv.metrics()

        def grew(pred):
            return sorted(f"{n}{dict(l)}: {before.get((n, l), 0)} -> {v}" for (n, l), v in after.items()
                          if pred(n, dict(l)) and v > before.get((n, l), 0))
        ingest = grew(lambda n, l: "ingest" in n or any("ingest" in v for v in l.values()))
        query = grew(lambda n, l: any(w in n for w in ("quer", "select", "rpc", "request"))
                     and ("LabelNames" in " ".join(l.values()) or "quer" in n))
        self.assertTrue(ingest, "no metric mentioning 'ingest' grew after a /ingest call:\n"
                        + "\n".join(sorted(n for n, _ in after)))
        self.assertTrue(query, "no query metric grew after 3 LabelNames calls:\n"
                        + "\n".join(sorted(n for n, _ in after)))
        text = self.srv.request("GET", "/metrics")
        self.assertTrue(text.header("content-type", "").startswith("text/plain"), text.describe())

    def test_keep_alive(self):
        conn = self.srv.connection()
        try:
            sock = None
            for i in range(5):
                r = self.srv.request("GET", "/ready", conn=conn)
                self.assertEqual(r.status, 200)
                sock = sock or conn.sock
                self.assertIs(conn.sock, sock, f"connection closed after request {i}")
            r = self.srv.ingest("keepalive-app", h.read_testdata(GOOD), {"format": "pprof"},
                                content_type="application/octet-stream")
            self.assertEqual(r.status, 200)
            for codec in ("proto", "json"):
                r = self.srv.call(f"{h.QUERIER}/LabelNames", h.pb().types.LabelNamesRequest(end=h.now_ms()),
                                  codec=codec, conn=conn)
                self.assertIs(conn.sock, sock, "connection closed after a Connect call")
            # an error reply must not break the connection either
            r = self.srv.request("POST", f"/{h.QUERIER}/NoSuchMethod", b"", {"Content-Type": "application/proto"},
                                 conn=conn)
            self.assertEqual(r.status, 404)
            r = self.srv.request("GET", "/ready", conn=conn)
            self.assertEqual(r.status, 200)
        finally:
            conn.close()

    def test_pipelined_requests(self):
        """Two requests written back to back on one socket get two answers in order."""
        with socket.create_connection(("127.0.0.1", self.srv.port), timeout=10) as s:
            s.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\nGET /nope-404 HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            deadline = time.monotonic() + 10
            while data.count(b"HTTP/1.1 ") < 2 and time.monotonic() < deadline:
                d = s.recv(65536)
                if not d:
                    break
                data += d
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:200])
        self.assertIn(b"HTTP/1.1 404", data[10:], data[:400])

    def test_chunked_request_bodies(self):
        raw = h.read_testdata(GOOD)
        chunks = lambda b: (b[i:i + 100] for i in range(0, len(b), 100))
        r = self.srv.request("POST", "/ingest?name=chunked-app&format=pprof", chunks(raw),
                             {"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.stored_total("chunked-app"), self.cpu_total)
        # Push the way connect-es sends it: chunked, no Content-Length
        req = h.pb().push.PushRequest()
        s = req.series.add()
        s.labels.add(name="__name__", value="process_cpu")
        s.labels.add(name="service_name", value="chunked-push")
        s.samples.add(raw_profile=raw)
        r = self.srv.request("POST", "/" + h.PUSH, chunks(req.SerializeToString()),
                             {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.stored_total("chunked-push"), self.cpu_total)

    def test_gzip_request_and_response(self):
        raw = h.read_testdata(GOOD)
        r = self.srv.push([({"__name__": "process_cpu", "service_name": "gzip-push"}, [raw])])
        self.assertEqual(r.status, 200, r.describe())
        req = h.pb().push.PushRequest()
        s = req.series.add()
        s.labels.add(name="__name__", value="process_cpu")
        s.labels.add(name="service_name", value="gzip-push-2")
        s.samples.add(raw_profile=raw)
        r = self.srv.call(h.PUSH, req, gzip_req=True)
        self.assertEqual(r.status, 200)
        self.assertEqual(self.stored_total("gzip-push-2"), self.cpu_total)
        # gzip-compressed query request, JSON and proto
        for codec in ("proto", "json"):
            r = self.srv.call(f"{h.QUERIER}/LabelValues",
                              h.pb().types.LabelValuesRequest(name="service_name", end=h.now_ms() + 60_000),
                              codec=codec, gzip_req=True)
            self.assertIn("gzip-push-2", r.msg.names)
        # gzip response when asked for
        body = h.pb().types.LabelValuesRequest(name="service_name", end=h.now_ms() + 60_000).SerializeToString()
        conn = self.srv.connection()
        try:
            conn.request("POST", f"/{h.QUERIER}/LabelValues", body,
                         {"Content-Type": "application/proto", "Accept-Encoding": "gzip"})
            resp = conn.getresponse()
            data = resp.read()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.getheader("Content-Encoding"), "gzip", "response not gzip-encoded")
            names = h.pb().types.LabelValuesResponse.FromString(gzip.decompress(data)).names
            self.assertIn("gzip-push-2", names)
        finally:
            conn.close()
        # unknown request encoding -> unimplemented
        r = self.srv.request("POST", f"/{h.QUERIER}/LabelNames", b"\x00",
                             {"Content-Type": "application/proto", "Content-Encoding": "br"})
        self.assertEqual(r.status, 501, r.describe())
        self.assertEqual((r.json or {}).get("code"), "unimplemented", r.describe())

    def test_connect_status_codes(self):
        srv = self.srv
        path = f"/{h.QUERIER}/LabelNames"
        r = srv.request("POST", f"/{h.QUERIER}/NoSuchMethod", b"", {"Content-Type": "application/proto"})
        self.assertEqual(r.status, 404, f"unknown method: {r.describe()}")
        r = srv.request("POST", "/no.such.Service/Method", b"{}", {"Content-Type": "application/json"})
        self.assertEqual(r.status, 404, f"unknown service: {r.describe()}")
        r = srv.request("GET", path)
        self.assertEqual(r.status, 405, f"GET on a Connect path: {r.describe()}")
        self.assertIn("POST", r.header("allow", ""), "405 must carry Allow: POST")
        for ct in ("text/plain", "application/xml", "application/json; foo=bar"):
            with self.subTest(content_type=ct):
                r = srv.request("POST", path, b"{}", {"Content-Type": ct})
                self.assertEqual(r.status, 415, f"Content-Type {ct}: {r.describe()}")
                self.assertIn("application/proto", r.header("accept-post", ""), "415 must carry Accept-Post")
        r = srv.request("POST", "/" + h.PUSH, b"", {"Content-Type": "text/plain"})
        self.assertEqual(r.status, 415, f"Push with text/plain: {r.describe()}")
        # accepted variants of the JSON content type, no Connect-Protocol-Version (browsers)
        for ct in ("application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8"):
            with self.subTest(content_type=ct):
                r = srv.request("POST", path, b"{}", {"Content-Type": ct})
                self.assertEqual(r.status, 200, f"Content-Type {ct}: {r.describe()}")
        r = srv.request("POST", path, b"", {"Content-Type": "application/proto", "Connect-Protocol-Version": "2"})
        self.assertEqual(r.status, 400, f"Connect-Protocol-Version: 2: {r.describe()}")
        r = srv.request("POST", path, b"", {"Content-Type": "application/json"})
        self.assertEqual(r.status, 400, f"empty JSON body: {r.describe()}")
        self.assertEqual((r.json or {}).get("code"), "invalid_argument", r.describe())

    def test_ingest_method_and_paths(self):
        raw = h.read_testdata(GOOD)
        r = self.srv.request("GET", "/ingest?name=x")
        self.assertEqual(r.status, 405, f"GET /ingest: {r.describe()}")
        r = self.srv.ingest("alias-app", raw, {"format": "pprof"}, content_type="application/octet-stream",
                            path="/pyroscope/ingest")
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.stored_total("alias-app"), self.cpu_total)
        r = self.srv.request("GET", "/no-such-path")
        self.assertEqual(r.status, 404)


if __name__ == "__main__":
    unittest.main()
