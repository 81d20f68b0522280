"""OTLP profiles ingest (opentelemetry.proto.collector.profiles.v1development).

Regression fixture: ../shared/testdata/otlp/otel-ebpf-profile.pb.bin (and its
protobuf-JSON twin), an ExportProfilesServiceRequest from the OTel eBPF
profiler, with the expected CPU profile beside it
(otel-ebpf-profile-cpu.out.json, Pyroscope's own answer). It is sent over
OTLP/HTTP (binary and JSON), Connect, and native gRPC over h2c; the merged
process_cpu profile read back is compared stack by stack with the expected
file, and the per-type totals with what the fixture holds (computed here
from the fixture's JSON with Python, not by ember).

Bad input: wrong content type (415), garbage (400), no dictionary (400), each
answered with a google.rpc.Status as OTLP/HTTP specifies, and a
request with one broken profile among good ones: 200 with partial_success
counting the broken one, the good ones stored."""
import collections
import json
import os
import unittest

import harness as h
from h2client import H2Client

EXPORT = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
HTTP_PATH = "/v1development/profiles"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
OFF_CPU = "off_cpu:off_cpu:nanoseconds::"
T_START, T_END = 1774910000000, 1774911000000   # ms around the fixture's profiles


def fixture(name):
    return h.read_testdata(os.path.join("otlp", name))


def expected_cpu_stacks():
    """{(leaf..root function names): value} from Pyroscope's expected output."""
    d = json.loads(fixture("otel-ebpf-profile-cpu.out.json"))
    out = collections.Counter()
    for s in d["samples"]:
        names = tuple(loc["lines"][0].split("[")[0] for loc in s["locations"])
        out[names] += int(s["values"])
    return out


def fixture_totals():
    """Per profile type: the sum the fixture carries (samples x period for CPU,
    summed values for off-CPU), from its protobuf JSON."""
    d = json.loads(fixture("otel-ebpf-profile.pb.json"))
    st = d["dictionary"]["stringTable"]
    tot = collections.Counter()
    for rp in d["resourceProfiles"]:
        for sp in rp["scopeProfiles"]:
            for p in sp["profiles"]:
                t = st[p["sampleType"].get("typeStrindex", 0)]
                for s in p["samples"]:
                    vals = [int(v) for v in s.get("values", [])]
                    n = sum(vals) if vals else len(s.get("timestampsUnixNano", []))
                    if t == "samples":
                        tot[CPU] += n * int(p["period"])
                    else:
                        tot[OFF_CPU] += n
    return tot


def fixture_offcpu_stacks():
    """Off-CPU value by stack (root-first frame names) from the fixture's
    JSON: a location's lines outermost first, and a location without lines
    (the eBPF profiler's unsymbolized native frames) named as issue 31 says:
    basename(file)+0x<address - start + file offset>. Also {file base name:
    GNU build id} of the mappings of those locations."""
    d = json.loads(fixture("otel-ebpf-profile.pb.json"))
    dic = d["dictionary"]
    st, at = dic["stringTable"], dic["attributeTable"]
    locs, maps, fns = dic["locationTable"], dic["mappingTable"], dic["functionTable"]
    build_ids = {}

    def frames(loc):
        if loc.get("lines"):
            return [st[fns[l.get("functionIndex", 0)].get("nameStrindex", 0)] for l in reversed(loc["lines"])]
        m = maps[loc.get("mappingIndex", 0)]
        base = os.path.basename(st[m.get("filenameStrindex", 0)])
        for k in m.get("attributeIndices", []):
            if st[at[k].get("keyStrindex", 0)] == "process.executable.build_id.gnu":
                build_ids[base] = at[k]["value"]["stringValue"]
        off = int(loc.get("address", "0")) - int(m.get("memoryStart", "0")) + int(m.get("fileOffset", "0"))
        return [f"{base}+0x{off:x}"]

    stacks = collections.Counter()
    for rp in d["resourceProfiles"]:
        for sp in rp["scopeProfiles"]:
            for p in sp["profiles"]:
                if st[p["sampleType"].get("typeStrindex", 0)] != "off_cpu":
                    continue
                for smp in p["samples"]:
                    ids = dic["stackTable"][smp.get("stackIndex", 0)].get("locationIndices", [])
                    names = [n for i in reversed(ids) for n in frames(locs[i])]
                    stacks[tuple(names)] += sum(int(v) for v in smp.get("values", []))
    return stacks, build_ids


def merged_stacks(srv, ptype):
    raw = srv.merge_profile(ptype, "{}", T_START, T_END)
    p = h.pb().profile.Profile.FromString(raw)
    fn = {f.id: p.string_table[f.name] for f in p.function}
    loc = {l.id: [fn[line.function_id] for line in l.line] for l in p.location}
    out = collections.Counter()
    for s in p.sample:
        names = tuple(n for lid in s.location_id for n in loc[lid])
        out[names] += s.value[0]
    return out


class OtlpFixtureTest(unittest.TestCase):
    def run_server(self, send):
        srv = h.Ember()
        srv.start()
        self.addCleanup(srv.cleanup)
        r = send(srv)
        self.assertEqual(r[0], 200, r)
        return srv

    def check_fixture(self, srv):
        got = h.eventually(lambda: merged_stacks(srv, CPU), expected_cpu_stacks())
        self.assertEqual(got, expected_cpu_stacks())
        tot = fixture_totals()
        self.assertEqual(srv.series_sum(CPU, "{}", T_START, T_END), tot[CPU])
        self.assertEqual(srv.series_sum(OFF_CPU, "{}", T_START, T_END), tot[OFF_CPU])
        metrics = srv.request("GET", "/metrics").body.decode()
        self.assertRegex(metrics, r'ember_ingest_profiles_total\{route="otlp"\} [1-9]')
        names = srv.label_values("service_name", start=T_START, end=T_END)
        self.assertIn("unknown_service:containerd", names)  # process.executable.name fallback
        self.assertIn("unknown_service", names)

    def test_otlp_http_protobuf(self):
        srv = self.run_server(lambda s: (lambda r: (r.status, r.header("content-type"), r.body))(
            s.request("POST", HTTP_PATH, fixture("otel-ebpf-profile.pb.bin"),
                      {"Content-Type": "application/x-protobuf"})))
        self.check_fixture(srv)

    def test_unsymbolized_frames_named_module_offset(self):
        """The fixture's native frames without lines (libc, glib, ...) show
        in the off-CPU flame graph as module+0xoffset, stack by stack, and
        the merged pprof keeps them as locations with their mapping's file
        and GNU build id, no line."""
        srv = self.run_server(lambda s: (lambda r: (r.status, r.body))(
            s.request("POST", HTTP_PATH, fixture("otel-ebpf-profile.pb.bin"),
                      {"Content-Type": "application/x-protobuf"})))
        want, build_ids = fixture_offcpu_stacks()
        self.assertTrue(any("+0x" in n for st in want for n in st))  # the fixture has some
        total = fixture_totals()[OFF_CPU]
        h.wait_for(lambda: srv.flamegraph(OFF_CPU, "{}", T_START, T_END).total == total,
                   timeout=20, what="the fixture to be queryable")
        fg = srv.flamegraph(OFF_CPU, "{}", T_START, T_END)
        got = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
        self.assertEqual(got, want)
        p = h.pb().profile.Profile.FromString(srv.merge_profile(OFF_CPU, "{}", T_START, T_END))
        maps = {m.id: m for m in p.mapping}
        seen = {}
        for loc in p.location:
            if not loc.line and loc.mapping_id in maps:
                m = maps[loc.mapping_id]
                seen[os.path.basename(p.string_table[m.filename])] = p.string_table[m.build_id]
        self.assertEqual(seen, build_ids)

    def test_otlp_http_json(self):
        srv = self.run_server(lambda s: (lambda r: (r.status, r.body))(
            s.request("POST", HTTP_PATH, fixture("otel-ebpf-profile.pb.json"),
                      {"Content-Type": "application/json"})))
        self.check_fixture(srv)

    def test_connect_export(self):
        srv = self.run_server(lambda s: (lambda r: (r.status, r.body))(
            s.request("POST", EXPORT, fixture("otel-ebpf-profile.pb.bin"),
                      {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})))
        self.check_fixture(srv)

    def test_grpc_export_over_h2c(self):
        """Native gRPC: a 5-byte-framed message over h2c, grpc-status 0 in
        the trailers."""
        body = fixture("otel-ebpf-profile.pb.bin")
        frame = b"\x00" + len(body).to_bytes(4, "big") + body

        def send(srv):
            c = H2Client(srv.port)
            try:
                r = c.request("POST", EXPORT, [("content-type", "application/grpc"), ("te", "trailers")], frame)
            finally:
                c.close()
            status = r.trailers.get("grpc-status", r.headers.get("grpc-status"))
            if r.status == 200 and status != "0":
                return (500, r)
            return (r.status, r)
        srv = self.run_server(send)
        self.check_fixture(srv)


def rpc_status(body):
    """(code, message) of a protobuf google.rpc.Status, read field by field
    from the wire format (1: varint code, 2: string message)."""
    code, msg, i = 0, "", 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = body[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(body):
        key = varint()
        if key == 0x08:
            code = varint()
        elif key == 0x12:
            n = varint()
            msg, i = body[i:i + n].decode(), i + n
        else:
            raise AssertionError(f"unexpected field key {key} in Status")
    return code, msg


class OtlpBadInputTest(h.ServerTestCase):
    def test_content_type_and_garbage(self):
        """Errors as OTLP/HTTP answers them: a google.rpc.Status in the
        request's encoding, code 3 (INVALID_ARGUMENT) with HTTP 400/415."""
        r = self.srv.request("POST", HTTP_PATH, b"x", {"Content-Type": "text/plain"})
        self.assertEqual(r.status, 415, r.describe())
        r = self.srv.request("POST", HTTP_PATH, b"\xff\xff\xff", {"Content-Type": "application/x-protobuf"})
        self.assertEqual(r.status, 400, r.describe())
        self.assertEqual(r.header("content-type"), "application/x-protobuf")
        code, msg = rpc_status(r.body)
        self.assertEqual(code, 3)
        self.assertIn("invalid protobuf", msg)
        r = self.srv.request("POST", HTTP_PATH, b"{}", {"Content-Type": "application/json"})
        self.assertEqual(r.status, 400, r.describe())
        self.assertEqual(r.header("content-type"), "application/json")
        st = json.loads(r.body)
        self.assertEqual(st["code"], 3)
        self.assertIn("dictionary", st["message"])

    def test_partial_success(self):
        """Two profiles, one pointing at a stack that does not exist: the good
        one is stored, partial_success.rejected_profiles is 1."""
        good = {"sampleType": {"typeStrindex": 1, "unitStrindex": 2}, "timeUnixNano": "1774910500000000000",
                "samples": [{"stackIndex": 1, "values": ["7"]}]}
        bad = {"sampleType": {"typeStrindex": 1, "unitStrindex": 2}, "timeUnixNano": "1774910500000000000",
               "samples": [{"stackIndex": 99, "values": ["5"]}]}
        req = {"dictionary": {"stringTable": ["", "off_cpu", "nanoseconds", "main", "svc-p"],
                              "mappingTable": [{}], "functionTable": [{}, {"nameStrindex": 3}],
                              "locationTable": [{}, {"lines": [{"functionIndex": 1}]}],
                              "stackTable": [{}, {"locationIndices": [1]}]},
               "resourceProfiles": [{"resource": {"attributes": [
                   {"key": "service.name", "value": {"stringValue": "svc-p"}}]},
                   "scopeProfiles": [{"profiles": [good, bad]}]}]}
        r = self.srv.request("POST", HTTP_PATH, json.dumps(req).encode(), {"Content-Type": "application/json"})
        self.assertEqual(r.status, 200, r.describe())
        resp = json.loads(r.body)
        self.assertEqual(int(resp["partialSuccess"]["rejectedProfiles"]), 1, resp)
        self.assertIn("stack_index", resp["partialSuccess"]["errorMessage"])
        total = h.eventually(lambda: self.srv.series_sum(OFF_CPU, '{service_name="svc-p"}', T_START, T_END), 7)
        self.assertEqual(total, 7)


if __name__ == "__main__":
    unittest.main()
