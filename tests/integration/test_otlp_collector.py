"""A real OTLP exporter in front of ember: an OpenTelemetry Collector v0.165.0
built from the Go module proxy (otelcol/main.go: OTLP receiver, OTLP gRPC and
OTLP HTTP exporters, profiles behind --feature-gates=service.profilesSupport)
relays profiles that a Python program encodes with opentelemetry-proto 1.45.2
from PyPI (otelcol/send_profiles.py). Two runs: the collector's gRPC exporter
(native gRPC over h2c, the Go gRPC client) and its OTLP/HTTP exporter.

The sender prints what it sent (totals per type, value per stack), computed
on its side; ember's answers must match: the service (a busy process of known
name, "busy") comes back with its stacks and per-type totals.

Builds are cached under ~/.cache/ember-otelcol (Go) and
~/.cache/ember-sdk/otlp-python (venv); without the registries the test skips."""
import json
import os
import shutil
import subprocess
import time
import unittest

import harness as h
import sdk_util as su

COLLECTOR_DIR = os.path.join(h.HERE, "otelcol")
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "ember-otelcol")
OTELCOL = os.path.join(CACHE, "otelcol")
PROTO_VERSION = "1.45.2"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
OFF_CPU = "off_cpu:off_cpu:nanoseconds::"


def newest_go():
    for g in ("/usr/local/go/bin/go", shutil.which("go")):
        if g and os.access(g, os.X_OK):
            return g
    return None


def build_collector():
    stamp = os.path.join(CACHE, ".source")
    with open(os.path.join(COLLECTOR_DIR, "main.go")) as f:
        src = f.read()
    with open(os.path.join(COLLECTOR_DIR, "go.sum")) as f:
        src += f.read()
    if os.path.exists(OTELCOL) and os.path.exists(stamp) and open(stamp).read() == src:
        return OTELCOL
    go = newest_go()
    if not go:
        raise unittest.SkipTest("no Go toolchain")
    os.makedirs(CACHE, exist_ok=True)
    env = dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    r = subprocess.run([go, "build", "-o", OTELCOL, "."], cwd=COLLECTOR_DIR, env=env,
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise unittest.SkipTest(f"cannot build the collector (no module proxy?): {r.stderr[-600:]}")
    with open(stamp, "w") as f:
        f.write(src)
    return OTELCOL


def python_with_proto():
    return su.python_with("otlp-python", "opentelemetry-proto", PROTO_VERSION)


class CollectorRelayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.otelcol = build_collector()
        cls.py = python_with_proto()

    def relay(self, exporter):
        srv = h.Ember()
        srv.start()
        self.addCleanup(srv.cleanup)
        grpc_port, http_port = h.free_port(), h.free_port()
        if exporter == "otlp_grpc":
            exp = {"endpoint": f"127.0.0.1:{srv.port}", "tls": {"insecure": True}}
        else:
            exp = {"endpoint": f"http://127.0.0.1:{srv.port}"}
        exp["retry_on_failure"] = {"enabled": False}
        cfg = {"receivers": {"otlp": {"protocols": {"grpc": {"endpoint": f"127.0.0.1:{grpc_port}"},
                                                    "http": {"endpoint": f"127.0.0.1:{http_port}"}}}},
               "exporters": {exporter: exp},
               "service": {"telemetry": {"metrics": {"level": "none"}},
                           "pipelines": {"profiles": {"receivers": ["otlp"], "exporters": [exporter]}}}}
        work = h.temp_dir("ember-otelcol-")
        cfg_path = os.path.join(work, "config.json")   # JSON is YAML
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        log = open(os.path.join(work, "otelcol.log"), "wb")
        proc = subprocess.Popen([self.otelcol, "--config", f"file:{cfg_path}",
                                 "--feature-gates=service.profilesSupport"], stdout=log, stderr=subprocess.STDOUT)

        def stop():
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
        self.addCleanup(stop)

        def collector_log():
            with open(os.path.join(work, "otelcol.log"), "rb") as f:
                return f.read().decode(errors="replace")[-3000:]
        t_ns = (h.now_ms() - 5000) * 1_000_000
        svc = f"busy-{exporter}"
        sent = None
        deadline = time.monotonic() + 60
        while sent is None:
            r = subprocess.run([self.py, os.path.join(COLLECTOR_DIR, "send_profiles.py"),
                                f"http://127.0.0.1:{http_port}/v1development/profiles", svc, str(t_ns)],
                               capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                sent = json.loads(r.stdout)
            elif time.monotonic() > deadline or proc.poll() is not None:
                self.fail(f"sender failed: {r.stderr[-800:]}\n{collector_log()}")
            else:
                time.sleep(0.5)     # the receiver is still starting
        start, end = h.now_ms() - 3600_000, h.now_ms() + 3600_000
        total = h.eventually(lambda: srv.series_sum(CPU, f'{{service_name="{svc}"}}', start, end),
                             sent["cpu_total"], timeout=30)
        self.assertEqual(total, sent["cpu_total"], f"\n{collector_log()}\n{srv.log_tail()}")
        self.assertEqual(srv.series_sum(OFF_CPU, f'{{service_name="{svc}"}}', start, end), sent["off_cpu_total"])
        for ptype, key in ((CPU, "cpu_stacks"), (OFF_CPU, "off_cpu_stacks")):
            p = h.pb().profile.Profile.FromString(srv.merge_profile(ptype, f'{{service_name="{svc}"}}', start, end))
            fn = {f.id: p.string_table[f.name] for f in p.function}
            loc = {l.id: fn[l.line[0].function_id] for l in p.location}
            got = {}
            for smp in p.sample:
                path = ";".join(reversed([loc[i] for i in smp.location_id]))
                got[path] = got.get(path, 0) + smp.value[0]
            self.assertEqual(got, sent[key], ptype)
        self.assertIn("h2-test-host", srv.label_values("host_name", start=start, end=end)
                      + srv.label_values("host.name", start=start, end=end))

    def test_grpc_exporter(self):
        self.relay("otlp_grpc")

    def test_http_exporter(self):
        self.relay("otlp_http")


if __name__ == "__main__":
    unittest.main()
