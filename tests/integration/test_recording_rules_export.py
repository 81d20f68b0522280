"""Recording rules end to end (issue 29): rules made through
settings.v1.RecordingRulesService, CPU profiles with known totals pushed at
known times, the rule series sent by Prometheus remote write to a real
receiver and read back with PromQL. Two receivers, each built from the Go
module proxy: VictoriaMetrics single-node v1.151.0
(scripts/build-victoriametrics.sh, always) and Prometheus itself with
--web.enable-remote-write-receiver (scripts/build-prometheus.sh, when built:
see Prometheus below; stricter: it refuses unsorted or duplicate labels and
samples out of order).

Oracles: the totals worked out by hand from the stacks pushed (per group and
per 15 s step; for the function-name rule, only the stacks through that
function), and ember's own SelectSeries of the rule's selector with the same
step and group-by, which reads the store, not the rule pipeline. The test
waits (polling, no time band) for the receiver to hold every expected point:
a step is sent once it had no point for 15 s."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import harness as h
from test_connect_rpcs import cpu_profile, PERIOD_NS

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts")
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
STEP_MS = 15_000
SERVICE = "rules-export"

# (region, seconds after t0, stacks); t0 is a step boundary.
PUSHES = [
    ("eu", 1, {"main;work;gc": 3, "main;work;foo": 5}),
    ("eu", 7, {"main;work;gc": 2, "main;idle": 4}),
    ("us", 2, {"main;work;foo": 6}),
    ("eu", 16, {"main;work;gc": 1, "main;work;bar": 9}),
]


def built_binary(script, what):
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/local/go/bin")
    r = subprocess.run([os.path.join(SCRIPTS, script)], capture_output=True, text=True, env=env,
                       timeout=3600)
    if r.returncode != 0:
        if not os.environ.get("CI") and ("dial tcp" in r.stderr or "not installed" in r.stderr):
            raise unittest.SkipTest(f"cannot build {what}: {r.stderr[-300:]}")
        raise AssertionError(f"{script} failed:\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


class VictoriaMetrics:
    name = "VictoriaMetrics"

    def command(self, port, data_dir):
        return [built_binary("build-victoriametrics.sh", self.name),
                f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={data_dir}",
                "-retentionPeriod=100y", "-search.latencyOffset=0s", "-search.disableCache"]

    def ready(self, get):
        return get("/health") == "OK"


class Prometheus:
    """Built only on request: Prometheus is a large build (over ten minutes on
    two cores), so install-deps does not build it and CI runs this receiver
    only when scripts/build-prometheus.sh has cached it (or with
    EMBER_BUILD_PROMETHEUS=1); VictoriaMetrics always runs."""
    name = "Prometheus"
    cached = os.path.join(os.environ.get("EMBER_CACHE", os.path.expanduser("~/.cache/ember")),
                          "prometheus-" + os.environ.get("PROMETHEUS_VERSION", "v0.316.0"),
                          "prometheus")

    def command(self, port, data_dir):
        if not os.path.exists(self.cached) and not os.environ.get("EMBER_BUILD_PROMETHEUS"):
            raise unittest.SkipTest("Prometheus is not built: run scripts/build-prometheus.sh "
                                    "(or set EMBER_BUILD_PROMETHEUS=1)")
        os.makedirs(data_dir, exist_ok=True)
        config = os.path.join(data_dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global: {}\n")  # nothing scraped: remote write is the only input
        return [built_binary("build-prometheus.sh", self.name), f"--config.file={config}",
                f"--web.listen-address=127.0.0.1:{port}", f"--storage.tsdb.path={data_dir}/tsdb",
                "--web.enable-remote-write-receiver"]

    def ready(self, get):
        return "Ready" in get("/-/ready")


def expected(fn=None):
    """{(region, step start ms): total ns} from PUSHES, by hand. With a
    function filter, a profile that matches the rule but never runs fn
    still makes its point: 0."""
    out = {}
    for region, sec, stacks in PUSHES:
        bucket = -(-sec * 1000 // STEP_MS) * STEP_MS  # the step boundary at or after
        total = sum(c * PERIOD_NS for s, c in stacks.items() if fn is None or fn in s.split(";"))
        out[(region, bucket)] = out.get((region, bucket), 0) + total
    return out


class RemoteWriteExportTest(unittest.TestCase):
    receiver = VictoriaMetrics()

    @classmethod
    def setUpClass(cls):
        cls.vm_dir = tempfile.mkdtemp(prefix="ember-it-rw-")
        cls.vm_port = h.free_port()
        command = cls.receiver.command(cls.vm_port, f"{cls.vm_dir}/data")
        cls.vm_log = open(os.path.join(cls.vm_dir, "receiver.log"), "wb")
        cls.vm = subprocess.Popen(command, stdout=cls.vm_log, stderr=subprocess.STDOUT)
        h.wait_for(lambda: cls.receiver.ready(cls.vm_get), timeout=60,
                   what=f"{cls.receiver.name} ready")
        url = f"http://127.0.0.1:{cls.vm_port}/api/v1/write"
        cls.srv = h.Ember(args=[f"--metrics-export.remote-write-url={url}"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        cls.vm.terminate()
        cls.vm.wait(30)
        cls.vm_log.close()
        shutil.rmtree(cls.vm_dir, ignore_errors=True)

    @classmethod
    def vm_get(cls, path, **params):
        try:
            r = h.http_request(cls.vm_port, "GET",
                               path + ("?" + urllib.parse.urlencode(params) if params else ""))
        except OSError:
            return ""  # not listening yet
        return r.body.decode()

    def promql(self, query, at_ms):
        out = json.loads(self.vm_get("/api/v1/query", query=query, time=f"{at_ms / 1000:.3f}",
                                     step="1s"))
        self.assertEqual(out["status"], "success", out)
        return {(s["metric"].get("region", ""), at_ms): float(s["value"][1])
                for s in out["data"]["result"]
                if int(float(s["value"][0]) * 1000) == at_ms}

    def upsert(self, body):
        r = self.srv.request("POST", "/settings.v1.RecordingRulesService/UpsertRecordingRule",
                             json.dumps(body).encode(), {"Content-Type": "application/json"})
        self.assertEqual(r.status, 200, r.describe())
        return json.loads(r.body)["rule"]

    def received(self, metric, rule_id, t0, want):
        """What the receiver holds at each expected point (raw samples, via
        PromQL `metric[15s]`'s last value at the step start)."""
        got = {}
        for (_region, bucket) in want:
            sel = f'last_over_time({metric}{{profiles_rule_id="{rule_id}"}}[1s])'
            for (region, at), v in self.promql(sel, t0 + bucket).items():
                got[(region, at - t0)] = v
        return got

    def test_rule_series_reach_the_receiver(self):
        total = self.upsert({"metricName": "profiles_recorded_rr_cpu_nanoseconds",
                             "matchers": [f'{{__profile_type__="{CPU}", service_name="{SERVICE}"}}'],
                             "groupBy": ["region"],
                             "externalLabels": [{"name": "env", "value": "it"}]})
        gc = self.upsert({"metricName": "profiles_recorded_rr_gc_nanoseconds",
                          "matchers": [f'{{__profile_type__="{CPU}", service_name="{SERVICE}"}}'],
                          "groupBy": ["region"],
                          "stacktraceFilter": {"functionName": {"functionName": "gc"}}})
        t0 = (h.now_ms() - 600_000) // STEP_MS * STEP_MS
        for region, sec, stacks in PUSHES:
            r = self.srv.push([({"__name__": "process_cpu", "service_name": SERVICE, "region": region},
                                [cpu_profile(stacks, (t0 + sec * 1000) * 1_000_000)])])
            self.assertEqual(r.status, 200, r.describe())
        for rule, fn in ((total, None), (gc, "gc")):
            want = expected(fn)
            got = {}

            def arrived():
                got.clear()
                got.update(self.received(rule["metricName"], rule["id"], t0, want))
                return got == want

            try:
                h.wait_for(arrived, timeout=120, interval=1.0,
                           what=f"{rule['metricName']} in {self.receiver.name}")
            except AssertionError:
                self.fail(f"{rule['metricName']}: {self.receiver.name} has {got}, want {want}\n"
                          f"{self.srv.log_tail()}")
        # the same selector through ember's SelectSeries (the store, not the rules)
        m = self.srv.q("SelectSeries", profile_typeID=CPU, label_selector=f'{{service_name="{SERVICE}"}}',
                       start=t0 - STEP_MS, end=t0 + 2 * STEP_MS, step=STEP_MS / 1000,
                       group_by=["region"])
        store = {}
        for s in m.series:
            region = {lp.name: lp.value for lp in s.labels}.get("region", "")
            for p in s.points:
                store[(region, p.timestamp - t0)] = p.value
        self.assertEqual(store, expected())
        # the series carry the rule's labels
        out = json.loads(self.vm_get("/api/v1/series", **{"match[]": "profiles_recorded_rr_cpu_nanoseconds"}))
        labels = {frozenset(s.items()) for s in out["data"]}
        self.assertIn(frozenset({"__name__": "profiles_recorded_rr_cpu_nanoseconds", "env": "it",
                                 "profiles_rule_id": total["id"], "region": "eu"}.items()), labels)
        metrics = self.srv.request("GET", "/metrics").body.decode()
        self.assertIn('ember_remote_write_samples_total{outcome="sent"}', metrics)
        rejected = sum(v for (name, labels), v in self.srv.metrics().items()
                       if name == "ember_remote_write_requests_total"
                       and ("outcome", "rejected") in labels)
        self.assertEqual(rejected, 0, f"the receiver refused requests:\n{self.srv.log_tail()}")


class RemoteWritePrometheusTest(RemoteWriteExportTest):
    receiver = Prometheus()


if __name__ == "__main__":
    unittest.main()
