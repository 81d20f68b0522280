"""Parca's API on ember (parca.md §4): Parca's own published JS client
(@parca/client with @protobuf-ts/grpcweb-transport, binary and text gRPC-Web)
writes a live Go CPU profile (tests/integration/goapp's /debug/pprof/profile)
with ProfileStoreService.WriteRaw and reads it back through every
QueryService RPC. The judges are independent of ember: Go's pprof tool for
the profile's totals and for the PPROF report, apache-arrow (npm) for the
Arrow records. Bad input (malformed frames, a frame longer than the body,
invalid base64, unknown methods, invalid pprof, bad query strings) gets the
right gRPC status and stores nothing; gRPC-Web also reaches the Pyroscope
services, and Connect reaches Parca's."""
import base64
import gzip
import json
import os
import shutil
import struct
import subprocess
import unittest
import urllib.request

import harness as h
from test_scraper import GoApp

PACKAGES = ("@parca/client@0.17.24", "@protobuf-ts/grpcweb-transport@2.11.1",
            "@protobuf-ts/runtime-rpc@2.11.1", "@protobuf-ts/runtime@2.11.1",
            "apache-arrow@21.2.0", "esbuild@0.24.2")
WORK = os.path.join(h.WORK_DIR, "parca")
QS = "/parca.query.v1alpha1.QueryService"
PS = "/parca.profilestore.v1alpha1.ProfileStoreService"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta"
HOT = "main.burnCPU"


def setup_client():
    """npm install (cached in WORK) and an esbuild bundle of the client;
    raises SkipTest without registry access."""
    os.makedirs(WORK, exist_ok=True)
    stamp = os.path.join(WORK, "installed.txt")
    want = "\n".join(PACKAGES)
    have = ""
    if os.path.exists(stamp) and os.path.exists(os.path.join(WORK, "node_modules", ".bin", "esbuild")):
        with open(stamp) as f:
            have = f.read()
    if have != want:
        with open(os.path.join(WORK, "package.json"), "w") as f:
            f.write('{"name": "ember-it-parca", "private": true, "type": "module"}\n')
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *PACKAGES],
                           cwd=WORK, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise unittest.SkipTest(f"npm install of @parca/client failed (no network?): {r.stderr.strip()[-400:]}")
        with open(stamp, "w") as f:
            f.write(want)
    shutil.copy(os.path.join(h.HERE, "node", "parca_client.mjs"), WORK)
    subprocess.run([os.path.join(WORK, "node_modules", ".bin", "esbuild"), "parca_client.mjs", "--bundle",
                    "--platform=node", "--format=esm", "--log-level=error",
                    "--outfile=parca_client.bundle.mjs"], cwd=WORK, check=True, capture_output=True,
                   timeout=120)


# ---------------------------------------------------------- protobuf by hand

def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(field, data):
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def pb_int(field, v):
    return _varint(field << 3) + _varint(v)


def ts(ms):
    return pb_int(1, ms // 1000) + pb_int(2, (ms % 1000) * 1000000)


def write_raw(labels, raw):
    ls = b"".join(pb_bytes(1, pb_bytes(1, k.encode()) + pb_bytes(2, v.encode())) for k, v in labels.items())
    series = pb_bytes(1, ls) + pb_bytes(2, pb_bytes(1, raw))
    return pb_bytes(2, series)


def frame(msg, flags=0):
    return bytes([flags]) + struct.pack(">I", len(msg)) + msg


def parse_trailers(body):
    """The status of a gRPC-Web response body: (grpc-status, grpc-message)."""
    i = 0
    while i + 5 <= len(body):
        flags, n = body[i], struct.unpack(">I", body[i + 1:i + 5])[0]
        if flags & 0x80:
            fields = {}
            for line in body[i + 5:i + 5 + n].decode().split("\r\n"):
                if ":" in line:
                    k, v = line.split(":", 1)
                    fields[k.strip().lower()] = v.strip()
            return int(fields.get("grpc-status", "-1")), fields.get("grpc-message", "")
        i += 5 + n
    return None, None


class ParcaApiTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        setup_client()
        super().setUpClass()
        cls.tmp = h.temp_dir("ember-parca-")
        app = GoApp()
        try:
            url = f"http://127.0.0.1:{app.port}/debug/pprof/profile?seconds=2"
            with urllib.request.urlopen(url, timeout=30) as r:
                cls.raw = r.read()
        finally:
            app.stop()
        cls.pprof_path = os.path.join(cls.tmp, "live.cpu.pb.gz")
        with open(cls.pprof_path, "wb") as f:
            f.write(cls.raw)
        oracle = h.pprof_raw(cls.pprof_path)
        cls.total = oracle["totals"][("cpu", "nanoseconds")]
        prof = h.pb().profile.Profile()
        prof.ParseFromString(gzip.decompress(cls.raw))
        cls.time_ms = prof.time_nanos // 1000000
        cls.start_ms, cls.end_ms = cls.time_ms - 60000, cls.time_ms + 60000
        cls.results = {}

    def run_client(self, fmt):
        if fmt in self.results:
            return self.results[fmt]
        plan = {"format": fmt, "pprof": self.pprof_path,
                "labels": {"__name__": "process_cpu", "job": "parca-it", "instance": fmt},
                "query": f'{CPU}{{instance="{fmt}"}}', "diff_base": f'{CPU}{{instance="{fmt}"}}',
                "start_ms": self.start_ms, "end_ms": self.end_ms, "time_ms": self.time_ms,
                "values_label": "instance", "filter_function": HOT,
                "pprof_out": os.path.join(self.tmp, f"answer-{fmt}.pb.gz")}
        path = os.path.join(self.tmp, f"plan-{fmt}.json")
        with open(path, "w") as f:
            json.dump(plan, f)
        r = subprocess.run(["node", os.path.join(WORK, "parca_client.bundle.mjs"),
                            f"http://127.0.0.1:{self.srv.port}/api", path],
                           capture_output=True, text=True, timeout=180, cwd=WORK)
        self.assertEqual(r.returncode, 0, f"@parca/client ({fmt}) failed:\n{r.stderr[-3000:]}\n{self.srv.log_tail()}")
        out = json.loads(r.stdout)
        self.results[fmt] = (out, plan)
        return out, plan

    def check_client(self, fmt):
        out, plan = self.run_client(fmt)
        total = self.total
        self.assertTrue(out["write"]["ok"], out["write"])
        self.assertIn(CPU, out["profile_types"])
        self.assertIn("process_cpu:samples:count:cpu:nanoseconds:delta", out["profile_types"])
        self.assertIn("job", out["labels"])
        self.assertIn("instance", out["labels"])
        self.assertFalse([n for n in out["labels"] if n.startswith("__")], out["labels"])
        self.assertIn(fmt, out["values"])
        self.assertIs(out["has_data"], True)
        # QueryRange: one series for the instance, its values summing to the profile's total
        self.assertEqual(len(out["query_range"]), 1, out["query_range"])
        self.assertEqual(out["query_range"][0]["sum"], total)
        # PPROF: Go's pprof reads it, with the same total
        self.assertEqual(out["pprof"]["total"], total)
        answer = h.pprof_raw(plan["pprof_out"])
        self.assertEqual(answer["totals"], {("cpu", "nanoseconds"): total})
        # TOP / FLAMEGRAPH_TABLE / CALLGRAPH: self values add up to the total
        self.assertEqual(out["top"]["flat_sum"], total)
        self.assertEqual(out["top"]["total"], total)
        self.assertEqual(out["top"]["unit"], "nanoseconds")
        self.assertIn(HOT, out["top"]["names"])
        self.assertEqual(out["flamegraph"]["root"], total)
        self.assertEqual(out["flamegraph"]["self_sum"], total)
        self.assertIn(HOT, out["flamegraph"]["names"])
        self.assertEqual(out["callgraph"]["flat_sum"], total)
        self.assertGreater(out["callgraph"]["edges"], 0)
        # Arrow records, decoded by apache-arrow
        fa = out["flamegraph_arrow"]
        self.assertEqual(int(fa["first_cumulative"]), total)
        self.assertEqual(int(fa["flat_sum"]), total)
        self.assertEqual(int(fa["root_children_sum"]), total)
        self.assertTrue(fa["tree_consistent"])
        self.assertIn(HOT, fa["function_names"])
        for col in ("mapping_file", "function_name", "children", "parent", "cumulative", "flat", "diff", "depth"):
            self.assertIn(col, fa["columns"])
        tr = out["flamegraph_arrow_trimmed"]
        self.assertLessEqual(tr["rows"], fa["rows"])
        self.assertEqual(int(tr["first_cumulative"]), total)
        self.assertGreater(tr["trimmed"], 0)
        self.assertEqual(int(tr["flat_sum"]) + tr["trimmed"], total)  # kept self + cut subtrees
        ta = out["table_arrow"]
        self.assertEqual(int(ta["flat_sum"]), total)
        self.assertIn(HOT, ta["function_names"])
        # filter_query keeps the stacks through the hot function, the rest is "filtered"
        self.assertEqual(out["filtered"]["total"] + out["filtered"]["filtered"], total)
        self.assertGreater(out["filtered"]["total"], 0)
        # single at the profile's own millisecond; diff of a selection with itself
        self.assertEqual(out["single"]["root"], total)
        self.assertEqual(out["diff"], {"root": total, "diff": 0})
        self.assertFalse(out["bad_query"]["ok"])
        self.assertEqual(out["bad_query"]["code"], "INVALID_ARGUMENT")

    def test_01_binary_grpc_web(self):
        self.check_client("binary")

    def test_02_text_grpc_web(self):
        self.check_client("text")

    # ------------------------------------------------------------ bad input

    def grpc_web(self, path, body, text=False, headers=None):
        hd = {"content-type": "application/grpc-web-text" if text else "application/grpc-web+proto"}
        hd.update(headers or {})
        r = self.srv.request("POST", path, base64.b64encode(body) if text else body, hd)
        self.assertEqual(r.status, 200, r.describe())
        data = base64.b64decode(r.body) if text else r.body
        return parse_trailers(data)

    def assert_nothing_stored(self, instance):
        req = pb_bytes(1, b"instance") + pb_bytes(3, ts(self.start_ms)) + pb_bytes(4, ts(self.end_ms))
        r = self.srv.request("POST", f"{QS}/Values", frame(req), {"content-type": "application/grpc-web+proto"})
        self.assertEqual(parse_trailers(r.body)[0], 0)
        self.assertNotIn(instance.encode(), r.body)

    def test_03_malformed_frames(self):
        q = frame(b"")
        code, msg = self.grpc_web(f"{QS}/HasProfileData", q[:3])
        self.assertEqual(code, 3, msg)
        code, msg = self.grpc_web(f"{QS}/HasProfileData", b"\x00\x00\x00\x00\x09\x08")
        self.assertEqual(code, 3, msg)
        self.assertIn("promises 9 bytes", msg)
        code, msg = self.grpc_web(f"{QS}/HasProfileData", q + q)
        self.assertEqual(code, 3, msg)
        code, msg = self.grpc_web(f"{QS}/HasProfileData", b"\x01\x00\x00\x00\x01x")
        self.assertEqual(code, 12, msg)  # compressed without grpc-encoding
        r = self.srv.request("POST", f"{QS}/HasProfileData", b"AA*A=",
                             {"content-type": "application/grpc-web-text"})
        self.assertEqual(parse_trailers(base64.b64decode(r.body))[0], 3)
        r = self.srv.request("POST", f"{QS}/HasProfileData", b"AAAA!AAA",
                             {"content-type": "application/grpc-web-text"})
        self.assertEqual(parse_trailers(base64.b64decode(r.body))[0], 3)
        # gzip-compressed frames with grpc-encoding: gzip are inflated
        code, _ = self.grpc_web(f"{QS}/HasProfileData", frame(gzip.compress(b""), 1),
                                headers={"grpc-encoding": "gzip"})
        self.assertEqual(code, 0)

    def test_04_unknown_methods(self):
        # Write is bidirectional: over gRPC-Web it cannot be served (unimplemented, said so)
        for path in (f"{QS}/NoSuchMethod", f"/api{QS}/NoSuchMethod", f"{QS}/Series", f"{PS}/Write",
                     f"/api{PS}/NoSuchMethod"):
            code, msg = self.grpc_web(path, frame(b""))
            self.assertEqual(code, 12, f"{path}: {msg}")
        # native gRPC: Trailers-Only (grpc-status in the headers)
        r = self.srv.request("POST", f"{QS}/NoSuchMethod", frame(b""), {"content-type": "application/grpc"})
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("grpc-status"), "12")

    def test_05_invalid_writes_store_nothing(self):
        code, msg = self.grpc_web(f"{PS}/WriteRaw", frame(write_raw(
            {"__name__": "process_cpu", "instance": "bad-pprof"}, b"\x0a\xff\xff garbage")))
        self.assertEqual(code, 3, msg)
        code, msg = self.grpc_web(f"/api{PS}/WriteRaw", frame(write_raw(
            {"instance": "no-name"}, self.raw)), text=True)
        self.assertEqual(code, 3, msg)
        self.assertIn("__name__", msg)
        code, msg = self.grpc_web(f"{PS}/WriteRaw", frame(b"\x12\x03\x0a\x01"))  # truncated message
        self.assertEqual(code, 3, msg)
        self.assert_nothing_stored("bad-pprof")
        self.assert_nothing_stored("no-name")

    def test_06_bad_query_strings(self):
        def qr(query, start=True):
            body = pb_bytes(1, query.encode())
            if start:
                body += pb_bytes(2, ts(self.start_ms)) + pb_bytes(3, ts(self.end_ms))
            return self.grpc_web(f"{QS}/QueryRange", frame(body))
        for q in ("process_cpu:cpu:nanoseconds", "a:b:c:d:e:notdelta", "a:b:c:d:e:delta:x",
                  '{job="x"}', f"{CPU}{{job=", 'a"b:c:d:e:f'):
            code, msg = qr(q)
            self.assertEqual(code, 3, f"{q}: {msg}")
        code, msg = qr(CPU, start=False)
        self.assertEqual(code, 3, msg)
        code, msg = qr(f'{CPU}{{job="nobody-writes-this"}}')
        self.assertEqual(code, 5, msg)  # Parca's NotFound for no data
        merge = pb_bytes(1, b"bad") + pb_bytes(2, ts(self.start_ms)) + pb_bytes(3, ts(self.end_ms))
        code, msg = self.grpc_web(f"{QS}/Query", frame(pb_int(1, 2) + pb_bytes(3, merge) + pb_int(5, 5)))
        self.assertEqual(code, 3, msg)
        code, msg = self.grpc_web(f"{QS}/Query", frame(pb_int(1, 2) + pb_int(5, 5)))
        self.assertEqual(code, 3, msg)  # merge mode without merge options

    def test_07_every_connect_route_speaks_grpc_web_and_connect_reaches_parca(self):
        # Pyroscope's querier over gRPC-Web (binary): ProfileTypes answers OK
        code, msg = self.grpc_web("/querier.v1.QuerierService/ProfileTypes", frame(b""))
        self.assertEqual(code, 0, msg)
        # Parca's HasProfileData over Connect (application/proto)
        r = self.srv.request("POST", f"{QS}/HasProfileData", b"", {"content-type": "application/proto"})
        self.assertEqual(r.status, 200, r.describe())


if __name__ == "__main__":
    unittest.main()
