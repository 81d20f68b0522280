"""Native gRPC over HTTP/1.1 (issue 29) and gRPC answers for methods ember
does not serve (issue 28).

The HTTP/1.1 answers are read from raw sockets and taken apart here, per
RFC 9112 §7.1 (chunk-size lines in hex, the last chunk "0", the trailer
section, the empty line), independently of ember's code and of any HTTP
library: a success must be chunked with `grpc-status: 0` in its trailers and
the message, decoded with the generated Python classes, equal to the same
call over Connect; an error is Trailers-Only (grpc-status in the headers, no
body); a gRPC call of an unknown path is HTTP 200 with grpc-status 12, over
HTTP/1.1 and h2c, never a 404 with JSON.

Then a Go program (tests/integration/grpcclient: connect-go v1.19.2 and
Pyroscope's published API module github.com/grafana/pyroscope/api v1.6.0,
from the Go module proxy, pinned by go.sum) calls Push and every
querier.v1.QuerierService RPC with each protocol (Connect, gRPC, gRPC-Web)
over HTTP/1.1 and h2c, checking every answer against the profile it pushed;
then status.v1.StatusService (build info; the configuration as YAML, parsed,
holding the settings ember was started with) and capabilities.v1.
Without a Go toolchain or the module proxy that part skips.
"""
import base64
import os
import socket
import struct
import subprocess
import unittest

import harness as h
import sdk_util as su
from h2client import H2Client
from test_connect_rpcs import cpu_profile

Q = "querier.v1.QuerierService"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PARCA_UNSERVED = "/parca.share.v1alpha1.ShareService/Upload"  # a Parca service ember does not serve


# ------------------------------------------------ an independent HTTP/1.1 reader

class Http1Response:
    def __init__(self):
        self.status = None
        self.version = None
        self.headers = []     # (lower-case name, value) in order
        self.trailers = []
        self.body = b""
        self.chunk_sizes = []  # sizes of the data chunks, in order

    def header(self, name):
        vals = [v for n, v in self.headers if n == name]
        return vals[0] if len(vals) == 1 else (None if not vals else vals)


class Reader:
    """Reads HTTP/1.1 responses off a socket, one at a time."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            raise AssertionError(f"connection closed mid-response; have {self.buf[:200]!r}")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exactly(self, n):
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def fields(self):
        """Field lines up to the empty line (RFC 9112 §5)."""
        out = []
        while True:
            line = self.line()
            if line == b"":
                return out
            name, sep, value = line.partition(b":")
            assert sep and name == name.strip() and name, f"malformed field line {line!r}"
            out.append((name.decode().lower(), value.strip(b" \t").decode()))

    def response(self):
        r = Http1Response()
        version, status, _ = self.line().decode().split(" ", 2)
        r.version, r.status = version, int(status)
        r.headers = self.fields()
        te = r.header("transfer-encoding")
        if te is not None:
            assert te.lower() == "chunked", f"transfer-encoding {te!r}"
            assert r.header("content-length") is None, "Content-Length beside chunked"
            self._chunked_body(r)
        else:
            r.body = self.exactly(int(r.header("content-length")))
        return r

    def _chunked_body(self, r):
        """chunked-body = *chunk last-chunk trailer-section CRLF (RFC 9112 §7.1)."""
        while True:
            size_line = self.line()
            size_text = size_line.split(b";", 1)[0].strip()
            assert size_text and all(c in b"0123456789abcdefABCDEF" for c in size_text), size_line
            size = int(size_text, 16)
            if size == 0:
                break
            r.chunk_sizes.append(size)
            r.body += self.exactly(size)
            assert self.exactly(2) == b"\r\n", "chunk data not followed by CRLF"
        r.trailers = self.fields()


def raw_request(method, path, headers, body=b"", version="HTTP/1.1"):
    lines = [f"{method} {path} {version}", "Host: 127.0.0.1"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def frame(msg, flags=0):
    return struct.pack(">BI", flags, len(msg)) + msg


def unframe(body):
    """[(flags, bytes)] of a gRPC body; the frames must fill it exactly."""
    out, i = [], 0
    while i < len(body):
        assert i + 5 <= len(body), f"truncated frame header at {i}"
        flags, n = struct.unpack(">BI", body[i:i + 5])
        assert i + 5 + n <= len(body), f"frame of {n} bytes past the body"
        out.append((flags, body[i + 5:i + 5 + n]))
        i += 5 + n
    return out


def grpc_web_trailers(payload):
    lines = payload.decode().split("\r\n")
    assert lines[-1] == "", f"trailer frame not CRLF-terminated: {payload!r}"
    return dict(line.split(": ", 1) for line in lines[:-1])


class GrpcHttp1Test(h.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.t0 = h.now_ms()
        cls.srv.push([({"service_name": "grpc-h1", "__name__": "process_cpu"},
                       [cpu_profile({"main;a;b": 3, "main;c": 2}, (cls.t0 - 1000) * 1_000_000)])],
                     check=True)

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)
        self.addCleanup(s.close)
        return s, Reader(s)

    def requests(self):
        """(method, request message) pairs of the query API over the pushed data."""
        start, end = self.t0 - 3600_000, self.t0 + 3600_000
        out = []
        for method, fields in (
                ("ProfileTypes", dict(start=start, end=end)),
                ("LabelValues", dict(name="service_name", start=start, end=end)),
                ("SelectMergeStacktraces", dict(profile_typeID=CPU, label_selector='{service_name="grpc-h1"}',
                                                start=start, end=end))):
            req_cls, _ = h.rpc_classes(f"{Q}/{method}")
            out.append((method, req_cls(**fields)))
        return out

    def test_success_is_chunked_with_grpc_status_trailer(self):
        sock, rd = self.connect()
        calls = self.requests()
        # all three pipelined on one connection: each answer must end exactly
        # where the chunked framing says, or the next one would not parse
        sock.sendall(b"".join(
            raw_request("POST", f"/{Q}/{m}", {"Content-Type": "application/grpc", "TE": "trailers"},
                        frame(req.SerializeToString())) for m, req in calls))
        for method, req in calls:
            with self.subTest(method=method):
                r = rd.response()
                self.assertEqual((r.version, r.status), ("HTTP/1.1", 200))
                self.assertEqual(r.header("transfer-encoding"), "chunked")
                self.assertEqual(r.header("content-type"), "application/grpc+proto")
                self.assertIsNone(r.header("grpc-status"), "grpc-status belongs in the trailers")
                self.assertEqual(r.trailers, [("grpc-status", "0")])
                frames = unframe(r.body)
                self.assertEqual([f for f, _ in frames], [0])
                _, resp_cls = h.rpc_classes(f"{Q}/{method}")
                got = resp_cls.FromString(frames[0][1])
                self.assertEqual(got, self.srv.call(f"{Q}/{method}", req).msg)
        self.assertEqual(rd.buf, b"", "bytes after the last answer")
        # the connection is still usable: keep-alive survived the chunked answers
        sock.sendall(raw_request("GET", "/ready", {}))
        self.assertEqual(rd.response().status, 200)

    def test_push_over_http1_grpc(self):
        raw = cpu_profile({"main;x;y": 4}, (self.t0 - 500) * 1_000_000)
        p = h.pb()
        req = p.push.PushRequest()
        s = req.series.add()
        for k, v in (("__name__", "process_cpu"), ("service_name", "grpc-h1-push")):
            s.labels.add(name=k, value=v)
        s.samples.add(raw_profile=raw)
        sock, rd = self.connect()
        sock.sendall(raw_request("POST", "/push.v1.PusherService/Push",
                                 {"Content-Type": "application/grpc+proto"}, frame(req.SerializeToString())))
        r = rd.response()
        self.assertEqual((r.status, r.header("transfer-encoding")), (200, "chunked"))
        self.assertEqual(r.trailers, [("grpc-status", "0")])
        self.assertEqual([f for f, _ in unframe(r.body)], [0])
        total = self.srv.series_sum(CPU, '{service_name="grpc-h1-push"}', self.t0 - 3600_000,
                                    self.t0 + 3600_000)
        self.assertEqual(total, 4 * 10_000_000)

    def test_error_is_trailers_only(self):
        sock, rd = self.connect()
        # a frame promising 100 bytes with 3 behind it: invalid_argument (3)
        bad = struct.pack(">BI", 0, 100) + b"abc"
        sock.sendall(raw_request("POST", f"/{Q}/ProfileTypes", {"Content-Type": "application/grpc"}, bad))
        r = rd.response()
        self.assertEqual(r.status, 200)
        self.assertIsNone(r.header("transfer-encoding"))
        self.assertEqual(r.header("content-length"), "0")
        self.assertEqual(r.header("grpc-status"), "3")
        self.assertTrue(r.header("grpc-message"))
        self.assertEqual((r.body, r.trailers), (b"", []))

    def test_http10_client_gets_no_chunks(self):
        # HTTP/1.0 has no chunked coding: the trailers cannot be sent (documented)
        sock, rd = self.connect()
        method, req = self.requests()[0]
        sock.sendall(raw_request("POST", f"/{Q}/{method}", {"Content-Type": "application/grpc"},
                                 frame(req.SerializeToString()), version="HTTP/1.0"))
        r = rd.response()
        self.assertEqual(r.status, 200)
        self.assertIsNone(r.header("transfer-encoding"))
        self.assertEqual(int(r.header("content-length")), len(r.body))

    def test_unknown_method_is_unimplemented_over_http1(self):
        for path in (PARCA_UNSERVED, "/nope.v1.NopeService/Call", f"/{Q}/NoSuchMethod"):
            for ct in ("application/grpc", "application/grpc+proto", "application/grpc-web+proto",
                       "application/grpc-web-text"):
                with self.subTest(path=path, content_type=ct):
                    sock, rd = self.connect()
                    sock.sendall(raw_request("POST", path, {"Content-Type": ct}, frame(b"")))
                    r = rd.response()
                    self.assertEqual(r.status, 200)
                    self.assertTrue(r.header("content-type").startswith(ct.split("+")[0]))
                    if ct.startswith("application/grpc-web"):
                        body = base64.b64decode(r.body) if "text" in ct else r.body
                        frames = unframe(body)
                        self.assertEqual([f for f, _ in frames], [0x80])
                        self.assertEqual(grpc_web_trailers(frames[0][1])["grpc-status"], "12")
                    else:
                        self.assertEqual((r.header("grpc-status"), r.body), ("12", b""))
                        self.assertIn(path.encode(), r.header("grpc-message").encode())
        # other protocols keep the JSON 404
        sock, rd = self.connect()
        sock.sendall(raw_request("POST", PARCA_UNSERVED, {"Content-Type": "application/proto"}))
        r = rd.response()
        self.assertEqual((r.status, r.header("content-type")), (404, "application/json"))

    def test_unknown_method_is_unimplemented_over_h2(self):
        c = H2Client(self.srv.port)
        self.addCleanup(c.close)
        for ct in ("application/grpc", "application/grpc-web+proto"):
            with self.subTest(content_type=ct):
                r = c.request("POST", PARCA_UNSERVED, [("content-type", ct), ("te", "trailers")],
                              frame(b""))
                self.assertEqual(r.status, 200)
                if ct == "application/grpc":
                    self.assertEqual((r.header("grpc-status"), bytes(r.body)), ("12", b""))
                else:
                    frames = unframe(bytes(r.body))
                    self.assertEqual(grpc_web_trailers(frames[0][1])["grpc-status"], "12")
        # and a served method over h2 still carries its status in HTTP/2 trailers
        method, req = self.requests()[0]
        r = c.request("POST", f"/{Q}/{method}", [("content-type", "application/grpc")],
                      frame(req.SerializeToString()))
        self.assertEqual((r.status, r.trailers.get("grpc-status")), (200, "0"))


class GoConnectClientTest(h.ServerTestCase):
    """connect-go + github.com/grafana/pyroscope/api: three protocols, two transports."""

    @staticmethod
    def build():
        go = su.newest_go()
        if not go:
            raise unittest.SkipTest("no Go toolchain on this machine")
        out = os.path.join(su.cache_dir("go"), "grpcclient")
        env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
        r = subprocess.run([go, "build", "-o", out, "."], cwd=os.path.join(h.HERE, "grpcclient"),
                           env=env, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            unreachable = "dial tcp" in r.stderr or "no such host" in r.stderr
            if unreachable and not os.environ.get("CI"):
                raise unittest.SkipTest(f"no Go module proxy: {r.stderr[-300:]}")
            raise AssertionError(f"go build grpcclient failed:\n{r.stderr[-3000:]}")
        return out

    def test_every_rpc_every_protocol(self):
        binary = self.build()
        # settings ember was started with, not its defaults: status.v1's config must show them
        started = f"http.address=127.0.0.1:{self.srv.port},data.dir={self.srv.data_dir}"
        r = subprocess.run([binary, "-url", f"http://127.0.0.1:{self.srv.port}", "-flags", started],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, f"{r.stdout[-4000:]}\n{r.stderr[-2000:]}\n{self.srv.log_tail()}")
        self.assertIn("0 failed", r.stdout)


if __name__ == "__main__":
    unittest.main()
