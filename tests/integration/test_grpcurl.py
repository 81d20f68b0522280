"""grpcurl (github.com/fullstorydev/grpcurl, Go's gRPC client, built from the
module proxy into ~/.cache/ember-test-tools/bin) calls ember over h2c with the
repo's own .proto files: querier.v1.QuerierService queries give the same
messages as the same calls over Connect (HTTP/1.1), and push.v1.PusherService/Push
stores what it sends (the CPU total is read back and compared with the
hand-made profile's). Without the module proxy the test skips."""
import base64
import json
import os
import shutil
import subprocess
import unittest
import uuid

import harness as h
from test_connect_rpcs import cpu_profile

GRPCURL_VERSION = "v1.9.4"
TOOLS = os.path.join(os.path.expanduser("~"), ".cache", "ember-test-tools", "bin")
GRPCURL = os.path.join(TOOLS, "grpcurl")
Q = "querier.v1.QuerierService"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PERIOD_NS = 10_000_000


def build_grpcurl():
    go = "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else shutil.which("go")
    if os.access(GRPCURL, os.X_OK) and go:
        r = subprocess.run([go, "version", "-m", GRPCURL], capture_output=True, text=True)
        if GRPCURL_VERSION in r.stdout:
            return GRPCURL
    if not go:
        raise unittest.SkipTest("no Go toolchain")
    env = dict(os.environ, GOBIN=TOOLS, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    r = subprocess.run([go, "install", f"github.com/fullstorydev/grpcurl/cmd/grpcurl@{GRPCURL_VERSION}"],
                       env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise unittest.SkipTest(f"cannot build grpcurl (no module proxy?): {r.stderr[-500:]}")
    return GRPCURL


class GrpcurlTest(h.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.grpcurl = build_grpcurl()
        super().setUpClass()
        cls.t0 = h.now_ms()
        cls.srv.push([({"service_name": "grpcurl-a", "__name__": "process_cpu"},
                       [cpu_profile({"main;a;b": 3, "main;c": 2}, (cls.t0 - 1000) * 1_000_000)])], check=True)

    def grpcurl_call(self, method, req, proto):
        r = subprocess.run([self.grpcurl, "-plaintext", "-import-path", os.path.join(h.SRC_DIR, "proto"),
                            "-proto", proto, "-d", json.dumps(req), f"127.0.0.1:{self.srv.port}", method],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"grpcurl {method}: {r.stderr}")
        return json.loads(r.stdout or "{}")

    def test_querier_same_as_connect(self):
        from google.protobuf import json_format
        start, end = self.t0 - 3600_000, self.t0 + 3600_000
        calls = [("LabelNames", {"start": start, "end": end}),
                 ("LabelValues", {"name": "service_name", "start": start, "end": end}),
                 ("ProfileTypes", {"start": start, "end": end}),
                 ("SelectMergeStacktraces", {"profile_typeID": CPU, "label_selector": "{}",
                                             "start": start, "end": end}),
                 ("SelectSeries", {"profile_typeID": CPU, "label_selector": "{}", "start": start,
                                   "end": end, "step": 60})]
        for method, req in calls:
            req_cls, resp_cls = h.rpc_classes(f"{Q}/{method}")
            got = json_format.ParseDict(self.grpcurl_call(f"{Q}/{method}", req, "querier/v1/querier.proto"),
                                        resp_cls())
            want = self.srv.call(f"{Q}/{method}", json_format.ParseDict(req, req_cls())).msg
            with self.subTest(method=method):
                self.assertEqual(got, want)
        lv = self.grpcurl_call(f"{Q}/LabelValues", calls[1][1], "querier/v1/querier.proto")
        self.assertIn("grpcurl-a", lv["names"])

    def test_push(self):
        svc = "grpcurl-push-" + uuid.uuid4().hex[:6]
        raw = cpu_profile({"main;x;y": 4}, (self.t0 - 500) * 1_000_000)
        req = {"series": [{"labels": [{"name": "service_name", "value": svc}, {"name": "__name__", "value": "process_cpu"}],
                           "samples": [{"rawProfile": base64.b64encode(raw).decode(), "ID": str(uuid.uuid4())}]}]}
        self.grpcurl_call("push.v1.PusherService/Push", req, "push/v1/push.proto")
        total = h.eventually(lambda: self.srv.series_sum(CPU, f'{{service_name="{svc}"}}',
                                                         self.t0 - 3600_000, self.t0 + 3600_000), 4 * PERIOD_NS)
        self.assertEqual(total, 4 * PERIOD_NS)


if __name__ == "__main__":
    unittest.main()
