"""Shared code for ember's integration tests and benchmarks.

Everything here is independent of ember's own code: protobuf classes are
generated at test time from proto/ with protoc (python3-protobuf), pprof
totals come from testdata/MANIFEST.jsonl (Go's pprof library) or from
`go tool pprof -raw`, multipart bodies are built by hand the way the real
SDKs build them (reference/real-clients.md §1, §2b).

Run with Debian's /usr/bin/python3 (python3-protobuf is only visible there).
"""
import atexit
import base64
import collections
import gzip
import http.client
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC_DIR = os.environ.get("EMBER_SRC_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
BIN_DIR = os.environ.get("EMBER_BIN_DIR") or os.path.join(SRC_DIR, "build")
TESTDATA = os.environ.get("EMBER_TESTDATA") or os.path.normpath(
    os.path.join(SRC_DIR, "..", "shared", "testdata"))
WORK_DIR = os.path.join(HERE, ".work")          # gitignored scratch (npm installs)

QUERIER = "querier.v1.QuerierService"
PUSH = "push.v1.PusherService/Push"


# ----------------------------------------------------------------- utilities

def now_ms():
    return int(time.time() * 1000)


def temp_dir(prefix):
    """A new directory under the system temp dir, removed when the test
    process exits (test files, generated modules, built helpers)."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


def free_port():
    """A port the OS reports free on 127.0.0.1 (the socket is closed again)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(fn, timeout=15.0, interval=0.1, what="condition"):
    """Calls fn until it returns a truthy value; returns it. On timeout raises
    AssertionError carrying the last value or exception."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - reported below
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


# Sampling statistics (docs/testing.md). A CPU-bound task holding a share of
# a CPU's ticks is sampled like a binomial draw, so counts and splits are
# judged with bounds of Z standard deviations, not fixed percentage bands that
# hold on an idle machine only. Z = 4.5: a false alarm about once in 150,000.
SAMPLING_Z = 4.5


def split_mismatch(k, n, p, z=SAMPLING_Z):
    """None if k of n samples is a plausible draw with probability p (e.g. the
    alpha share of a 3:1 program), else why not. Both sides burn in the same
    process, so load changes n but not p."""
    if n <= 0:
        return f"no samples to split ({k}/{n})"
    mean, sd = n * p, (n * p * (1 - p)) ** 0.5
    bound = z * sd + 1  # +1: each phase is off by at most one sample
    if abs(k - mean) <= bound:
        return None
    return f"{k}/{n} = {k / n:.3f}, want {p:.3f} +- {bound / n:.3f} ({z} sd)"


def count_mismatch(observed, expected, slack=0.0, z=SAMPLING_Z):
    """None if `observed` samples fit `expected` (CPU seconds x rate): a
    Poisson bound (the binomial's variance is below its mean) plus `slack`,
    a fraction of `expected` for a known systematic effect."""
    bound = z * max(expected, 1) ** 0.5 + slack * expected + 2
    if abs(observed - expected) <= bound:
        return None
    return f"{observed:.0f} samples, want {expected:.1f} +- {bound:.1f}"


def eventually(fn, expected, timeout=10.0, interval=0.2):
    """Polls fn() until it equals expected or the timeout passes; returns the
    last value (or exception) so the caller can assertEqual it. The writer is
    asynchronous: an acknowledged push becomes queryable shortly after."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last = fn()
        except AssertionError as e:
            last = e
        if last == expected or time.monotonic() > deadline:
            return last
        time.sleep(interval)


def read_testdata(rel):
    with open(os.path.join(TESTDATA, rel), "rb") as f:
        return f.read()


def gunzip_if(data):
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


# ------------------------------------------------------------ protobuf classes

_PB = None


class _Pb:
    """Generated modules: pb.types, pb.querier, pb.push, pb.profile."""


def pb():
    """Generates Python protobuf modules from the repo's proto/ (once per
    process). The files are copied under a private top-level package `embpb`
    because `types` and `google` clash with Python's own packages; package
    names inside the protos (hence the wire) are unchanged."""
    global _PB
    if _PB is not None:
        return _PB
    tmp = temp_dir("ember-pb-")
    src = os.path.join(tmp, "src")
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    files = []
    proto_root = os.path.join(SRC_DIR, "proto")
    for rel in ("types/v1/types.proto", "google/v1/profile.proto",
                "querier/v1/querier.proto", "push/v1/push.proto"):
        with open(os.path.join(proto_root, rel)) as f:
            text = f.read()
        text = re.sub(r'^import "([^"]+)";', r'import "embpb/\1";', text, flags=re.M)
        dst = os.path.join(src, "embpb", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w") as f:
            f.write(text)
        files.append(os.path.join("embpb", rel))
    subprocess.run(["protoc", f"--python_out={out}", f"-I{src}", *files], check=True, cwd=src)
    sys.path.insert(0, out)
    p = _Pb()
    p.types = importlib.import_module("embpb.types.v1.types_pb2")
    p.profile = importlib.import_module("embpb.google.v1.profile_pb2")
    p.querier = importlib.import_module("embpb.querier.v1.querier_pb2")
    p.push = importlib.import_module("embpb.push.v1.push_pb2")
    from google.protobuf import json_format
    p.json_format = json_format
    _PB = p
    return p


def compile_protos(*rels):
    """Python modules of some of the repo's protos that pb() does not build,
    by package name: {"debuginfo.v1alpha1": module, ...}. Imports of
    google/protobuf are protoc's own."""
    tmp = temp_dir("ember-pbx-")
    src, out = os.path.join(tmp, "src"), os.path.join(tmp, "out")
    os.makedirs(out)
    files = []
    for rel in rels:
        with open(os.path.join(SRC_DIR, "proto", rel)) as f:
            text = f.read()
        dst = os.path.join(src, "embx", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w") as f:
            f.write(text)
        files.append(os.path.join("embx", rel))
    subprocess.run(["protoc", f"--python_out={out}", f"-I{src}", f"-I{os.path.join(SRC_DIR, 'proto')}",
                    *files], check=True, cwd=src)
    sys.path.insert(0, out)
    mods = {}
    for rel in rels:
        mod = importlib.import_module("embx." + rel[:-len(".proto")].replace("/", ".") + "_pb2")
        mods[mod.DESCRIPTOR.package] = mod
    return mods


def rpc_classes(method):
    """(request class, response class) of a Connect method path."""
    p = pb()
    t, q = p.types, p.querier
    table = {
        PUSH: (p.push.PushRequest, p.push.PushResponse),
        f"{QUERIER}/ProfileTypes": (q.ProfileTypesRequest, q.ProfileTypesResponse),
        f"{QUERIER}/LabelNames": (t.LabelNamesRequest, t.LabelNamesResponse),
        f"{QUERIER}/LabelValues": (t.LabelValuesRequest, t.LabelValuesResponse),
        f"{QUERIER}/Series": (q.SeriesRequest, q.SeriesResponse),
        f"{QUERIER}/SelectMergeStacktraces": (q.SelectMergeStacktracesRequest,
                                              q.SelectMergeStacktracesResponse),
        f"{QUERIER}/SelectMergeProfile": (q.SelectMergeProfileRequest, p.profile.Profile),
        f"{QUERIER}/SelectSeries": (q.SelectSeriesRequest, q.SelectSeriesResponse),
        f"{QUERIER}/GetProfileStats": (t.GetProfileStatsRequest, t.GetProfileStatsResponse),
        f"{QUERIER}/Diff": (q.DiffRequest, q.DiffResponse),
    }
    return table[method]


# ------------------------------------------------------------------- HTTP

class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # dict, lower-case names
        self.body = body
        self.msg = None                 # decoded protobuf message (Connect, 200)
        self.json = None                # parsed JSON body if the body is JSON

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def describe(self):
        b = self.body[:400]
        try:
            b = b.decode()
        except UnicodeDecodeError:
            b = repr(b)
        return f"HTTP {self.status} {self.header('content-type')!r} body={b!r}"

    def __repr__(self):
        return f"<Response {self.describe()}>"


def _read_response(resp):
    body = resp.read()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    if headers.get("content-encoding", "").lower() == "gzip":
        body = gzip.decompress(body)
    r = Response(resp.status, headers, body)
    if "json" in headers.get("content-type", "") and body:
        try:
            r.json = json.loads(body)
        except ValueError:
            pass
    return r


def http_request(port, method, path, body=None, headers=None, timeout=60, conn=None):
    """One HTTP/1.1 request on 127.0.0.1:port (or on an open connection).
    body may be bytes or an iterable of bytes (sent chunked)."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        chunked = body is not None and not isinstance(body, (bytes, bytearray, str))
        conn.request(method, path, body=body, headers=hdrs, encode_chunked=chunked)
        return _read_response(conn.getresponse())
    finally:
        if own:
            conn.close()


# ------------------------------------------------------------------ server

def rss_kib(pid):
    """Resident memory of a process now (VmRSS), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def ember_binary():
    return os.path.join(BIN_DIR, "services", "ember", "ember")


class Ember:
    """ember as a direct child process on 127.0.0.1:<free port>."""

    def __init__(self, data_dir=None, args=(), env=None, log_level="info"):
        self.owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="ember-it-")
        self.args = list(args)
        self.env = env
        self.log_level = log_level
        self.proc = None
        self.port = None
        self.log_path = os.path.join(temp_dir("ember-it-log-"), "ember.log")
        self._log = None

    # -- lifecycle
    def start(self, args=None, timeout=20.0):
        if args is not None:
            self.args = list(args)
        binary = ember_binary()
        if not os.access(binary, os.X_OK):
            raise AssertionError(f"ember binary not found at {binary} (set EMBER_BIN_DIR to the build dir)")
        last_err = None
        for _ in range(3):      # a freed port can be taken by someone else: retry
            self.port = free_port()
            cmd = [binary, f"--http.address=127.0.0.1:{self.port}",
                   f"--data.dir={self.data_dir}", f"--log.level={self.log_level}", *self.args]
            self._log = open(self.log_path, "ab")
            self._log.write(f"\n=== {' '.join(cmd)}\n".encode())
            self._log.flush()
            env = dict(os.environ)
            env.pop("DEBUGINFOD_URLS", None)   # no test asks a public server
            env.update(self.env or {})
            self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)
            try:
                self.wait_ready(timeout)
                return self
            except AssertionError as e:
                last_err = e
                self._terminate()
        raise AssertionError(f"ember did not become ready: {last_err}\n{self.log_tail()}")

    def wait_ready(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"ember exited with {self.proc.returncode}")
            try:
                r = http_request(self.port, "GET", "/ready", timeout=2)
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("no 200 from /ready")

    def _terminate(self, timeout=20.0):
        rc = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()        # our own child, by pid
                self.proc.wait()
                rc = "killed after SIGTERM timeout"
        elif self.proc is not None:
            rc = self.proc.returncode
        if self._log:
            self._log.close()
            self._log = None
        self.proc = None
        return rc

    def stop(self, timeout=20.0):
        """SIGTERM and wait; returns the exit status (AssertionError if it had
        to be killed)."""
        rc = self._terminate(timeout)
        if rc == "killed after SIGTERM timeout":
            raise AssertionError(f"ember did not exit within {timeout}s of SIGTERM\n{self.log_tail()}")
        return rc

    def restart(self, args=None):
        self.stop()
        return self.start(args)

    def cleanup(self):
        try:
            self._terminate()
        finally:
            if self.owns_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "--- ember log (tail) ---\n" + "\n".join(lines[-n:])
        except OSError:
            return "(no log)"

    def rss_peak_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return None

    # -- HTTP
    def request(self, method, path, body=None, headers=None, timeout=60, conn=None):
        return http_request(self.port, method, path, body, headers, timeout, conn)

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    # -- Connect
    def call(self, method, req, codec="proto", headers=None, check=True, conn=None, gzip_req=False):
        """Connect unary call. req is a protobuf message (encoded with python
        protobuf, proto or proto3-JSON) or, for codec='json', a dict/str sent as
        is. On 200 the response is decoded with the generated class into
        .msg (and .json for JSON). check=True raises on non-200."""
        p = pb()
        req_cls, resp_cls = rpc_classes(method)
        hdrs = {"Content-Type": f"application/{codec}", "Connect-Protocol-Version": "1"}
        hdrs.update(headers or {})
        if codec == "proto":
            body = req.SerializeToString()
        elif isinstance(req, (dict, list)):
            body = json.dumps(req).encode()
        elif isinstance(req, (str, bytes)):
            body = req.encode() if isinstance(req, str) else req
        else:
            body = json.dumps(p.json_format.MessageToDict(req)).encode()
        if gzip_req:
            body = gzip.compress(body)
            hdrs["Content-Encoding"] = "gzip"
        r = self.request("POST", "/" + method, body, hdrs, conn=conn)
        if r.status == 200:
            ct = r.header("content-type", "")
            if not ct.startswith(f"application/{codec}"):
                raise AssertionError(f"{method}: reply content-type {ct!r} does not match request codec {codec}")
            if codec == "proto":
                r.msg = resp_cls.FromString(r.body)
            else:
                r.msg = p.json_format.ParseDict(r.json if r.json is not None else json.loads(r.body or b"{}"),
                                                resp_cls())
        elif check:
            raise AssertionError(f"{method} ({codec}) failed: {r.describe()}")
        return r

    # -- ingest
    def ingest(self, name, body, params=None, content_type=None, headers=None, path="/ingest"):
        """POST /ingest?name=...&params. body bytes (raw) or a Multipart."""
        q = {"name": name}
        q.update(params or {})
        hdrs = dict(headers or {})
        if isinstance(body, Multipart):
            hdrs["Content-Type"] = body.content_type
            body = body.body
        elif content_type:
            hdrs["Content-Type"] = content_type
        return self.request("POST", path + "?" + urlencode(q), body, hdrs)

    def push(self, series, codec="proto", headers=None, check=False):
        """Push: series = [(labels dict, [raw profile bytes, ...]), ...]."""
        p = pb()
        if codec == "proto":
            req = p.push.PushRequest()
            for labels, profiles in series:
                s = req.series.add()
                for k, v in labels.items():
                    s.labels.add(name=k, value=v)
                for raw in profiles:
                    s.samples.add(raw_profile=raw, ID=str(uuid.uuid4()))
        else:   # the JSON connect-es sends (real-clients.md §3)
            req = {"series": [{"labels": [{"name": k, "value": v} for k, v in labels.items()],
                               "samples": [{"rawProfile": base64.b64encode(raw).decode(),
                                            "ID": str(uuid.uuid4())} for raw in profiles]}
                              for labels, profiles in series]}
        return self.call(PUSH, req, codec=codec, headers=headers, check=check)

    # -- queries (proto unless codec given); start/end in ms
    def q(self, method, codec="proto", **fields):
        req_cls, _ = rpc_classes(f"{QUERIER}/{method}")
        return self.call(f"{QUERIER}/{method}", req_cls(**fields), codec=codec).msg

    def label_values(self, name, matchers=(), start=0, end=None, **kw):
        end = end if end is not None else now_ms() + 3600_000
        return list(self.q("LabelValues", name=name, matchers=list(matchers), start=start, end=end, **kw).names)

    def series_labels(self, matchers=(), label_names=(), start=0, end=None):
        end = end if end is not None else now_ms() + 3600_000
        m = self.q("Series", matchers=list(matchers), label_names=list(label_names), start=start, end=end)
        return sorted(tuple(sorted((lp.name, lp.value) for lp in ls.labels)) for ls in m.labels_set)

    def flamegraph(self, ptype, selector, start, end, codec="proto", max_nodes=0):
        m = self.q("SelectMergeStacktraces", codec=codec, profile_typeID=ptype, label_selector=selector,
                   start=start, end=end, max_nodes=max_nodes)
        return m.flamegraph

    def series_sum(self, ptype, selector, start, end, codec="proto"):
        """Sum of every point value of SelectSeries over [start, end] (ms)."""
        step = max(1.0, (end - start) / 1000.0 / 8)
        m = self.q("SelectSeries", codec=codec, profile_typeID=ptype, label_selector=selector,
                   start=start, end=end, step=step)
        return sum(pt.value for s in m.series for pt in s.points)

    def merge_profile(self, ptype, selector, start, end, codec="proto"):
        """Raw bytes of SelectMergeProfile (a pprof, as served)."""
        req_cls, _ = rpc_classes(f"{QUERIER}/SelectMergeProfile")
        r = self.call(f"{QUERIER}/SelectMergeProfile",
                      req_cls(profile_typeID=ptype, label_selector=selector, start=start, end=end),
                      codec=codec)
        return r.body if codec == "proto" else r.msg.SerializeToString()

    def metrics(self):
        r = self.request("GET", "/metrics")
        assert r.status == 200, r.describe()
        return parse_prometheus(r.body.decode())


def urlencode(q):
    from urllib.parse import quote
    return "&".join(f"{quote(str(k), safe='')}={quote(str(v), safe='')}" for k, v in q.items())


# ----------------------------------------------------------------- multipart

class Multipart:
    """multipart/form-data built by hand, byte for byte like the clients:
    style='node' = undici FormData (Node SDK <= 0.6.1), style='go' = Go's
    mime/multipart (pyroscope-go)."""

    def __init__(self, parts, style="go"):
        if style == "node":
            boundary = "----formdata-undici-0" + "".join(str(uuid.uuid4().int)[:11])
        else:
            boundary = uuid.uuid4().hex + uuid.uuid4().hex[:28]
        out = bytearray()
        for i, (field, filename, ctype, data) in enumerate(parts):
            out += (b"--" if i == 0 else b"\r\n--") + boundary.encode() + b"\r\n"
            disp = f'Content-Disposition: form-data; name="{field}"'
            if filename is not None:
                disp += f'; filename="{filename}"'
            out += disp.encode() + b"\r\n"
            if ctype:
                out += f"Content-Type: {ctype}\r\n".encode()
            out += b"\r\n" + data
        out += b"\r\n--" + boundary.encode() + b"--\r\n"
        self.body = bytes(out)
        self.content_type = f"multipart/form-data; boundary={boundary}"


def go_sdk_multipart(profile, sample_type_config=None):
    """What pyroscope-go v1.2.1 uploads (real-clients.md §2b)."""
    parts = [("profile", "profile.pprof", "application/octet-stream", profile)]
    if sample_type_config is not None:
        parts.append(("sample_type_config", "sample_type_config.json", "application/octet-stream",
                      sample_type_config))
    return Multipart(parts, style="go")


def node_sdk_multipart(profile):
    """What @pyroscope/nodejs <= 0.6.1 uploads (real-clients.md §1)."""
    return Multipart([("profile", "profile", "application/octet-stream", profile)], style="node")


# ------------------------------------------------------------------ oracle

def manifest():
    """{relative path: entry} from testdata/MANIFEST.jsonl."""
    out = {}
    with open(os.path.join(TESTDATA, "MANIFEST.jsonl")) as f:
        for line in f:
            if line.strip():
                e = json.loads(line)
                out[e["file"]] = e
    return out


def expected_totals(entry):
    """{(type, unit): total} for a MANIFEST entry."""
    return {(st["type"], st["unit"]): st["total"] for st in entry["sample_types"]}


def period_parts(entry):
    pt = entry.get("period_type") or ""
    if not pt:
        return "", ""
    t, _, u = pt.partition("/")
    return t, u


def profile_type_id(name, stype, sunit, entry):
    ptype, punit = period_parts(entry)
    return f"{name}:{stype}:{sunit}:{ptype}:{punit}"


BUILTIN_ST_CONFIG = {  # pyroscope-api.md §2.5, used when no sample_type_config is sent
    "samples": {"display-name": "cpu"},
    "goroutine": {"display-name": "goroutines"},
    "contentions": {"display-name": "mutex_count"},
    "delay": {"display-name": "mutex_duration"},
}


def ingest_metric_name(sample_types, st_config=None):
    """__name__ a pprof gets through /ingest (pyroscope-api.md §2.5)."""
    if "wall" in sample_types:
        return "wall"
    cfg = BUILTIN_ST_CONFIG if st_config is None else st_config
    for st in sample_types:
        n = cfg.get(st, {}).get("display-name") or st
        if "cpu" in n:
            return "process_cpu"
        if "alloc_" in n or "inuse_" in n or n in ("space", "objects"):
            return "memory"
        if "mutex_" in n:
            return "mutex"
        if "block_" in n:
            return "block"
        if "goroutines" in n:
            return "goroutines"
    return sample_types[-1]


def time_window_ms(time_nanos, pad_ms=2000):
    t = time_nanos // 1_000_000
    return t - pad_ms, t + pad_ms


# -------------------------------------------------------------- go tool pprof

_PPROF_TOOL = None


def pprof_tool():
    """Path of Go's pprof tool (skips the `go` wrapper). Go 1.24 and later
    ship no prebuilt pprof in GOTOOLDIR (`go tool` builds it on demand), so
    it is built once from the toolchain's own sources into a cache."""
    global _PPROF_TOOL
    if _PPROF_TOOL is None:
        tooldir = subprocess.run(["go", "env", "GOTOOLDIR"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        path = os.path.join(tooldir, "pprof")
        if not os.path.exists(path):
            version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True,
                                     check=True).stdout.strip()
            cache = os.path.join(os.path.expanduser("~"), ".cache", "ember-go-tools")
            os.makedirs(cache, exist_ok=True)
            path = os.path.join(cache, f"pprof-{version}")
            if not os.path.exists(path):
                tmp = f"{path}.{os.getpid()}"
                subprocess.run(["go", "build", "-o", tmp, "cmd/pprof"], check=True,
                               capture_output=True, timeout=600)
                os.replace(tmp, path)
        _PPROF_TOOL = path
    return _PPROF_TOOL


def pprof_raw(path):
    """Runs `pprof -raw` and parses its sample section. Returns
    {"sample_types": [(type, unit)], "totals": {(type, unit): sum},
     "samples": n, "period_type": (t, u) or None}. Raises on parse failure."""
    r = subprocess.run([pprof_tool(), "-raw", "-symbolize=none", path],
                       capture_output=True, timeout=120)
    r.stdout = r.stdout.decode(errors="replace")
    r.stderr = r.stderr.decode(errors="replace")
    if r.returncode != 0:
        raise AssertionError(f"go tool pprof -raw {path} failed ({r.returncode}): {r.stderr.strip()[:500]}")
    lines = r.stdout.splitlines()
    out = {"sample_types": [], "totals": {}, "samples": 0, "period_type": None}
    i = 0
    while i < len(lines) and lines[i].strip() != "Samples:":
        if lines[i].startswith("PeriodType:"):
            parts = lines[i].split()[1:]
            out["period_type"] = tuple(parts) if len(parts) == 2 else ("", parts[0]) if parts else None
        i += 1
    if i + 1 >= len(lines):
        raise AssertionError(f"no Samples section in pprof -raw output of {path}")
    for tok in lines[i + 1].split():
        tok = tok.replace("[dflt]", "")
        t, _, u = tok.partition("/")
        out["sample_types"].append((t, u))
    sums = [0] * len(out["sample_types"])
    pat = re.compile(r"^\s*(-?\d+(?:\s+-?\d+)*):")
    for line in lines[i + 2:]:
        if line.startswith("Locations") or line.startswith("Mappings"):
            break
        m = pat.match(line)
        if not m:
            continue          # label lines of the previous sample
        vals = [int(v) for v in m.group(1).split()]
        if len(vals) != len(sums):
            raise AssertionError(f"sample with {len(vals)} values, {len(sums)} types: {line!r}")
        for k, v in enumerate(vals):
            sums[k] += v
        out["samples"] += 1
    out["totals"] = dict(zip(out["sample_types"], sums))
    return out


# ------------------------------------------------------------- flame graphs

def decode_flamegraph(fg):
    """FlameGraph (proto message) -> list of levels of dicts
    {x (absolute), total, self, name}; checks the delta-x layout."""
    names = list(fg.names)
    levels = []
    for lvl in fg.levels:
        v = list(lvl.values)
        if len(v) % 4:
            raise AssertionError(f"level with {len(v)} values (not a multiple of 4)")
        nodes, prev_end = [], 0
        for k in range(0, len(v), 4):
            x = prev_end + v[k]
            nodes.append({"x": x, "total": v[k + 1], "self": v[k + 2], "name": names[v[k + 3]]})
            prev_end = x + v[k + 1]
        levels.append(nodes)
    return levels


def flamegraph_stacks(names, levels, width=4):
    """{root-first names: self} from a flame graph's levels (Pyroscope's
    delta-x layout); the root ("total") is left out."""
    nodes = []  # per level: (x, total, self, name, path)
    out = collections.Counter()
    for depth, vals in enumerate(levels):
        row, prev_end = [], 0
        for k in range(0, len(vals), width):
            x = prev_end + vals[k]
            total, self_, name = vals[k + 1], vals[k + 2], names[vals[k + 3]]
            prev_end = x + total
            parent = ()
            if depth:
                parent = next(n[4] for n in nodes[depth - 1] if n[0] <= x < n[0] + max(n[1], 1))
            path = parent + (name,) if depth else ()
            row.append((x, total, self_, name, path))
            if self_:
                out[path] += self_
        nodes.append(row)
    return out


def flamegraph_names(fg):
    return {n["name"] for lvl in decode_flamegraph(fg) for n in lvl}


# ------------------------------------------------------------- prometheus

def parse_prometheus(text):
    """{(name, frozenset(labels.items())): value}; raises on a malformed line."""
    out = {}
    pat = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$')
    lab = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = pat.match(line)
        if not m:
            raise AssertionError(f"malformed metrics line: {line!r}")
        labels = frozenset(lab.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


# ---------------------------------------------------------------- profiles

def set_time_nanos(raw, time_nanos):
    """Returns the pprof (gzip or plain) with time_nanos replaced, re-encoded
    by python protobuf (uncompressed)."""
    prof = pb().profile.Profile.FromString(gunzip_if(raw))
    prof.time_nanos = time_nanos
    return prof.SerializeToString()


class ServerTestCase(unittest.TestCase):
    """A test class with one ember for the whole class (self.srv)."""
    server_args = ()

    @classmethod
    def setUpClass(cls):
        cls.srv = Ember(args=cls.server_args)
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()

    def assertStatus(self, r, statuses, what=""):
        if isinstance(statuses, int):
            statuses = (statuses,)
        self.assertIn(r.status, statuses, f"{what}: expected HTTP {statuses}, got {r.describe()}")
