"""Shared code of the live SDK tests (test_sdk_*.py): a recording proxy that
sits between an SDK and ember, and the oracle built from what it recorded.

The oracle never asks ember: every captured upload is decoded here (multipart
by Python's email parser, Push by the project's protos, pprof by `go tool pprof
-raw`; JFR uploads are judged by the JDK's own `jfr` reader in
test_sdk_java.py), and the totals per profile type are summed over uploads.
"""
import email.parser
import email.policy
import gzip
import http.client
import http.server
import json
import os
import shutil  # noqa: F401 (used by the tests via su.shutil)
import subprocess
import tempfile
import threading
import time
import unittest
from urllib.parse import parse_qs, urlsplit

import harness as h

SDK_DIR = os.path.join(h.HERE, "sdk")
# builds and installs, kept between runs and between clones on one machine
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "ember-sdk")


def cache_dir(lang):
    d = os.path.join(CACHE, lang)
    os.makedirs(d, exist_ok=True)
    return d


def python_with(name, package, version):
    """A venv under cache_dir(name) (Debian's python3) with package==version
    from PyPI, reused while its stamp says that version; skips the test when
    pip cannot install it (no registry)."""
    venv = os.path.join(cache_dir(name), "venv")
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".installed")
    if os.path.exists(stamp) and open(stamp).read().strip() == version:
        return py
    if not os.path.exists(py):
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True, capture_output=True)
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"{package}=={version}"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise unittest.SkipTest(f"pip install {package} failed: {r.stderr[-400:]}")
    with open(stamp, "w") as f:
        f.write(version)
    return py


# ----------------------------------------------------------------- proxy

class Upload:
    def __init__(self, path, query, headers, body, status, answer=b""):
        self.path, self.query, self.headers, self.body, self.status = path, query, headers, body, status
        self.answer = answer   # ember's response body

    def param(self, k, default=""):
        return self.query.get(k, [default])[0]

    def parts(self):
        """{field: bytes} of a multipart body ({} for a raw one)."""
        ct = self.headers.get("content-type", "")
        if "multipart/form-data" not in ct:
            return {}
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ct.encode() + b"\r\n\r\n" + self.body)
        out = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            out.setdefault(name, part.get_payload(decode=True))
        return out


class RecordingProxy:
    """HTTP on 127.0.0.1 that forwards every request to ember and keeps a
    copy of each POST with ember's answer."""

    def __init__(self, upstream_port):
        self.uploads = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _body(self):
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = bytearray()   # the Java agent's HTTP client streams its uploads
                    while True:
                        line = self.rfile.readline()
                        if not line:
                            return None   # the client died mid-upload (a JVM exiting)
                        size = int(line.split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return bytes(out)
                        chunk = self.rfile.read(size)
                        if len(chunk) < size:
                            return None
                        out += chunk
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                return body if len(body) == n else None

            def _forward(self):
                body = self._body()
                if body is None:
                    self.close_connection = True
                    return      # not forwarded: ember never saw a whole request
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("host", "content-length", "connection",
                                             "transfer-encoding")}
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
                if self.command == "POST":
                    u = urlsplit(self.path)
                    with proxy.lock:
                        proxy.uploads.append(Upload(u.path, parse_qs(u.query),
                                                    {k.lower(): v for k, v in self.headers.items()},
                                                    body, resp.status, data))
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_POST = do_GET = do_PUT = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def ingests(self):
        with self.lock:
            return [u for u in self.uploads if u.path.endswith("/ingest")]


# ----------------------------------------------------------------- oracle

def pprof_totals(raw):
    """pprof -raw of one profile (bytes, gzip or not)."""
    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
        f.write(raw)
        f.flush()
        return h.pprof_raw(f.name)


def service_of(name):
    return name.split("{", 1)[0]


def expected_from_pprof_uploads(uploads):
    """{(service, profile type id): total} over the captured pprof uploads
    (multipart `profile` part, optional sample_type_config), named as
    Pyroscope names them (pyroscope-api.md §2.5, harness.ingest_metric_name)."""
    out = {}
    for u in uploads:
        if u.status != 200:
            raise AssertionError(f"ember refused an SDK upload: {u.status} {u.answer[:300]!r}")
        parts = u.parts()
        prof = parts.get("profile") if parts else u.body
        if not prof:
            continue
        cfg = parts.get("sample_type_config")
        cfg = json.loads(cfg) if cfg else None
        r = pprof_totals(prof)
        types = [t for t, _ in r["sample_types"]]
        metric = h.ingest_metric_name(types, cfg)
        pt, pu = r["period_type"] or ("", "")
        for (t, unit), total in r["totals"].items():
            key = (service_of(u.param("name")), f"{metric}:{t}:{unit}:{pt}:{pu}")
            out[key] = out.get(key, 0) + total
    return out


def ember_totals(srv, service, ptypes, window):
    sel = '{service_name="%s"}' % service
    return {p: srv.series_sum(p, sel, *window) for p in ptypes}


def wait_totals(srv, service, expected, window, timeout=30):
    """ember's totals per profile type once they stop changing (or match)."""
    last = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = ember_totals(srv, service, expected, window)
        if got == expected:
            return got
        if got == last:
            time.sleep(0.5)
        last = got
        time.sleep(0.5)
    return last


def top_self(srv, ptype, service, window, skip=()):
    """The function with the largest self value of ember's merged profile, by
    go tool pprof on SelectMergeProfile's bytes (a leaf frame of a function in
    `skip` counts for its caller)."""
    import test_ingest_jfr as tj   # pprof_self lives there
    raw = srv.merge_profile(ptype, '{service_name="%s"}' % service, *window)
    with tempfile.NamedTemporaryFile(suffix=".pb") as f:
        f.write(raw)
        f.flush()
        flat, _ = tj.pprof_self(f.name, skip)
    return max(flat, key=flat.get) if flat else None


def run(cmd, cwd=None, env=None, timeout=600, what=""):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise AssertionError(f"{what or cmd[0]} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return r


def newest_go():
    """Go's newest toolchain on the machine (Debian's older golang-go may
    come first on PATH)."""
    for cand in ("/usr/local/go/bin/go", shutil.which("go")):
        if cand and os.path.exists(cand):
            return cand
    return None


def push_series(upload):
    """[(labels dict, [raw profile bytes])] of a captured Push (proto codec,
    body gzip or not)."""
    body = upload.body
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    if upload.headers.get("content-type", "").startswith("application/json"):
        raise AssertionError("JSON Push not decoded here")
    req = h.pb().push.PushRequest.FromString(body)
    return [({lp.name: lp.value for lp in s.labels}, [x.raw_profile for x in s.samples])
            for s in req.series]


def expected_from_push_uploads(uploads):
    """{(service_name, profile type id): total} over captured Push calls;
    __name__ is the series label, the rest of the id comes from the pprof."""
    out = {}
    for u in uploads:
        if u.status != 200:
            raise AssertionError(f"ember refused an SDK push: {u.status} {u.answer[:300]!r}")
        for labels, raws in push_series(u):
            for raw in raws:
                r = pprof_totals(raw)
                pt, pu = r["period_type"] or ("", "")
                for (t, unit), total in r["totals"].items():
                    key = (labels.get("service_name", ""),
                           f"{labels.get('__name__', '')}:{t}:{unit}:{pt}:{pu}")
                    out[key] = out.get(key, 0) + total
    return out


def expected_from_uploads(proxy, service):
    """{profile type id: total} that `service` sent, whichever way (Push or
    pprof through /ingest)."""
    pushes = [u for u in proxy.uploads if u.path.endswith("/Push")]
    ingests = [u for u in proxy.uploads if u.path.endswith("/ingest")]
    exp = expected_from_push_uploads(pushes)
    exp.update(expected_from_pprof_uploads(ingests))
    return {p: v for (svc, p), v in exp.items() if svc == service}


# ----------------------------------------------------------------- the case

class SdkProgramCase(h.ServerTestCase):
    """One SDK program run against ember through a RecordingProxy: command()
    builds or installs it and returns its argv; it runs for `seconds` as app
    `app`; `window` covers the run with a minute on each side."""
    app = None
    what = None
    seconds = 6

    @classmethod
    def command(cls):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        argv = cls.command()
        super().setUpClass()
        cls.proxy = RecordingProxy(cls.srv.port)
        t0 = h.now_ms()
        env = dict(os.environ, SDK_APP=cls.app, SDK_URL=cls.proxy.url,
                   SDK_SECONDS=str(cls.seconds))
        run(argv, env=env, timeout=120, what=cls.what)
        cls.window = (t0 - 60_000, h.now_ms() + 60_000)

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        super().tearDownClass()
