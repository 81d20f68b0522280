"""Two `ember-scraper` replicas over one redis-server share 10 targets.

Each target is a small HTTP server of this test that serves a valid pprof and
remembers which replica asked (the X-Ember-Scraper-Replica header) and when,
so the split is checked where it matters, at the targets:
  - every target (two profiles each, 20 scrape targets) is scraped by exactly
    one replica, both replicas get a share, and their /targets pages agree;
  - no target is ever scraped by both replicas in the same interval, not even
    while the membership changes;
  - after one replica stops, the other scrapes everything within a few
    intervals;
  - what was scraped is in the ember:ingest:<p> streams as IngestProfile
    messages with the job, instance and service_name labels, and only in the
    first PARTITIONS streams: one replica is told the count as
    --ingest.partitions, the other by the deprecated alias
    --redis.partitions, which still works and logs one warning.
"""
import os
import shutil
import signal
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import distributed_harness as dh
import harness as h
from test_agent_redis import stream_messages
from test_scraper import targets, write_file

N_TARGETS = 10
PARTITIONS = 4  # of the 16 streams stream_messages reads: the default would use them all
PARTITIONS_FLAG = {"scraper-a": "--ingest.partitions", "scraper-b": "--redis.partitions"}
PATHS = ("/debug/pprof/goroutine", "/debug/pprof/threadcreate")


def scraper_binary():
    return os.path.join(h.BIN_DIR, "services", "scraper", "ember-scraper")


def goroutine_profile():
    """A small valid pprof (python protobuf, independent of ember's encoder)."""
    p = h.pb().profile.Profile()
    p.string_table.extend(["", "goroutine", "count", "main.main", "main.go"])
    p.sample_type.add(type=1, unit=2)
    p.period_type.type, p.period_type.unit, p.period = 1, 2, 1
    p.function.add(id=1, name=3, system_name=3, filename=4)
    loc = p.location.add(id=1, address=0x1000)
    loc.line.add(function_id=1, line=7)
    p.sample.add(location_id=[1], value=[3])
    p.time_nanos = time.time_ns()
    return p.SerializeToString()


class Target:
    """An HTTP server on 127.0.0.1 logging (time, path, replica) per request."""

    def __init__(self):
        self.log = []
        self.lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                with target.lock:
                    target.log.append((time.monotonic(), path,
                                       self.headers.get("X-Ember-Scraper-Replica")))
                body = goroutine_profile()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def requests(self, since=0.0, until=float("inf")):
        with self.lock:
            return [r for r in self.log if since <= r[0] < until]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class ScraperReplicasTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.redis = dh.Redis(aof=False).start()
        cls.targets = [Target() for _ in range(N_TARGETS)]
        cls.dir = tempfile.mkdtemp(prefix="ember-scr-redis-")
        cls.config = os.path.join(cls.dir, "parca.yaml")
        addrs = ", ".join(f"'{t.address}'" for t in cls.targets)
        write_file(cls.config, (
            "scrape_configs:\n"
            "  - job_name: fleet\n"
            "    scrape_interval: 1s\n"
            "    profiling_config:\n"
            "      pprof_config:\n"
            "        memory: {enabled: false}\n"
            "        block: {enabled: false}\n"
            "        mutex: {enabled: false}\n"
            "        process_cpu: {enabled: false}\n"
            "        threads: {enabled: true, path: /debug/pprof/threadcreate}\n"
            f"    static_configs: [{{targets: [{addrs}]}}]\n"))
        cls.replicas = {}
        for rid in ("scraper-a", "scraper-b"):
            cls.replicas[rid] = dh.Role(scraper_binary(), False, args=[
                f"--config.file={cls.config}", f"--redis.url={cls.redis.url}",
                f"--member.id={rid}", "--member.heartbeat=300ms", "--member.ttl=2s",
                "--scrape.handover=1s", f"{PARTITIONS_FLAG[rid]}={PARTITIONS}"])
        try:
            for r in cls.replicas.values():
                r.start()
        except Exception:
            cls.tearDownClass()
            raise
        cls.started = time.monotonic()

    @classmethod
    def tearDownClass(cls):
        for r in cls.replicas.values():
            r.cleanup()
        for t in cls.targets:
            t.stop()
        cls.redis.cleanup()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def keys(self):
        return [(t, p) for t in self.targets for p in PATHS]

    def scrapers_of(self, target, path, since, until):
        return {r[2] for r in target.requests(since, until) if r[1] == path}

    def assert_no_overlap(self):
        """Requests for one target from two replicas are never in one interval."""
        for t, path in self.keys():
            reqs = sorted(r for r in t.requests() if r[1] == path)
            for a, b in zip(reqs, reqs[1:]):
                if a[2] != b[2]:
                    self.assertGreater(b[0] - a[0], 0.5,
                                       f"{t.address}{path} scraped by {a[2]} and {b[2]} "
                                       f"{b[0] - a[0]:.3f}s apart")

    def test_split_then_takeover(self):
        a, b = self.replicas["scraper-a"], self.replicas["scraper-b"]
        both = ["scraper-a", "scraper-b"]
        for r in (a, b):
            h.wait_for(lambda r=r: targets(r)["members"] == both, timeout=15,
                       what="both replicas in each member list")
        time.sleep(2.5)  # the handover of the first split
        t0 = time.monotonic()
        time.sleep(4)
        t1 = time.monotonic()
        owners = {}
        for t, path in self.keys():
            who = self.scrapers_of(t, path, t0, t1)
            self.assertEqual(len(who), 1, f"{t.address}{path} scraped by {who}")
            owners[(t.address, path)] = who.pop()
        self.assertEqual(set(owners.values()), set(both), "one replica got nothing")
        # The /targets pages agree with what the targets saw.
        owned = {}
        for rid, r in self.replicas.items():
            for x in targets(r)["activeTargets"]:
                if x["owned"]:
                    key = (x["labels"]["instance"], x["scrapeUrl"].split(x["labels"]["instance"])[1])
                    self.assertNotIn(key, owned, f"{key} owned by {owned.get(key)} and {rid}")
                    owned[key] = rid
        self.assertEqual(owned, owners)

        # One replica leaves: the other takes everything over.
        stopped = time.monotonic()
        self.assertEqual(a.stop(), 0)
        h.wait_for(lambda: targets(b)["members"] == ["scraper-b"], timeout=10,
                   what="scraper-a gone from scraper-b's list")
        h.wait_for(lambda: all(x["owned"] for x in targets(b)["activeTargets"]), timeout=10,
                   what="scraper-b owning every target")
        took = time.monotonic() - stopped
        self.assertLess(took, 5, "takeover slower than a few intervals")
        time.sleep(1.5)  # the handover
        t2 = time.monotonic()
        time.sleep(3)
        for t, path in self.keys():
            self.assertEqual(self.scrapers_of(t, path, t2, time.monotonic()), {"scraper-b"},
                             f"{t.address}{path} after scraper-a left")
        self.assert_no_overlap()

        # What was scraped went to the streams with the expected labels, under
        # either spelling of the partition count.
        msgs = stream_messages(self.redis.port)
        self.assertGreater(len(msgs), 2 * len(self.keys()))
        self.assertEqual({p for p, _ in msgs if p >= PARTITIONS}, set(),
                         "a replica published past its partition count")
        with open(b.log_path, "rb") as f:
            log_b = f.read().decode(errors="replace")
        with open(a.log_path, "rb") as f:
            log_a = f.read().decode(errors="replace")
        self.assertEqual(log_b.count("old=redis.partitions new=ingest.partitions"), 1)
        self.assertNotIn("deprecated setting name", log_a)
        instances = set()
        for _, m in msgs:
            labels = {l.name: l.value for l in m.labels}
            self.assertEqual(labels["job"], "fleet")
            self.assertEqual(labels["service_name"], "fleet")
            self.assertIn(labels["__name__"], ("goroutine", "threads"))
            self.assertEqual(labels["__delta__"], "false")
            self.assertTrue(m.delta_disabled)
            instances.add(labels["instance"])
        self.assertEqual(instances, {t.address for t in self.targets})


if __name__ == "__main__":
    unittest.main()
