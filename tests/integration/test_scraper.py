"""ember's scraper against a real Go program (tests/integration/goapp, standard
library net/http/pprof only) that burns CPU, allocates, blocks and contends on
a mutex, scraped by `ember --scrape.config-file` on 1 s intervals.

Checked with independent oracles:
  - the profile types and labels are the ones Pyroscope/Alloy produce for a
    Go endpoint (pyroscope-api.md §4.3), with job, instance, static labels and
    service_name;
  - the goapp's known hot function is on top of the CPU flame graph;
  - the stored alloc delta between two scrapes equals
    `go tool pprof -base first.pb.gz second.pb.gz` on the very bodies the
    scraper received (goapp writes a copy of every allocs response);
  - a target that refuses connections is `down` with its error on /targets
    and `ember_scrape_up 0`, while the healthy one keeps being scraped;
  - SIGHUP and file changes reload without restarting healthy targets,
    file_sd files are re-read when they change, a bad reload keeps the running
    config, and a bad config at start-up names the job and the field.

Helpers (GoApp, targets, scrape_config) are imported by the other
test_scraper_*.py files.
"""
import gzip
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import harness as h

GOAPP_SRC = os.path.join(h.HERE, "goapp")
_GOAPP_BIN = None

GO_TYPES = {  # what Pyroscope/Alloy produce for the default Go endpoints (§4.3)
    "process_cpu:samples:count:cpu:nanoseconds",
    "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
    "memory:alloc_objects:count:space:bytes",
    "memory:alloc_space:bytes:space:bytes",
    "memory:inuse_objects:count:space:bytes",
    "memory:inuse_space:bytes:space:bytes",
    "goroutine:goroutine:count:goroutine:count",
    "block:contentions:count:contentions:count",
    "block:delay:nanoseconds:contentions:count",
    "mutex:contentions:count:contentions:count",
    "mutex:delay:nanoseconds:contentions:count",
}


# ----------------------------------------------------------------- helpers

def goapp_binary():
    """Builds goapp once per process into a temp dir (Go offline, std only)."""
    global _GOAPP_BIN
    if _GOAPP_BIN:
        return _GOAPP_BIN
    out = h.temp_dir("ember-goapp-")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", CGO_ENABLED="0")
    if not os.access(os.path.expanduser("~"), os.W_OK):
        env["GOCACHE"] = os.path.join(out, "cache")
    subprocess.run(["go", "build", "-o", os.path.join(out, "goapp"), "."], cwd=GOAPP_SRC,
                   env=env, check=True, capture_output=True, timeout=300)
    _GOAPP_BIN = os.path.join(out, "goapp")
    return _GOAPP_BIN


class GoApp:
    """A running goapp on 127.0.0.1:<free port>; .dump_dir holds every
    allocs response it served."""

    def __init__(self, dump=False):
        self.dump_dir = h.temp_dir("ember-goapp-dump-") if dump else None
        args = [goapp_binary(), "-addr", "127.0.0.1:0"]
        if dump:
            args += ["-dump-dir", self.dump_dir]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening "):
            self.stop()
            raise AssertionError(f"goapp did not start: {line!r}")
        self.address = line.split()[1]
        self.port = int(self.address.rsplit(":", 1)[1])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        if self.dump_dir:
            shutil.rmtree(self.dump_dir, ignore_errors=True)

    def dumps(self):
        """[(n, path)] of the allocs responses served so far, in order."""
        out = []
        for name in os.listdir(self.dump_dir):
            if name.startswith("allocs-") and name.endswith(".pb.gz"):
                out.append((int(name[7:-6]), os.path.join(self.dump_dir, name)))
        return sorted(out)


def targets(srv, state=None):
    r = srv.request("GET", "/targets" + (f"?state={state}" if state else ""))
    assert r.status == 200, r.describe()
    return json.loads(r.body)["data"]


def write_file(path, text):
    """Writes atomically (rename), as config managers do."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def stacks_of(prof, type_name):
    """{(leaf..root function names): value} of one sample type of a decoded
    pprof, zero values left out."""
    st = [prof.string_table[t.type] for t in prof.sample_type]
    idx = st.index(type_name)
    funcs = {f.id: prof.string_table[f.name] for f in prof.function}
    locs = {}
    for loc in prof.location:
        locs[loc.id] = tuple(funcs[line.function_id] for line in loc.line)
    out = {}
    for s in prof.sample:
        key = tuple(name for lid in s.location_id for name in locs[lid])
        out[key] = out.get(key, 0) + s.value[idx]
    return {k: v for k, v in out.items() if v != 0}


def read_pprof(path_or_bytes):
    data = path_or_bytes
    if isinstance(path_or_bytes, str):
        with open(path_or_bytes, "rb") as f:
            data = f.read()
    return h.pb().profile.Profile.FromString(h.gunzip_if(data))


def ember_send_signal(srv, sig):
    srv.proc.send_signal(sig)


# ----------------------------------------------------------------- the tests

class ScraperGoTest(unittest.TestCase):
    """One goapp, one dead address, one ember scraping both every second."""

    @classmethod
    def setUpClass(cls):
        cls.app = GoApp(dump=True)
        cls.dead = f"127.0.0.1:{h.free_port()}"
        cls.dir = tempfile.mkdtemp(prefix="ember-scrape-cfg-")
        cls.config = os.path.join(cls.dir, "parca.yaml")
        cls.sd_file = os.path.join(cls.dir, "targets.json")
        write_file(cls.config, cls.base_config())
        cls.srv = h.Ember(args=[f"--scrape.config-file={cls.config}"])
        try:
            cls.srv.start()
        except Exception:
            cls.app.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        cls.app.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def base_config(cls, extra=""):
        return (
            "object_storage: {bucket: {type: FILESYSTEM, config: {directory: ./data}}}\n"
            "scrape_configs:\n"
            "  - job_name: goapp\n"
            "    scrape_interval: 1s\n"
            "    static_configs:\n"
            f"      - targets: ['{cls.app.address}']\n"
            "        labels: {team: perf}\n"
            f"      - targets: ['{cls.dead}']\n"
            "        labels: {team: gone}\n" + extra)

    def selector(self):
        return '{service_name="goapp",team="perf"}'

    def window(self):
        return h.now_ms() - 600_000, h.now_ms() + 60_000

    def types(self):
        m = self.srv.q("ProfileTypes", start=self.window()[0], end=self.window()[1])
        return {t.ID for t in m.profile_types}

    def test_01_go_profile_types_and_labels(self):
        got = h.eventually(lambda: GO_TYPES <= self.types(), True, timeout=20)
        self.assertTrue(got, f"profile types so far: {sorted(self.types())}")
        series = self.srv.series_labels([self.selector()])
        names = {dict(s).get("__name__") for s in series}
        self.assertEqual(names, {"process_cpu", "memory", "goroutine", "block", "mutex"})
        for s in series:
            d = dict(s)
            self.assertEqual(d["job"], "goapp")
            self.assertEqual(d["instance"], self.app.address)
            self.assertEqual(d["service_name"], "goapp")
            self.assertEqual(d["team"], "perf")
            self.assertNotIn("__delta__", d)
            for k in d:
                self.assertFalse(k.startswith("__meta_") or k in ("__address__", "__scheme__"),
                                 f"internal label {k} was stored")

    def test_02_hot_function_on_top_of_cpu_flame_graph(self):
        pid = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

        def top():
            """The widest frame under the root (Go's asynchronous preemption puts
            runtime.asyncPreempt under the hot loop, so self time would mislead), and its share of all CPU."""
            fg = self.srv.flamegraph(pid, self.selector(), *self.window())
            levels = h.decode_flamegraph(fg)
            if len(levels) < 2:
                return None
            best = max((n for lvl in levels[1:] for n in lvl), key=lambda n: n["total"])
            return best["name"], best["total"] / levels[0][0]["total"] >= 0.5

        self.assertEqual(h.eventually(top, ("main.burnCPU", True), timeout=20),
                         ("main.burnCPU", True))

    def test_03_alloc_delta_equals_go_tool_pprof_base(self):
        """Two consecutive allocs bodies as served; the stored delta of the
        second equals `go tool pprof -base first second`."""
        pid = "memory:alloc_space:bytes:space:bytes"
        h.wait_for(lambda: len(self.app.dumps()) >= 4, timeout=20, what="4 allocs scrapes")
        dumps = self.app.dumps()
        (n1, first), (n2, second) = dumps[-3], dumps[-2]
        self.assertEqual(n2, n1 + 1)
        t_ms = read_pprof(second).time_nanos // 1_000_000
        diff = os.path.join(self.dir, "diff.pb.gz")
        r = subprocess.run([h.pprof_tool(), "-proto", "-symbolize=none", "-output", diff,
                            "-base", first, second], capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        want = stacks_of(read_pprof(diff), "alloc_space")
        self.assertTrue(want, "go tool pprof -base found no allocations between two scrapes")

        def stored():
            raw = self.srv.merge_profile(pid, self.selector(), t_ms - 300, t_ms + 300)
            return stacks_of(read_pprof(raw), "alloc_space")

        got = h.eventually(stored, want, timeout=10)
        self.assertEqual(got, want)
        # The first allocs scrape of a target is only a baseline.
        t0 = read_pprof(dumps[0][1]).time_nanos // 1_000_000
        raw = self.srv.merge_profile(pid, self.selector(), t0 - 300, t0 + 300)
        self.assertEqual(stacks_of(read_pprof(raw), "alloc_space"), {})

    def test_04_down_target_is_reported_others_keep_going(self):
        def split():
            active = targets(self.srv)["activeTargets"]
            dead = [t for t in active if t["labels"]["instance"] == self.dead]
            live = [t for t in active if t["labels"]["instance"] == self.app.address]
            return dead, live

        h.wait_for(lambda: all(t["health"] == "down" for t in split()[0]), timeout=10,
                   what="dead targets down")
        dead, live = split()
        self.assertEqual(len(dead), 5)
        self.assertEqual(len(live), 5)
        for t in dead:
            self.assertEqual(t["health"], "down")
            self.assertIn("connect", t["lastError"])
            self.assertEqual(t["scrapePool"], "goapp")
        scrapes = {t["profile"]: t["scrapes"] for t in live}
        for t in live:
            self.assertEqual(t["health"], "up", t)
            self.assertEqual(t["lastError"], "")
        time.sleep(2.5)
        for t in split()[1]:
            self.assertGreater(t["scrapes"], scrapes[t["profile"]], f"{t['profile']} stalled")
        m = self.srv.metrics()
        up = {(dict(k[1])["instance"], dict(k[1])["profile"]): v
              for k, v in m.items() if k[0] == "ember_scrape_up"}
        for profile in ("memory", "block", "goroutine", "mutex", "process_cpu"):
            self.assertEqual(up[(self.dead, profile)], 0)
            self.assertEqual(up[(self.app.address, profile)], 1)
        errors = {dict(k[1])["kind"]: v for k, v in m.items()
                  if k[0] == "ember_scrape_errors_total"}
        self.assertGreater(errors.get("connect", 0), 0)

    def test_05_sighup_adds_a_job_and_keeps_healthy_targets(self):
        write_file(self.sd_file, json.dumps([{"targets": [self.app.address],
                                              "labels": {"src": "one"}}]))
        before = {t["scrapeUrl"]: t["scrapes"] for t in targets(self.srv)["activeTargets"]
                  if t["scrapePool"] == "goapp" and t["health"] == "up"}
        self.assertEqual(len(before), 5)
        write_file(self.config, self.base_config(
            "  - job_name: filesd\n"
            "    scrape_interval: 2s\n"
            "    profiling_config:\n"
            "      pprof_config:\n"
            "        block: {enabled: false}\n"
            "        mutex: {enabled: false}\n"
            "        process_cpu: {enabled: false}\n"
            "        memory: {enabled: false}\n"
            "    file_sd_configs:\n"
            f"      - files: ['{self.dir}/*.json']\n"))
        ember_send_signal(self.srv, signal.SIGHUP)
        h.wait_for(lambda: any(t["scrapePool"] == "filesd"
                               for t in targets(self.srv)["activeTargets"]),
                   timeout=10, what="the filesd job")
        after = {t["scrapeUrl"]: t for t in targets(self.srv)["activeTargets"]
                 if t["scrapePool"] == "goapp"}
        for url, n in before.items():
            self.assertIn(url, after)
            self.assertGreaterEqual(after[url]["scrapes"], n, f"{url} was restarted")
            self.assertEqual(after[url]["health"], "up")
        fsd = [t for t in targets(self.srv)["activeTargets"] if t["scrapePool"] == "filesd"]
        self.assertEqual(len(fsd), 1)  # only goroutine stays enabled
        self.assertEqual(fsd[0]["labels"]["src"], "one")
        self.assertEqual(fsd[0]["profile"], "goroutine")

    def test_06_file_sd_file_change_is_picked_up(self):
        write_file(self.sd_file, json.dumps([{"targets": [self.app.address],
                                              "labels": {"src": "two"}},
                                             {"targets": [self.dead]}]))

        def srcs():
            return sorted(t["labels"].get("src", "-") for t in targets(self.srv)["activeTargets"]
                          if t["scrapePool"] == "filesd")

        self.assertEqual(h.eventually(srcs, ["-", "two"], timeout=10), ["-", "two"])
        fsd = h.wait_for(lambda: [t for t in targets(self.srv)["activeTargets"]
                                  if t["scrapePool"] == "filesd"
                                  and t["labels"].get("src") == "two" and t["health"] == "up"],
                         timeout=10, what="the re-discovered target up")
        self.assertEqual(fsd[0]["discoveredLabels"]["__address__"], self.app.address)
        # A broken file keeps what the file said last.
        write_file(self.sd_file, "[{targets: [")
        time.sleep(2.5)
        self.assertEqual(srcs(), ["-", "two"])

    def test_07_config_file_change_reloads_without_signal(self):
        write_file(self.config, self.base_config().replace("team: gone", "team: renamed"))

        def teams():
            return {t["labels"].get("team") for t in targets(self.srv)["activeTargets"]}

        self.assertEqual(h.eventually(teams, {"perf", "renamed"}, timeout=10),
                         {"perf", "renamed"})

    def test_08_bad_reload_keeps_the_running_config(self):
        urls = sorted(t["scrapeUrl"] for t in targets(self.srv)["activeTargets"])
        write_file(self.config, self.base_config("    scrape_timeout: 1s\n"))
        ember_send_signal(self.srv, signal.SIGHUP)
        h.wait_for(lambda: self.srv.metrics().get(
            ("ember_scrape_config_last_reload_successful", frozenset())) == 0,
            timeout=10, what="the failed reload")
        self.assertTrue(self.srv.alive())
        self.assertEqual(sorted(t["scrapeUrl"] for t in targets(self.srv)["activeTargets"]),
                         urls)
        with open(self.srv.log_path, errors="replace") as f:
            self.assertIn("scrape timeout must be greater than the interval", f.read())
        write_file(self.config, self.base_config())

    def test_09_clean_stop(self):
        """SIGTERM: HTTP, then the scraper (in-flight scrapes published), then
        the transport; exit status 0 (and no sanitizer report)."""
        self.assertEqual(self.srv.stop(), 0)


class ScraperBadConfigTest(unittest.TestCase):
    """A bad file at start-up stops ember with a message naming job and field."""

    def run_ember(self, text, scraper=False):
        d = tempfile.mkdtemp(prefix="ember-badcfg-")
        try:
            path = os.path.join(d, "bad.yaml")
            write_file(path, text)
            if scraper:  # ember-scraper: --config.file is the parca.yaml
                cmd = [os.path.join(h.BIN_DIR, "services", "scraper", "ember-scraper"),
                       "--http.address=127.0.0.1:0", f"--config.file={path}",
                       f"--redis.url=redis://127.0.0.1:{h.free_port()}"]
            else:
                cmd = [h.ember_binary(), "--http.address=127.0.0.1:0", f"--data.dir={d}/data",
                       f"--scrape.config-file={path}"]
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_bad_configs_are_refused(self):
        cases = [
            ("scrape_configs:\n  - job_name: api\n    scrape_interval: 5s\n"
             "    scrape_timeout: 5s\n", ['job "api"', "scrape_timeout"]),
            ("scrape_configs:\n  - job_name: api\n    scrape_intervall: 5s\n",
             ['job "api"', "scrape_intervall"]),
            ("scrape_configs:\n  - job_name: api\n    relabel_configs: [{action: hashmod}]\n",
             ['job "api"', "relabel_configs[0]"]),
            ("scrape_configs:\n  - job_name: api\n    kubernetes_sd_configs: [{role: node}]\n",
             ['job "api"', "kubernetes_sd_configs.role"]),
        ]
        for text, needles in cases:
            for scraper in (False, True):
                with self.subTest(text=text, scraper=scraper):
                    r = self.run_ember(text, scraper)
                    self.assertNotEqual(r.returncode, 0)
                    for n in needles:
                        self.assertIn(n, r.stderr)


if __name__ == "__main__":
    unittest.main()
