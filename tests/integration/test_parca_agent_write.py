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
