"""ProfileStoreService/WriteArrow (issue 28): the real Parca Agent's captured
pushes (tests/fixtures/parca-agent/v2, one WriteArrowRequest each) replayed
as the agent sends them (native gRPC over h2c) into a running ember, then read
back through Pyroscope's querier (SelectMergeStacktraces, ProfileTypes) and
Parca's QueryService (a merged pprof, judged by `go tool pprof -raw`).

The oracle is fixtures.json: totals computed from the same bytes with pyarrow
when the capture was made (tests/manual/parca_arrow_totals.py), and the
burner's function address ranges from `nm`; the agent does not symbolize
native frames, so a burner frame comes back as "burner+0x<address>" and is
named here by those ranges, independently of ember. Bad input (a cut stream,
a v1 record, a record of the wrong shape) must get a gRPC error and store
nothing."""
import collections
import json
import os
import random
import struct
import subprocess
import unittest

import harness as h
from h2client import H2Client
from test_parca_api import pb_bytes, pb_int, ts
from test_sdk_java import fields

FIXTURES = os.path.join(h.HERE, "..", "fixtures", "parca-agent")
PS = "/parca.profilestore.v1alpha1.ProfileStoreService"
QS = "/parca.query.v1alpha1.QueryService"
PTYPE = "parca_agent:samples:count:cpu:nanoseconds"


def fixture(mode, name):
    with open(os.path.join(FIXTURES, mode, name), "rb") as f:
        return f.read()


def meta():
    with open(os.path.join(FIXTURES, "fixtures.json")) as f:
        return json.load(f)


def grpc(srv, method, msg):
    """One unary call over h2c: (grpc-status, grpc-message, response bytes)."""
    c = H2Client(srv.port)
    try:
        r = c.request("POST", f"{PS}/{method}",
                      [("content-type", "application/grpc"), ("te", "trailers")],
                      b"\x00" + struct.pack(">I", len(msg)) + msg)
    finally:
        c.close()
    assert r.status == 200, r
    status = r.trailers.get("grpc-status", r.headers.get("grpc-status"))
    message = r.trailers.get("grpc-message", r.headers.get("grpc-message", ""))
    return int(status), message, bytes(r.body[5:])


def query_response_pprof(body):
    """QueryResponse.pprof (field 6, bytes); None if absent."""
    return dict(fields(body)).get(6)


def burner_function(frame, symbols):
    """The nm name of a "burner+0x<addr>" frame, else None."""
    if not frame.startswith("burner+0x"):
        return None
    addr = int(frame[len("burner+0x"):], 16)
    for name, (lo, hi) in symbols.items():
        if lo <= addr < hi:
            return name
    return None


class WriteArrowFixtures(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.meta = meta()["v2"]
        started = cls.meta["run"]["started"]
        import datetime
        t0 = int(datetime.datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp() * 1000)
        cls.start_ms, cls.end_ms = t0 - 3600_000, t0 + 3600_000
        cls.replies = [grpc(cls.srv, "WriteArrow", fixture("v2", name)) for name in cls.meta["files"]]

    def burner_leaf_totals(self, stacks):
        """{function: value} by innermost burner frame; stacks root first."""
        symbols = self.meta["burner_symbols"]
        out = collections.Counter()
        for path, value in stacks.items():
            names = [burner_function(f, symbols) for f in path]
            inner = [n for n in names if n]
            out[inner[-1] if inner else None] += value
        return dict(out)

    def test_01_every_push_is_acknowledged(self):
        for name, (code, msg, body) in zip(self.meta["files"], self.replies):
            self.assertEqual(code, 0, f"{name}: {msg}\n{self.srv.log_tail()}")
            self.assertEqual(body, b"")  # WriteArrowResponse {}

    def test_02_profile_types_list_the_agents(self):
        m = self.srv.q("ProfileTypes", start=self.start_ms, end=self.end_ms)
        self.assertIn(PTYPE, [t.ID for t in m.profile_types])

    def test_03_pyroscope_totals_match_pyarrow(self):
        fg = self.srv.flamegraph(PTYPE, "{}", self.start_ms, self.end_ms)
        rows = sum(m["value_sum"] for m in self.meta["pyarrow"]["messages"])
        self.assertEqual(fg.total, rows)
        burner = self.meta["pyarrow"]["burner"]
        fg = self.srv.flamegraph(PTYPE, '{service_name="burner"}', self.start_ms, self.end_ms)
        self.assertEqual(fg.total, burner["value_total"])
        stacks = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
        self.assertEqual(self.burner_leaf_totals(stacks), burner["per_innermost_burner_function"])
        # libc's unsymbolized frames between main and _start, as the capture has them
        libc = {";".join(st.split(";")[2:4]) for st in burner["per_stack"]}
        tails = {";".join(reversed(p[-5:])) for p in stacks}
        for t in tails:
            self.assertIn(";".join(t.split(";")[2:4]), libc, t)

    def test_04_labels_are_kept(self):
        names = self.srv.label_values("comm", start=self.start_ms, end=self.end_ms)
        self.assertIn("burner", names)
        self.assertIn("capture", self.srv.label_values("node", start=self.start_ms, end=self.end_ms))

    def test_05_parca_query_service_totals_match_pyarrow(self):
        burner = self.meta["pyarrow"]["burner"]
        merge = (pb_bytes(1, f'{PTYPE}:delta{{comm="burner"}}'.encode()) +
                 pb_bytes(2, ts(self.start_ms)) + pb_bytes(3, ts(self.end_ms)))
        req = pb_int(1, 2) + pb_bytes(3, merge) + pb_int(5, 1)  # MODE_MERGE, REPORT_TYPE_PPROF
        r = self.srv.request("POST", f"{QS}/Query", req, {"content-type": "application/proto"})
        self.assertEqual(r.status, 200, r.describe())
        raw = query_response_pprof(r.body)
        self.assertIsNotNone(raw, "no pprof in QueryResponse")
        path = os.path.join(h.temp_dir("ember-parca-agent-"), "merged.pb")
        with open(path, "wb") as f:
            f.write(h.gunzip_if(raw))
        judged = h.pprof_raw(path)
        self.assertEqual(sum(judged["totals"].values()), burner["value_total"])
        p = h.pb().profile.Profile()
        p.ParseFromString(h.gunzip_if(raw))
        strings, maps = list(p.string_table), {m.id: m for m in p.mapping}
        locs = {l.id: l for l in p.location}
        symbols = self.meta["burner_symbols"]
        per = collections.Counter()
        for s in p.sample:
            fn = None
            for lid in s.location_id:  # leaf first: the first burner frame
                loc = locs[lid]
                if strings[maps[loc.mapping_id].filename] == "burner":
                    fn = burner_function(f"burner+0x{loc.address:x}", symbols)
                    break
            per[fn] += s.value[0]
        self.assertEqual(dict(per), burner["per_innermost_burner_function"])

    # ------------------------------------------------------------ bad input

    def assert_nothing_stored(self, comm):
        self.assertNotIn(comm, self.srv.label_values("comm", start=0))

    def test_06_bad_input_is_refused_and_stores_nothing(self):
        before = self.srv.flamegraph(PTYPE, "{}", self.start_ms, self.end_ms).total
        req = fixture("v2", self.meta["files"][0])
        n = req[1] & 0x7F | (req[2] & 0x7F) << 7 | (req[3] & 0x7F) << 14
        stream = req[4:4 + n]
        for cut in (8, len(stream) // 2, len(stream) - 9):
            code, msg, _ = grpc(self.srv, "WriteArrow", pb_bytes(1, stream[:cut]))
            self.assertEqual(code, 3, f"cut at {cut}: {msg}")
            self.assertIn("arrow", msg)
        # a v1 samples record is not WriteArrow's
        code, msg, _ = grpc(self.srv, "WriteArrow", fixture("v1", "write-000-0.bin"))
        self.assertEqual(code, 3, msg)
        self.assertIn("v1", msg)
        # the v1 stacktrace record: no labels column
        code, msg, _ = grpc(self.srv, "WriteArrow", fixture("v1", "write-000-1.bin"))
        self.assertEqual(code, 3, msg)
        # not even protobuf
        code, msg, _ = grpc(self.srv, "WriteArrow", b"\x0a\xff\xff\xff\x0f")
        self.assertEqual(code, 3, msg)
        after = self.srv.flamegraph(PTYPE, "{}", self.start_ms, self.end_ms).total
        self.assertEqual(after, before)


def write_v1(srv, first, second, path=f"{PS}/Write"):
    """The agent's Write exchange over h2c, as parca_reporter.go does it: the
    samples record, read ember's answer (the ids it asks for) with the stream
    still open, then the stack trace record, and read until ember ends the
    call. first and second are WriteRequest messages. Returns (grpc-status,
    grpc-message, the asked-for record)."""
    c = H2Client(srv.port)
    try:
        hdrs = [("content-type", "application/grpc"), ("te", "trailers")]
        grpc_frame = lambda m: b"\x00" + struct.pack(">I", len(m)) + m
        sid = c.send("POST", path, hdrs, grpc_frame(first), end=False)
        r = c.replies[sid]
        while not r.done and (len(r.body) < 5 or len(r.body) < 5 + struct.unpack(">I", r.body[1:5])[0]):
            c._read_once()
        asked = None
        if len(r.body) >= 5:
            asked = dict(fields(bytes(r.body[5:5 + struct.unpack(">I", r.body[1:5])[0]]))).get(1, b"")
        if not r.done:
            c._send_body(sid, grpc_frame(second), False)
            c.wait([sid])
    finally:
        c.close()
    status = r.trailers.get("grpc-status", r.headers.get("grpc-status"))
    return int(status), r.trailers.get("grpc-message", r.headers.get("grpc-message", "")), asked


class WriteV1Fixtures(h.ServerTestCase):
    """ProfileStoreService/Write (the agent's v1 schema): the captured
    exchanges replayed as the agent makes them; totals against pyarrow's."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.meta = meta()["v1"]
        cls.pushes = sorted({f.rsplit("-", 1)[0] for f in cls.meta["files"]})
        cls.replies = [write_v1(cls.srv, fixture("v1", f"{p}-0.bin"), fixture("v1", f"{p}-1.bin"))
                       for p in cls.pushes]

    def test_01_every_call_ends_ok_after_asking_for_the_stacks(self):
        import test_arrow_ipc
        py = test_arrow_ipc.python_with_pyarrow()
        for p, (code, msg, asked) in zip(self.pushes, self.replies):
            self.assertEqual(code, 0, f"{p}: {msg}\n{self.srv.log_tail()}")
            self.assertTrue(asked, p)
            # pyarrow: ember asked for exactly the distinct ids of the samples record
            d = h.temp_dir("ember-parca-v1-")
            with open(os.path.join(d, "asked.arrows"), "wb") as f:
                f.write(asked)
            with open(os.path.join(d, "samples.arrows"), "wb") as f:
                f.write(dict(fields(fixture("v1", f"{p}-0.bin")))[1])
            r = subprocess.run([py, "-c", ASKED_CHECK, d], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_02_totals_match_pyarrow_through_both_apis(self):
        burner = self.meta["pyarrow"]["burner"]
        start, end = 0, h.now_ms() + 3600_000
        fg = self.srv.flamegraph(PTYPE, "{}", start, end)
        self.assertEqual(fg.total, sum(m["value_sum"] or 0 for m in self.meta["pyarrow"]["messages"]))
        fg = self.srv.flamegraph(PTYPE, '{service_name="burner"}', start, end)
        self.assertEqual(fg.total, burner["value_total"])
        stacks = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
        per = collections.Counter()
        for path, v in stacks.items():
            inner = [n for n in (burner_function(f, self.meta["burner_symbols"]) for f in path) if n]
            per[inner[-1] if inner else None] += v
        self.assertEqual(dict(per), burner["per_innermost_burner_function"])
        merge = (pb_bytes(1, f'{PTYPE}:delta{{comm="burner"}}'.encode()) + pb_bytes(2, ts(1)) +
                 pb_bytes(3, ts(end)))
        r = self.srv.request("POST", f"{QS}/Query", pb_int(1, 2) + pb_bytes(3, merge) + pb_int(5, 1),
                             {"content-type": "application/proto"})
        self.assertEqual(r.status, 200, r.describe())
        path = os.path.join(h.temp_dir("ember-parca-v1-"), "merged.pb")
        with open(path, "wb") as f:
            f.write(h.gunzip_if(query_response_pprof(r.body)))
        self.assertEqual(sum(h.pprof_raw(path)["totals"].values()), burner["value_total"])

    def test_03_unary_transports_and_bad_streams_store_nothing(self):
        before = self.srv.flamegraph(PTYPE, "{}", 0, h.now_ms() + 3600_000).total
        first = fixture("v1", "write-000-0.bin")
        # gRPC-Web cannot answer mid-call: unimplemented, said so
        r = self.srv.request("POST", f"/api{PS}/Write", b"\x00" + struct.pack(">I", len(first)) + first,
                             {"content-type": "application/grpc-web+proto"})
        self.assertIn(b"grpc-status:12", r.body.replace(b" ", b""))
        # the stack trace record missing an asked id (an empty record), a v2 record as samples
        empty = dict(fields(fixture("v1", "write-000-1.bin")))[1]
        code, msg, _ = write_v1(self.srv, first, pb_bytes(1, empty[:len(empty) // 2]))
        self.assertEqual(code, 3, msg)
        code, msg, asked = write_v1(self.srv, fixture("v2", meta()["v2"]["files"][0]), b"")
        self.assertEqual(code, 3, msg)
        # a client that resets the stream once asked, and one that ends it instead of answering
        c = H2Client(self.srv.port)
        try:
            hdrs = [("content-type", "application/grpc"), ("te", "trailers")]
            body = b"\x00" + struct.pack(">I", len(first)) + first
            sid = c.send("POST", f"{PS}/Write", hdrs, body, end=False)
            while len(c.replies[sid].body) < 5:
                c._read_once()
            c.conn.reset_stream(sid)
            c.flush()
            sid = c.send("POST", f"{PS}/Write", hdrs, body, end=False)
            while len(c.replies[sid].body) < 5:
                c._read_once()
            c.conn.end_stream(sid)
            c.flush()
            (r,) = c.wait([sid])
            self.assertEqual(r.trailers.get("grpc-status"), "3", r)
        finally:
            c.close()
        self.assertEqual(self.srv.flamegraph(PTYPE, "{}", 0, h.now_ms() + 3600_000).total, before)


class WriteV1BodyCap(unittest.TestCase):
    """A Write whose stack trace record passes the body cap after ember asked
    for it: a gRPC error in the trailers (not an HTTP error body), nothing stored."""

    def test_cap_passed_mid_call(self):
        first = fixture("v1", "write-000-0.bin")
        srv = h.Ember(args=[f"--http.max-body-bytes={len(first) + 4096}"])
        srv.start()
        try:
            code, msg, asked = write_v1(srv, first, fixture("v1", "write-000-1.bin"))
            self.assertTrue(asked)
            self.assertNotEqual(code, 0, msg)
            self.assertIn("413", msg)
            self.assertEqual(srv.flamegraph(PTYPE, "{}", 0, h.now_ms() + 3600_000).total, 0)
        finally:
            srv.cleanup()


# pyarrow's reading: the asked record is one binary column stacktrace_id with
# the samples record's distinct ids, each once
ASKED_CHECK = """
import sys, pyarrow as pa
d = sys.argv[1]
asked = pa.ipc.open_stream(open(d + "/asked.arrows", "rb").read()).read_all()
assert asked.schema.names == ["stacktrace_id"], asked.schema
assert asked.schema.field(0).type == pa.binary(), asked.schema
got = asked.column(0).to_pylist()
samples = pa.ipc.open_stream(open(d + "/samples.arrows", "rb").read()).read_all()
col = samples.column("stacktrace_id")
ids = set()
for chunk in col.chunks:
    ids.update(chunk.values.dictionary_decode().to_pylist() if hasattr(chunk.values, "dictionary_decode") else chunk.values.to_pylist())
assert len(got) == len(set(got)), "asked twice"
assert set(got) == ids, (len(got), len(ids))
print(len(got), "ids")
"""


class WriteArrowOtherProtocols(h.ServerTestCase):
    """The same unary call over gRPC-Web (under /api, as Parca serves it) and
    Connect: stored alike."""

    def test_grpc_web_and_connect(self):
        m = meta()["v2"]
        body = fixture("v2", m["files"][0])
        r = self.srv.request("POST", f"/api{PS}/WriteArrow", b"\x00" + struct.pack(">I", len(body)) + body,
                             {"content-type": "application/grpc-web+proto"})
        self.assertEqual(r.status, 200, r.describe())
        self.assertIn(b"grpc-status:0", r.body.replace(b" ", b""))
        r = self.srv.request("POST", f"{PS}/WriteArrow", fixture("v2", m["files"][1]),
                             {"content-type": "application/proto"})
        self.assertEqual(r.status, 200, r.describe())
        start = h.now_ms() - 10 * 365 * 86400_000
        fg = self.srv.flamegraph(PTYPE, "{}", start, h.now_ms() + 3600_000)
        self.assertEqual(fg.total, sum(x["value_sum"] for x in m["pyarrow"]["messages"][:2]))


class WriteArrowGenerated(h.ServerTestCase):
    """Property: random v2 requests written by pyarrow (parca_write_gen.py)
    come back, per service, with the generator's total and per-stack sums."""

    def test_random_requests_sum_as_generated(self):
        import test_arrow_ipc
        py = test_arrow_ipc.python_with_pyarrow()
        seed = random.randrange(1 << 30)
        out = h.temp_dir("ember-parca-gen-")
        r = subprocess.run([py, os.path.join(h.HERE, "parca_write_gen.py"), out, str(seed), "12"],
                           capture_output=True, text=True, timeout=600, cwd=h.HERE)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "expected.json")) as f:
            want = json.load(f)
        for i in range(want["count"]):
            with open(os.path.join(out, f"req-{i:03d}.arrows"), "rb") as f:
                code, msg, _ = grpc(self.srv, "WriteArrow", pb_bytes(1, f.read()))
            self.assertEqual(code, 0, f"seed {seed} request {i}: {msg}")
        now_ms = want["now_ns"] // 10**6
        self.check_bad_requests(py, out)
        for service, w in want["services"].items():
            if service.startswith("bad_"):
                continue
            fg = self.srv.flamegraph(PTYPE, f'{{service_name="{service}"}}', now_ms - 600_000,
                                     now_ms + 60_000)
            self.assertEqual(fg.total, w["total"], f"seed {seed} service {service}")
            stacks = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
            got = {";".join(p): v for p, v in stacks.items()}
            self.assertEqual(got, w["stacks"], f"seed {seed} service {service}")


    def check_bad_requests(self, py, out):
        """NUL in a label, a string `value`, no `stacktrace`, a null timestamp:
        invalid_argument, and none of their comm values stored."""
        r = subprocess.run([py, os.path.join(h.HERE, "parca_write_gen.py"), "bad", out],
                           capture_output=True, text=True, timeout=600, cwd=h.HERE)
        self.assertEqual(r.returncode, 0, r.stderr)
        cases = json.loads(r.stdout)
        for what in cases:
            with open(os.path.join(out, f"bad-{what}.arrows"), "rb") as f:
                code, msg, _ = grpc(self.srv, "WriteArrow", pb_bytes(1, f.read()))
            self.assertEqual(code, 3, f"{what}: {msg}")
            self.assertIn("nothing was stored", msg, what)
        stored = self.srv.label_values("comm", start=0, end=h.now_ms() + 3600_000)
        self.assertFalse([c for c in stored if c.startswith("bad_")], stored)


if __name__ == "__main__":
    unittest.main()
