"""HTTP/2 cleartext (h2c) beside HTTP/1.1 on ember's one port.

Clients independent of the server's nghttp2: the python `h2` library
(h2client.py, prior knowledge and `Upgrade: h2c`), curl (--http2-prior-knowledge
and --http2, which upgrades), and raw frames built with hyperframe/hpack for
the abuse cases.

H2SameAnswersTest: Connect RPCs over h2c give byte-for-byte the answers
HTTP/1.1 gives on the same server, many streams at once on one connection;
pushes over h2 are stored; label values are checked against the hand-made
data too (so a server answering both wrong still fails).

H2AbuseTest: rapid reset, SETTINGS/PING floods, oversized HEADERS and
CONTINUATION floods, zero-window streams, streams past
SETTINGS_MAX_CONCURRENT_STREAMS, body caps. After each: the process is up,
its RSS stays within a bound, and fresh HTTP/1.1 and HTTP/2 clients are served."""
import gzip
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

import harness as h
from h2client import H2Client
from test_connect_rpcs import cpu_profile

try:
    import hpack
    from hyperframe import frame as hf
except ImportError:  # pragma: no cover - install-deps installs python3-h2
    hpack = hf = None

Q = "querier.v1.QuerierService"
PUSH = "push.v1.PusherService/Push"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
STACKS = {"A": {"main;a;b": 3, "main;a;c": 2, "main;d": 1}, "B": {"main;a;b": 1, "main;e": 4}}
PERIOD_NS = 10_000_000


def connect_headers(codec="proto"):
    return [("content-type", f"application/{codec}"), ("connect-protocol-version", "1")]


def push_body(service, stacks, t_ns):
    p = h.pb()
    req = p.push.PushRequest()
    s = req.series.add()
    for k, v in (("service_name", service), ("__name__", "process_cpu")):
        s.labels.add(name=k, value=v)
    s.samples.add(raw_profile=cpu_profile(stacks, t_ns), ID=str(uuid.uuid4()))
    return req.SerializeToString()


class H2SameAnswersTest(h.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.t0 = h.now_ms()
        for i, (svc, stacks) in enumerate(STACKS.items()):
            r = cls.srv.request("POST", "/" + PUSH, push_body(svc, stacks, (cls.t0 - 1000 + i) * 1_000_000),
                                {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})
            assert r.status == 200, r.describe()

    def queries(self):
        start, end = self.t0 - 3600_000, self.t0 + 3600_000

        def req(method, **fields):
            return method, h.rpc_classes(f"{Q}/{method}")[0](**fields)
        return [
            req("LabelNames", start=start, end=end),
            req("LabelValues", name="service_name", start=start, end=end),
            req("ProfileTypes", start=start, end=end),
            req("Series", matchers=['{service_name="A"}'], start=start, end=end),
            req("SelectMergeStacktraces", profile_typeID=CPU, label_selector="{}", start=start, end=end),
            req("SelectMergeProfile", profile_typeID=CPU, label_selector='{service_name="A"}',
                start=start, end=end),
            req("SelectSeries", profile_typeID=CPU, label_selector="{}", start=start, end=end, step=60),
        ]

    def test_connect_rpcs_same_bytes_over_h2(self):
        """Every query over HTTP/1.1 and over h2c (all streams at once, one
        connection, proto and JSON): same status, content type and body."""
        from google.protobuf import json_format
        cases = []
        for name, msg in self.queries():
            cases.append((name, "proto", msg.SerializeToString()))
            cases.append((name, "json", json.dumps(json_format.MessageToDict(msg)).encode()))
        c = H2Client(self.srv.port)
        try:
            sids = [c.send("POST", f"/{Q}/{n}", connect_headers(codec), body) for n, codec, body in cases]
            replies = c.wait(sids)
        finally:
            c.close()
        for (name, codec, body), r2 in zip(cases, replies):
            r1 = self.srv.request("POST", f"/{Q}/{name}", body,
                                  {"Content-Type": f"application/{codec}", "Connect-Protocol-Version": "1"})
            with self.subTest(rpc=name, codec=codec):
                self.assertEqual(r1.status, 200, r1.describe())
                self.assertEqual(r2.status, r1.status)
                self.assertEqual(r2.header("content-type"), r1.header("content-type"))
                self.assertEqual(bytes(r2.body), r1.body)
                self.assertEqual(int(r2.header("content-length")), len(r1.body))
        # independent of both: the services pushed
        lv = dict(zip([(n, c_) for n, c_, _ in cases], replies))[("LabelValues", "json")]
        self.assertEqual(sorted(json.loads(bytes(lv.body))["names"]), ["A", "B"])

    def test_native_grpc_same_messages_as_connect(self):
        """Native gRPC (5-byte frames, grpc-status in trailers) over h2c for
        querier.v1 queries and push.v1 Push: the message inside the frame is
        the Connect body byte for byte, and grpc-status is 0."""
        c = H2Client(self.srv.port)
        try:
            for name, msg in self.queries():
                body = msg.SerializeToString()
                frame = b"\0" + len(body).to_bytes(4, "big") + body
                r = c.request("POST", f"/{Q}/{name}", [("content-type", "application/grpc"), ("te", "trailers")],
                              frame)
                r1 = self.srv.request("POST", f"/{Q}/{name}", body,
                                      {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})
                with self.subTest(rpc=name):
                    self.assertEqual(r.status, 200, r)
                    self.assertEqual(r.trailers.get("grpc-status"), "0", r)
                    payload = bytes(r.body)
                    self.assertEqual(payload[0], 0)
                    self.assertEqual(int.from_bytes(payload[1:5], "big"), len(payload) - 5)
                    self.assertEqual(payload[5:], r1.body)
            svc = "grpc-push-" + uuid.uuid4().hex[:6]
            body = push_body(svc, {"main;g": 3}, (self.t0 - 400) * 1_000_000)
            r = c.request("POST", "/" + PUSH, [("content-type", "application/grpc"), ("te", "trailers")],
                          b"\0" + len(body).to_bytes(4, "big") + body)
            self.assertEqual(r.trailers.get("grpc-status"), "0", r)
            bad = c.request("POST", "/" + PUSH, [("content-type", "application/grpc"), ("te", "trailers")],
                            b"\0\0\0\0\3abc")
            self.assertNotEqual(bad.trailers.get("grpc-status", bad.headers.get("grpc-status")), "0", bad)
        finally:
            c.close()
        total = h.eventually(lambda: self.srv.series_sum(CPU, f'{{service_name="{svc}"}}',
                                                         self.t0 - 3600_000, self.t0 + 3600_000), 3 * PERIOD_NS)
        self.assertEqual(total, 3 * PERIOD_NS)

    def test_push_over_h2_is_stored(self):
        """Pushes over h2 (50 concurrent streams, some gzip-encoded) land like
        HTTP/1.1 ones: the service's CPU total is what was sent."""
        svc = "h2-push-" + uuid.uuid4().hex[:6]
        c = H2Client(self.srv.port)
        sids = []
        try:
            for i in range(50):
                body = push_body(svc, {"main;x": 1}, (self.t0 - 500) * 1_000_000 + i)
                hdrs = connect_headers()
                if i % 2:
                    body, hdrs = gzip.compress(body), hdrs + [("content-encoding", "gzip")]
                sids.append(c.send("POST", "/" + PUSH, hdrs, body))
            for r in c.wait(sids):
                self.assertEqual(r.status, 200, r)
        finally:
            c.close()
        total = h.eventually(lambda: self.srv.series_sum(CPU, f'{{service_name="{svc}"}}',
                                                         self.t0 - 3600_000, self.t0 + 3600_000),
                             50 * PERIOD_NS)
        self.assertEqual(total, 50 * PERIOD_NS)

    def test_routing_errors_over_h2(self):
        c = H2Client(self.srv.port)
        try:
            r404 = c.request("GET", "/no/such/route")
            r405 = c.request("GET", "/" + PUSH)
            ready = c.request("GET", "/ready")
            head = c.request("HEAD", "/ready")
        finally:
            c.close()
        h1 = self.srv.request("GET", "/no/such/route")
        self.assertEqual(r404.status, 404)
        self.assertEqual(bytes(r404.body), h1.body)
        self.assertEqual(r405.status, 405)
        self.assertIn("POST", r405.header("allow"))
        self.assertEqual(ready.status, 200)
        self.assertEqual(head.status, self.srv.request("HEAD", "/ready").status)
        self.assertEqual(bytes(head.body), b"")  # HEAD: no body, whatever the status

    def test_upgrade_h2c(self):
        """`Upgrade: h2c` on a GET: 101, the request is answered on stream 1,
        and the connection then carries HTTP/2 streams."""
        c = H2Client(self.srv.port, upgrade_path="/ready")
        try:
            self.assertEqual(c.upgrade_status, 101)
            first = c.wait([1])[0]
            self.assertEqual(first.status, 200)
            r = c.request("POST", f"/{Q}/LabelValues", connect_headers("json"),
                          json.dumps({"name": "service_name", "start": self.t0 - 3600_000,
                                      "end": self.t0 + 3600_000}).encode())
        finally:
            c.close()
        self.assertEqual(r.status, 200, r)
        self.assertEqual(sorted(json.loads(bytes(r.body))["names"])[:2], ["A", "B"])

    def curl(self, *args):
        r = subprocess.run(["curl", "-sS", "-D", "-", *args], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        head, _, body = r.stdout.partition(b"\r\n\r\n")
        while head.startswith(b"HTTP/1.1 101"):
            head, _, body = body.partition(b"\r\n\r\n")
        return head.decode(), body

    def test_curl_prior_knowledge_and_upgrade(self):
        if not shutil.which("curl"):
            self.skipTest("curl not installed")
        body = json.dumps({"name": "service_name", "start": self.t0 - 3600_000, "end": self.t0 + 3600_000})
        url = f"http://127.0.0.1:{self.srv.port}/{Q}/LabelValues"
        args = ["-H", "Content-Type: application/json", "-H", "Connect-Protocol-Version: 1", "--data", body, url]
        h1_head, h1_body = self.curl("--http1.1", *args)
        pk_head, pk_body = self.curl("--http2-prior-knowledge", *args)
        up_head, up_body = self.curl("--http2", *args)
        self.assertTrue(h1_head.startswith("HTTP/1.1 200"), h1_head)
        self.assertTrue(pk_head.startswith("HTTP/2 200"), pk_head)
        self.assertTrue(up_head.startswith("HTTP/2 200"), up_head)
        self.assertEqual(pk_body, h1_body)
        self.assertEqual(up_body, h1_body)


# ------------------------------------------------------------------ abuse

class RawH2:
    """Frames written by hand (no client-side checks), after the preface."""

    def __init__(self, port, settings=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.enc = hpack.Encoder()
        sf = hf.SettingsFrame(0, settings=settings or {})
        self.sock.sendall(PREFACE + sf.serialize())

    def send(self, *frames):
        try:
            self.sock.sendall(b"".join(f.serialize() for f in frames))
            return True
        except OSError:
            return False

    def headers(self, sid, path, end_stream=True, extra=(), method="GET"):
        block = self.enc.encode([(":method", method), (":path", path), (":scheme", "http"),
                                 (":authority", "x"), *extra])
        f = hf.HeadersFrame(sid, block)
        f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        return f

    def drain(self, seconds=2.0):
        """Reads until EOF or quiet; returns the bytes."""
        out = bytearray()
        self.sock.settimeout(0.5)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                d = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                break
            if not d:
                break
            out += d
        return bytes(out)

    def closed_by_server(self, seconds=10.0):
        self.sock.settimeout(seconds)
        try:
            while True:
                d = self.sock.recv(1 << 20)
                if not d:
                    return True
        except socket.timeout:
            return False
        except OSError:
            return True

    def close(self):
        self.sock.close()


def goaway_codes(data):
    """Error codes of GOAWAY frames in a server byte stream."""
    codes, i = [], 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i:i + 3], "big")
        ftype = data[i + 3]
        if ftype == 0x7 and i + 9 + 8 <= len(data):
            codes.append(int.from_bytes(data[i + 13:i + 17], "big"))
        i += 9 + length
    return codes


class H2AbuseTest(h.ServerTestCase):
    server_args = ("--http.max-body-bytes=1MiB",)
    RSS_GROWTH_MAX_KIB = 96 * 1024

    @classmethod
    def setUpClass(cls):
        if hf is None:
            raise unittest.SkipTest("python3-h2 (hyperframe, hpack) not installed")
        super().setUpClass()

    def setUp(self):
        self.rss0 = h.rss_kib(self.srv.proc.pid)

    def assertStillServing(self, what):
        self.assertTrue(self.srv.alive(), f"{what}: ember died\n{self.srv.log_tail()}")
        r = self.srv.request("GET", "/ready", timeout=10)
        self.assertEqual(r.status, 200, f"{what}: HTTP/1.1 client not served")
        c = H2Client(self.srv.port, timeout=10)
        try:
            self.assertEqual(c.request("GET", "/ready", timeout=10).status, 200,
                             f"{what}: HTTP/2 client not served")
        finally:
            c.close()
        grown = h.rss_kib(self.srv.proc.pid) - self.rss0
        self.assertLess(grown, self.RSS_GROWTH_MAX_KIB, f"{what}: RSS grew by {grown} KiB")
        H2AbuseTest.rss_growth[what] = grown
        return grown

    rss_growth = {}

    @classmethod
    def tearDownClass(cls):
        if cls.rss_growth:
            print("\nRSS growth per abuse case (KiB): " +
                  ", ".join(f"{k} {v}" for k, v in sorted(cls.rss_growth.items())), file=sys.stderr)
        super().tearDownClass()

    def test_rapid_reset(self):
        """HEADERS then RST_STREAM, up to 20,000 times on one connection, on a
        route that runs on the thread pool: nghttp2's reset budget ends the
        connection (GOAWAY) and the handlers queued stay bounded."""
        raw = RawH2(self.srv.port)
        body_path = f"/{Q}/LabelNames"
        sent = 0
        for batch in range(200):
            frames = []
            for i in range(100):
                sid = 1 + 2 * (batch * 100 + i)
                frames.append(raw.headers(sid, body_path, method="POST",
                                          extra=[("content-type", "application/json")]))
                frames.append(hf.RstStreamFrame(sid, error_code=8))
            if not raw.send(*frames):
                break
            sent += 100
        data = raw.drain(3)
        raw.close()
        # nghttp2's reset budget (1,000 then 100/s) ends it with GOAWAY
        # (INTERNAL_ERROR in 1.52) long before 20,000
        self.assertTrue(goaway_codes(data), f"no GOAWAY after {sent} resets")
        self.assertLess(sent, 20000)
        self.assertStillServing("rapid reset")

    def test_settings_and_ping_floods(self):
        for name, make in (("SETTINGS", lambda: hf.SettingsFrame(0, settings={0x3: 100})),
                           ("PING", lambda: hf.PingFrame(0, b"12345678"))):
            raw = RawH2(self.srv.port)
            raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            chunk = b"".join(make().serialize() for _ in range(1000))
            ok = True
            for _ in range(200):    # 200,000 frames, never reading the ACKs
                try:
                    raw.sock.sendall(chunk)
                except OSError:
                    ok = False
                    break
            closed = not ok or raw.closed_by_server(15)
            raw.close()
            self.assertTrue(closed, f"{name} flood: connection not cut")
            self.assertStillServing(f"{name} flood")

    def test_oversized_headers_answer_431(self):
        """A header list past --http.max-header-bytes (64 KiB) gets 431 on its
        stream; the connection keeps serving other streams."""
        c = H2Client(self.srv.port)
        try:
            big = c.request("GET", "/ready", [("x-big", "v" * 60000), ("x-big2", "w" * 10000)])
            ok = c.request("GET", "/ready")
        finally:
            c.close()
        self.assertIn(big.status, (431,), big)
        self.assertEqual(ok.status, 200)
        self.assertStillServing("oversized headers")

    def test_continuation_flood(self):
        """HEADERS without END_HEADERS, then CONTINUATION frames for ever:
        the connection is cut, memory does not follow."""
        raw = RawH2(self.srv.port)
        block = raw.enc.encode([(":method", "GET"), (":path", "/ready"), (":scheme", "http"),
                                (":authority", "x")])
        raw.send(hf.HeadersFrame(1, block))
        junk = hpack.Encoder().encode([("x-" + "a" * 10, "b" * 16000)])
        sent = 0
        for _ in range(2000):
            if not raw.send(hf.ContinuationFrame(1, junk)):
                break
            sent += 1
        self.assertTrue(raw.closed_by_server(10), "CONTINUATION flood: connection not cut")
        raw.close()
        self.assertLess(sent, 2000 + 1)
        self.assertStillServing("CONTINUATION flood")

    def test_zero_window_streams_do_not_block_others(self):
        """A client that never opens its window holds 100 streams with answers
        waiting; another connection, and the loop, carry on."""
        raw = RawH2(self.srv.port, settings={0x4: 0})    # INITIAL_WINDOW_SIZE = 0
        frames = [raw.headers(1 + 2 * i, "/metrics") for i in range(100)]
        raw.send(*frames)
        time.sleep(1)
        # Served at all is the claim (a blocked loop times out at 10 s inside);
        # how fast a busy machine answers is not.
        self.assertStillServing("zero-window streams")
        raw.close()

    def test_streams_past_the_limit_are_refused(self):
        """SETTINGS_MAX_CONCURRENT_STREAMS is 100: a client opening 300 at once
        sees the excess refused or reset, never a stalled server; a polite
        client gets all 100 answered."""
        raw = RawH2(self.srv.port)
        raw.send(*[raw.headers(1 + 2 * i, "/ready", end_stream=False) for i in range(300)])
        data = raw.drain(2)
        raw.close()
        self.assertTrue(data, "no answer at all")
        c = H2Client(self.srv.port)
        try:
            self.assertEqual(c.request("GET", "/ready").status, 200)  # SETTINGS are in now
            self.assertEqual(c.conn.remote_settings.max_concurrent_streams, 100)
            replies = c.wait([c.send("GET", "/ready") for _ in range(100)])
        finally:
            c.close()
        self.assertEqual([r.status for r in replies], [200] * 100)
        self.assertStillServing("too many streams")

    def test_body_caps(self):
        c = H2Client(self.srv.port)
        try:
            # a declared length past the cap is refused before any DATA arrives
            declared = c.wait([c.send("POST", "/" + PUSH,
                                      connect_headers() + [("content-length", str(2 << 20))], end=False)])[0]
            big = c.request("POST", "/" + PUSH, connect_headers(), b"\0" * (2 << 20))
            after = c.request("GET", "/ready")
        finally:
            c.close()
        self.assertEqual(declared.status, 413, declared)
        self.assertIn(big.status, (413,), big)
        self.assertEqual(after.status, 200)
        self.assertStillServing("body caps")

    def test_many_clients_many_streams(self):
        """20 connections x 100 streams of /ready at once: all answered."""
        errors = []

        def one():
            try:
                c = H2Client(self.srv.port)
                rs = c.wait([c.send("GET", "/ready") for _ in range(100)])
                c.close()
                if any(r.status != 200 for r in rs):
                    errors.append("status")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
        ts = [threading.Thread(target=one) for _ in range(20)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertStillServing("many streams")


class H2TenancyTest(unittest.TestCase):
    def test_tenant_header_over_h2(self):
        """Multi-tenancy reads X-Scope-OrgID from the stream's headers: none
        is 401, and each tenant sees only its own pushes."""
        srv = h.Ember(args=["--auth.multitenancy-enabled=true"])
        srv.start()
        try:
            t0 = h.now_ms()
            lv = json.dumps({"name": "service_name", "start": t0 - 3600_000, "end": t0 + 3600_000}).encode()
            c = H2Client(srv.port)
            try:
                anon = c.request("POST", "/" + PUSH, connect_headers(), push_body("t-svc", {"main": 1}, t0 * 1_000_000))
                pushed = c.request("POST", "/" + PUSH, connect_headers() + [("x-scope-orgid", "tenant-a")],
                                   push_body("t-svc", {"main": 1}, t0 * 1_000_000))
                seen_a = h.eventually(lambda: json.loads(bytes(c.request(
                    "POST", f"/{Q}/LabelValues", connect_headers("json") + [("x-scope-orgid", "tenant-a")],
                    lv).body)).get("names", []), ["t-svc"])
                seen_b = json.loads(bytes(c.request("POST", f"/{Q}/LabelValues",
                                                    connect_headers("json") + [("x-scope-orgid", "tenant-b")],
                                                    lv).body)).get("names", [])
            finally:
                c.close()
        finally:
            srv.cleanup()
        self.assertEqual(anon.status, 401, anon)
        self.assertEqual(pushed.status, 200, pushed)
        self.assertEqual(seen_a, ["t-svc"])
        self.assertEqual(seen_b, [])


class H2FlagsTest(unittest.TestCase):
    def test_h2_off_and_max_streams(self):
        srv = h.Ember(args=["--http.h2=false"])
        srv.start()
        try:
            with self.assertRaises((ConnectionError, OSError, TimeoutError)):
                c = H2Client(srv.port, timeout=5)
                c.request("GET", "/ready", timeout=5)
            self.assertEqual(srv.request("GET", "/ready").status, 200)
        finally:
            srv.cleanup()
        srv = h.Ember(args=["--http.h2-max-streams=7"])
        srv.start()
        try:
            c = H2Client(srv.port)
            self.assertEqual(c.request("GET", "/ready").status, 200)
            self.assertEqual(c.conn.remote_settings.max_concurrent_streams, 7)
            c.close()
        finally:
            srv.cleanup()


if __name__ == "__main__":
    unittest.main()
