"""Names are exact (issue 25, part 2): a NUL byte, or another byte the label
rules refuse, in a label name, a label value or a service name is refused
with 400 (invalid_argument) wherever names enter, and nothing is stored:
before, `k=a%00b` lost its label, a Push value "a\\0b" merged into the real
"a" series, a name "a\\0b" became "a", a pprof sample label became
"a\\ufffdb". The oracle for "nothing stored" is the server's own label
index, read back after a valid control profile was stored and found."""
import os
import unittest
from urllib.parse import quote

import harness as h

GOOD = "pprof/pyroscope-cpu.pprof"
OTLP = os.path.join("otlp", "otel-ebpf-profile.pb.bin")


def with_sample_label(raw, key, value):
    """The GOOD pprof with a string label key=value on every sample."""
    p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
    p.time_nanos = h.now_ms() * 1_000_000
    k, v = len(p.string_table), len(p.string_table) + 1
    p.string_table.extend([key, value])
    for s in p.sample:
        s.label.add(key=k, str=v)
    return p.SerializeToString()


class NamesExactTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = h.Ember()
        cls.srv.start()
        cls.raw = h.set_time_nanos(h.gunzip_if(h.read_testdata(GOOD)), h.now_ms() * 1_000_000)
        # a control series, so that "nothing stored" is read from a working index
        r = cls.srv.ingest("names-ok{k=a}", cls.raw, {"format": "pprof"})
        assert r.status == 200, r.describe()
        r = cls.srv.push([({"__name__": "process_cpu", "service_name": "names-ok", "k": "a"},
                           [cls.raw])])
        assert r.status == 200, r.describe()
        h.wait_for(lambda: "names-ok" in cls.srv.label_values("service_name"), timeout=20)

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()

    def assert_refused(self, r, what, says=b"invalid_argument"):
        self.assertEqual(r.status, 400, f"{what}: {r.describe()}")
        self.assertIn(says, r.body, what)

    def assert_nothing_stored(self, service):
        names = self.srv.label_values("service_name")
        self.assertNotIn(service, names)
        self.assertNotIn(service.split("\0")[0] + "\ufffd", names)
        self.assertEqual(sorted(self.srv.label_values("k")), ["a"])

    def test_ingest_query_nul_in_label_value(self):
        r = self.srv.request("POST", "/ingest?format=pprof&name=" + quote("names-q1{k=a") + "%00b}",
                             self.raw, {"Content-Type": "application/octet-stream"})
        self.assert_refused(r, "name=app{k=a%00b}")
        self.assert_nothing_stored("names-q1")

    def test_ingest_query_nul_in_service_name_and_key(self):
        for name in ("names-q2%00x{k=a}", "names-q3{k%00x=a}"):
            r = self.srv.request("POST", "/ingest?format=pprof&name=" + name, self.raw,
                                 {"Content-Type": "application/octet-stream"})
            self.assert_refused(r, name)
        self.assert_nothing_stored("names-q2")
        self.assert_nothing_stored("names-q3")

    def test_push_nul_in_label_value_and_name(self):
        for labels in ({"k": "a\0b"}, {"k\0x": "a"}, {"service_name": "names-p\0x"},
                       {"k\x01": "a"}):
            series = {"__name__": "process_cpu", "service_name": "names-p1", **labels}
            for codec in ("proto", "json"):
                self.assert_refused(self.srv.push([(series, [self.raw])], codec=codec),
                                    f"Push {labels!r} ({codec})")
        self.assert_nothing_stored("names-p1")
        self.assert_nothing_stored("names-p")

    def test_pprof_sample_label_nul(self):
        for key, value in (("k", "a\0b"), ("k\0x", "a")):
            raw = with_sample_label(self.raw, key, value)
            r = self.srv.push([({"__name__": "process_cpu", "service_name": "names-s1"}, [raw])])
            self.assert_refused(r, f"Push sample label {key!r}={value!r}")
        self.assert_nothing_stored("names-s1")

    def test_otlp_attribute_nul(self):
        raw = h.read_testdata(OTLP)
        self.assertIn(b"process.pid", raw)
        bad = raw.replace(b"process.pid", b"proc\0ss.pid")  # same length: still valid protobuf
        r = self.srv.request("POST", "/v1development/profiles", bad,
                             {"Content-Type": "application/x-protobuf"})
        # OTLP/HTTP answers a google.rpc.Status (code 3, invalid argument)
        self.assert_refused(r, "OTLP attribute key with a NUL", b"KeyValue.key: a NUL byte")
        self.assertEqual(self.srv.label_values("service_name", start=0), self.srv.label_values(
            "service_name"))  # the index still answers
        self.assertNotIn("proc", " ".join(self.srv.q("LabelNames", start=0,
                                                     end=h.now_ms() + 3600_000).names))


if __name__ == "__main__":
    unittest.main()
