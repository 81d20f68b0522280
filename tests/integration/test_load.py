"""ember-load (tools/load) against a real ember.

One run with a write load (real pprof files pushed through push.v1 Push) and
three query rounds, then the checks, each against an oracle independent of
ember-load's own arithmetic:
  * its /metrics parse with the Prometheus client library's parser
    (python3-prometheus-client); every histogram's buckets are cumulative,
    +Inf equals _count, and _count equals the request counter and the counts
    of the summary it printed;
  * per method, the requests it counted equal the requests ember counted on
    its own /metrics (ember_http_requests_total by route);
  * /emberquery?report=pprof, judged by Go's pprof tool, holds exactly
    (profiles written) x (the file's totals from testdata/MANIFEST.jsonl,
    computed by Go's pprof library); json_stacks and json_flamegraph agree;
  * a wrong target (closed port, wrong path) exits 1 with the error codes in
    its metrics; bad flags exit 2.
"""
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

import distributed_harness as dh
from harness import (BIN_DIR, TESTDATA, Ember, free_port, http_request, manifest,
                     parse_prometheus, pprof_raw, temp_dir, wait_for)

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # scripts/install-deps.sh installs python3-prometheus-client
    text_string_to_metric_families = None

CPU_FILES = ["pprof/gopprof-sample.cpu", "pprof/pyroscope-cpu.pprof"]
HEAP_FILE = "pprof/pyroscope-heap"
CPU_TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
INUSE_TYPE = "memory:inuse_space:bytes:space:bytes"
QUERY_METHODS = ["ProfileTypes", "LabelNames", "LabelValues", "Series", "SelectSeries",
                 "SelectMergeStacktraces", "SelectMergeProfile"]


def load_binary():
    return os.path.join(BIN_DIR, "tools", "load", "ember-load")


class LoadRun:
    """ember-load as a child process with --serve-after on a port the kernel
    picks (its log names it), so no other process can take it first."""

    def __init__(self, args):
        self.out_path = os.path.join(temp_dir("ember-load-"), "out.txt")
        self.err_path = self.out_path + ".err"
        cmd = [load_binary(), "--http.address=127.0.0.1:0", "--serve-after", *args]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        self.port = int(wait_for(self._logged_port, timeout=30, what="ember-load's HTTP port"))

    def _logged_port(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"ember-load exited ({self.proc.returncode}): {self.stderr()}")
        m = re.search(r"/emberquery on 127\.0\.0\.1:(\d+)", self.stderr())
        return m.group(1) if m else None

    def stdout(self):
        with open(self.out_path) as f:
            return f.read()

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_done(self, timeout=120):
        def done():
            if self.proc.poll() is not None:
                raise AssertionError(f"ember-load exited early ({self.proc.returncode}):\n"
                                     f"{self.stdout()}\n{self.stderr()[-3000:]}")
            return "ember-load: done" in self.stdout()
        wait_for(done, timeout=timeout, interval=0.1, what="ember-load to finish its rounds")

    def get(self, path):
        return http_request(self.port, "GET", path, timeout=60)

    def metrics_text(self):
        r = self.get("/metrics")
        assert r.status == 200, r.describe()
        return r.body.decode()

    def stop(self):
        """SIGTERM (ends --serve-after); returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()        # our own child, by pid
            self.proc.wait()
            raise AssertionError("ember-load did not exit on SIGTERM")

    def summary(self):
        """{(method, range): (count, errors)} from the printed table."""
        rows = {}
        for line in self.stdout().splitlines():
            parts = line.split()
            if len(parts) == 7 and parts[0] != "method":
                rows[(parts[0], parts[1])] = (int(parts[2]), int(parts[3]))
        return rows


class _Family:
    def __init__(self, name):
        self.name = name
        self.samples = []


class _Sample:
    def __init__(self, name, labels, value):
        self.name, self.labels, self.value = name, labels, value


def strict_families(text):
    """The fallback when python3-prometheus-client is missing: text format
    0.0.4 with every sample under a # TYPE family; raises on anything else."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, typ = line.split()[2:4]
            base = name[:-6] if typ == "counter" and name.endswith("_total") else name
            current = out.setdefault(base, _Family(base))
            continue
        if not line.strip() or line.startswith("#"):
            continue
        parsed = parse_prometheus(line)
        ((name, labels), value), = parsed.items()
        if current is None or not name.startswith(current.name):
            raise AssertionError(f"sample outside its family: {line!r}")
        current.samples.append(_Sample(name, dict(labels), value))
    return out


def families(text):
    if text_string_to_metric_families is None:
        return strict_families(text)
    return {f.name: f for f in text_string_to_metric_families(text)}


def key(labels, *names):
    return tuple(labels[n] for n in names)


def check_histograms(tc, fam):
    """Buckets cumulative, +Inf == _count; returns {(method, range, code): count}."""
    buckets, counts, sums = {}, {}, {}
    for s in fam.samples:
        lab = dict(s.labels)
        le = lab.pop("le", None)
        k = key(lab, "method", "range", "code")
        if s.name.endswith("_bucket"):
            buckets.setdefault(k, []).append((float(le), s.value))
        elif s.name.endswith("_count"):
            counts[k] = s.value
        elif s.name.endswith("_sum"):
            sums[k] = s.value
    tc.assertTrue(counts, "no histogram series")
    for k, bs in buckets.items():
        les = [le for le, _ in bs]
        tc.assertEqual(les, sorted(les), f"{k}: bucket bounds out of order")
        tc.assertEqual(les[-1], float("inf"), f"{k}: no +Inf bucket")
        vals = [v for _, v in bs]
        tc.assertEqual(vals, sorted(vals), f"{k}: buckets not cumulative: {vals}")
        tc.assertEqual(vals[-1], counts[k], f"{k}: +Inf bucket != _count")
        tc.assertGreaterEqual(sums[k], 0)
    tc.assertEqual(set(buckets), set(counts))
    return counts


def counter_values(fam, *names):
    out = {}
    for s in fam.samples:
        if s.name.endswith("_total"):
            k = key(s.labels, *names)
            out[k] = out.get(k, 0) + s.value
    return out


class LoadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(load_binary(), os.X_OK):
            raise AssertionError(f"ember-load not built at {load_binary()}")
        cls.srv = Ember()
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()

    def target(self):
        return f"http://127.0.0.1:{self.srv.port}"

    def test_run_with_write_load(self):
        before = self.ember_routes()   # other tests share this ember
        files = [os.path.join(TESTDATA, f) for f in CPU_FILES]
        spec = ";".join(files + ["memory=" + os.path.join(TESTDATA, HEAP_FILE)])
        run = LoadRun([f"--target={self.target()}", "--rounds=3", "--interval=300ms",
                       "--clients=4", "--write.rate=10", f"--write.files={spec}",
                       "--write.series=3", "--ranges=15m;12h;7d"])
        try:
            run.wait_done()
            text = run.metrics_text()
            fams = families(text)
            hist = check_histograms(self, fams["ember_load_request_duration_seconds"])
            reqs = counter_values(fams["ember_load_requests"], "method", "range", "code")
            self.assertEqual(hist, reqs, "histogram _count != ember_load_requests_total")
            self.assertEqual({k[2] for k in reqs}, {"ok"}, f"non-ok requests: {reqs}")

            # the printed summary counts the same requests
            summary = run.summary()
            by_mr = {}
            for (m, r, _), v in reqs.items():
                by_mr[(m, r)] = by_mr.get((m, r), 0) + v
            self.assertEqual({k: v[0] for k, v in summary.items()}, by_mr)
            self.assertTrue(all(e == 0 for _, e in summary.values()))
            for m in QUERY_METHODS:
                for r in ("15m", "12h", "7d"):
                    self.assertGreater(by_mr.get((m, r), 0), 0, f"no {m} over {r}")

            # ember counted the same requests per method
            after = self.ember_routes()
            routes = {k: v - before.get(k, 0) for k, v in after.items()}
            load_by_method = counter_values(fams["ember_load_requests"], "method")
            for (m,), n in load_by_method.items():
                route = ("/push.v1.PusherService/Push" if m == "Push"
                         else f"/querier.v1.QuerierService/{m}")
                self.assertEqual(routes.get((route,), 0), n, f"{m}: ember counted "
                                 f"{routes.get((route,), 0)}, ember-load {n}")

            # what was written is what the merged query returns
            written = counter_values(fams["ember_load_profiles_written"], "file")
            self.assertEqual(sum(written.values()), load_by_method[("Push",)])
            self.assertTrue(all(written.get((os.path.basename(f),), 0) > 0
                                for f in CPU_FILES + [HEAP_FILE]), written)
            man = manifest()

            def total(entry, stype):
                return next(st["total"] for st in man[entry]["sample_types"]
                            if st["type"] == stype)
            want_cpu = sum(written[(os.path.basename(f),)] * total(f, "cpu") for f in CPU_FILES)
            want_inuse = written[(os.path.basename(HEAP_FILE),)] * total(HEAP_FILE, "inuse_space")
            self.check_pprof(run, CPU_TYPE, ("cpu", "nanoseconds"), want_cpu)
            self.check_pprof(run, INUSE_TYPE, ("inuse_space", "bytes"), want_inuse)

            stacks = json.loads(run.get(f"/emberquery?type={CPU_TYPE}&range=1h"
                                        "&report=json_stacks").body)
            self.assertEqual(stacks["total"], want_cpu)
            self.assertEqual(sum(s["value"] for s in stacks["stacks"]), want_cpu)
            self.assertTrue(all(s["frames"] for s in stacks["stacks"]))
            fg = json.loads(run.get(f"/emberquery?type={CPU_TYPE}&report=json_flamegraph").body)
            self.assertEqual(int(fg["total"]), want_cpu)
            self.assertEqual(fg["names"][0], "total")
            one = run.get("/emberquery?type=process_cpu:cpu:nanoseconds:cpu:nanoseconds"
                          "&selector=%7Bseries%3D%220%22%7D&report=json_flamegraph")
            self.assertEqual(one.status, 200, one.describe())
            self.assertLess(int(json.loads(one.body).get("total", 0)), want_cpu)

            bad = run.get("/emberquery?type=nope&report=json_stacks")
            self.assertEqual(bad.status, 502, bad.describe())
            self.assertEqual(json.loads(bad.body)["code"], "invalid_argument")
            self.assertEqual(run.get("/emberquery?report=pprof").status, 400)
            self.assertEqual(run.get(f"/emberquery?type={CPU_TYPE}&report=svg").status, 400)
        finally:
            rc = run.stop()
        self.assertEqual(rc, 0, run.stdout() + run.stderr()[-2000:])

    def ember_routes(self):
        r = self.srv.request("GET", "/metrics")
        self.assertEqual(r.status, 200, r.describe())
        return counter_values(families(r.body.decode())["ember_http_requests"], "route")

    def check_pprof(self, run, ptype, sample_type, want):
        def fetch():
            r = run.get(f"/emberquery?type={ptype}&range=1h&report=pprof")
            self.assertEqual(r.status, 200, r.describe())
            with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
                f.write(r.body)
            try:
                return pprof_raw(f.name)["totals"].get(sample_type)
            finally:
                os.unlink(f.name)
        deadline = time.monotonic() + 15
        got = fetch()
        while got != want and time.monotonic() < deadline:   # ingestion is asynchronous
            time.sleep(0.3)
            got = fetch()
        self.assertEqual(got, want, f"{ptype}: merged pprof total")

    def test_json_codec_and_given_types(self):
        run = LoadRun([f"--target={self.target()}", "--rounds=1", "--interval=0",
                       "--codec=json", f"--types={CPU_TYPE}", "--selectors=all",
                       "--labels=service_name", "--ranges=1h", "--tenant=anything",
                       "--methods=LabelValues,SelectSeries,SelectMergeStacktraces",
                       "--write.rate=20",
                       # its own __name__, so the totals of the other run's types stay exact
                       "--write.files=json_cpu=" + os.path.join(TESTDATA, CPU_FILES[0])])
        try:
            run.wait_done()
            reqs = counter_values(families(run.metrics_text())["ember_load_requests"],
                                  "method", "range", "code")
            pushes = reqs.pop(("Push", "none", "ok"), 0)
            self.assertGreaterEqual(pushes, 1, reqs)     # JSON pushes (base64 rawProfile) work
            # discovery: LabelNames over the longest range; then one call of each method
            self.assertEqual(reqs, {("LabelNames", "1h", "ok"): 1,
                                    ("LabelValues", "1h", "ok"): 1,
                                    ("SelectSeries", "1h", "ok"): 1,
                                    ("SelectMergeStacktraces", "1h", "ok"): 1})
        finally:
            rc = run.stop()
        self.assertEqual(rc, 0, run.stdout())

    def test_duration_stop_waits_for_calls_in_flight(self):
        """Stopped by --duration mid-round (rounds back to back), ember-load has
        counted every request ember answered: none is cut off uncounted."""
        before = self.ember_routes()
        run = LoadRun([f"--target={self.target()}", "--rounds=0", "--duration=1500ms",
                       "--interval=0", "--clients=3", "--write.rate=20",
                       "--write.files=dur_cpu=" + os.path.join(TESTDATA, CPU_FILES[1])])
        try:
            run.wait_done()
            load = counter_values(families(run.metrics_text())["ember_load_requests"], "method")
            after = self.ember_routes()
        finally:
            rc = run.stop()
        self.assertEqual(rc, 0, run.stdout())
        ember = {}
        for (route,), n in after.items():
            m = route.rsplit("/", 1)[-1]
            if route.startswith(("/querier.v1.", "/push.v1.")) and n - before.get((route,), 0):
                ember[(m,)] = n - before.get((route,), 0)
        self.assertEqual(load, ember)
        self.assertGreater(sum(load.values()), 50)

    def run_failing(self, target, want_code):
        run = LoadRun([f"--target={target}", "--rounds=1", "--client.timeout=3s"])
        try:
            run.wait_done(60)
            reqs = counter_values(families(run.metrics_text())["ember_load_requests"],
                                  "method", "code")
            self.assertEqual(reqs, {("ProfileTypes", want_code): 1})
            self.assertEqual(run.summary()[("ProfileTypes", "7d")], (1, 1))
        finally:
            rc = run.stop()
        self.assertEqual(rc, 1, run.stdout())
        self.assertIn("discovery: ProfileTypes failed", run.stderr())

    def test_wrong_target_fails(self):
        closed = free_port()
        self.run_failing(f"http://127.0.0.1:{closed}", "unavailable")
        self.run_failing(f"{self.target()}/not-ember", "unimplemented")

    def test_without_serve_after_exits_with_status(self):
        r = subprocess.run([load_binary(), f"--target=http://127.0.0.1:{free_port()}",
                            "--http.address=", "--rounds=1"], capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(b"errors 1", r.stdout)

    def test_bad_flags(self):
        for args, want in ((["--clients=0"], b"--clients"), (["--nope=1"], b"unknown flag"),
                           (["--write.rate=5"], b"--write.files"),
                           (["--write.rate=5", "--write.files=/nonexistent.pprof",
                             "--http.address="], b"cannot read")):
            r = subprocess.run([load_binary(), *args], capture_output=True, timeout=30)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn(want, r.stderr)
        r = subprocess.run([load_binary(), "--help"], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"--write.rate", r.stdout)


class LoadAuthTest(unittest.TestCase):
    """--tenant and --token against ember with multitenancy and a tokens file."""
    TOKEN = "load-s3cret"

    @classmethod
    def setUpClass(cls):
        d = temp_dir("ember-load-auth-")
        tokens = os.path.join(d, "tokens")
        digest = hashlib.sha256(cls.TOKEN.encode()).hexdigest()
        with open(tokens, "w") as f:
            f.write(f"token sha256:{digest} tenants=t1 scope=read,write\n")
        cls.srv = Ember(args=["--auth.multitenancy-enabled", f"--auth.tokens-file={tokens}"])
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()

    def codes(self, args):
        run = LoadRun([f"--target=http://127.0.0.1:{self.srv.port}", "--rounds=1",
                       "--interval=0", *args])
        try:
            run.wait_done()
            reqs = counter_values(families(run.metrics_text())["ember_load_requests"], "code")
            stacks = None
            if ("ok",) in reqs:
                r = run.get(f"/emberquery?type={CPU_TYPE}&range=1h&report=json_stacks")
                stacks = json.loads(r.body) if r.status == 200 else r.status
        finally:
            rc = run.stop()
        return rc, set(k[0] for k in reqs), stacks

    def test_token_and_tenant(self):
        want = next(st["total"] for st in manifest()[CPU_FILES[0]]["sample_types"]
                    if st["type"] == "cpu")
        rc, codes, stacks = self.codes(["--tenant=t1", f"--token={self.TOKEN}", "--write.rate=50",
                                        "--write.files=" + os.path.join(TESTDATA, CPU_FILES[0]),
                                        "--duration=1s", "--rounds=0", "--interval=200ms"])
        self.assertEqual((rc, codes), (0, {"ok"}))
        # /emberquery carries the same tenant and token; the total is a multiple of the file's
        self.assertGreater(stacks["total"], 0)
        self.assertEqual(stacks["total"] % want, 0)

    def test_missing_token_is_unauthenticated(self):
        rc, codes, _ = self.codes(["--tenant=t1"])
        self.assertEqual((rc, codes), (1, {"unauthenticated"}))

    def test_foreign_tenant_is_denied(self):
        rc, codes, _ = self.codes(["--tenant=t2", f"--token={self.TOKEN}"])
        self.assertEqual((rc, codes), (1, {"permission_denied"}))


class LoadDistributedTest(dh.ClusterTestCase):
    """ember-querier over two ingesters (Redis streams): queries to the querier,
    pushes to an ingester (--write.target); the counts and the merged totals
    hold there too."""

    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis(aof=False).start()
        for _ in range(2):
            ing = dh.ingester(cls.redis.url)
            cls.procs.append(ing)
            ing.start()
        cls.q = dh.querier(cls.redis.url)
        cls.procs.append(cls.q)
        cls.q.start()
        dh.wait_members(cls.q, 2)

    def test_querier_over_ingesters(self):
        ing = self.procs[0]
        before_q = counter_values(families(self.q.request("GET", "/metrics").body.decode())
                                  ["ember_http_requests"], "route")
        cpu = os.path.join(TESTDATA, CPU_FILES[1])
        run = LoadRun([f"--target={self.q.url}", f"--write.target={ing.url}", "--rounds=2",
                       "--interval=300ms", "--write.rate=10", f"--write.files={cpu}"])
        try:
            run.wait_done()
            fams = families(run.metrics_text())
            reqs = counter_values(fams["ember_load_requests"], "method", "code")
            self.assertEqual({k[1] for k in reqs}, {"ok"}, reqs)
            after_q = counter_values(families(self.q.request("GET", "/metrics").body.decode())
                                     ["ember_http_requests"], "route")
            for (m, _), n in reqs.items():
                if m != "Push":
                    route = (f"/querier.v1.QuerierService/{m}",)
                    self.assertEqual(after_q.get(route, 0) - before_q.get(route, 0), n, m)
            written = sum(counter_values(fams["ember_load_profiles_written"], "file").values())
            self.assertEqual(written, reqs[("Push", "ok")])
            want = written * next(st["total"] for st in manifest()[CPU_FILES[1]]["sample_types"]
                                  if st["type"] == "cpu")
            LoadTest.check_pprof(self, run, CPU_TYPE, ("cpu", "nanoseconds"), want)
        finally:
            rc = run.stop()
        self.assertEqual(rc, 0, run.stdout())


if __name__ == "__main__":
    unittest.main()
