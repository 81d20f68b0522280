"""Issue 12 (hardening), replayed end to end against the all-in-one:

1. regex selectors over long label values answer right (checked against
   Python's `re`, a second engine) or with an error, never a silent miss;
2. a gzip bomb with a 16 MiB profile cap costs at most ~3x the cap in peak
   memory, and LabelValues stays fast while eight bombs arrive;
3. 1,000 idle keep-alive connections cost at most 16 KiB each, the memory
   comes back after they close, and --http.max-connections refuses clearly;
6. chunk data not followed by CRLF is a 400 and a request pipelined behind
   it is not served;
7. SelectSeries with step > end - start still returns the data in range.
"""
import random
import re
import socket
import threading
import time
import unittest
import zlib

import distributed_harness as dh
import harness as h

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
GOOD = "pprof/pyroscope-cpu.pprof"


class RegexLongValuesTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        raw = h.read_testdata(GOOD)
        cls.values = ["a" * n + "b" for n in (10, 900, 1100, 1500, 2000)] + \
                     ["a" * 1500, "x" * 1200 + "y", "ab" * 700]
        series = [({"service_name": "rx", "pod": v, "__name__": "process_cpu"}, [raw])
                  for v in cls.values]
        r = cls.srv.push(series, check=True)
        assert r.status == 200, r.describe()
        h.wait_for(lambda: len(cls.pods('{service_name="rx"}')) == len(cls.values),
                   timeout=20, what="long-value series stored")

    @classmethod
    def pods(cls, selector):
        end = h.now_ms() + 3600_000
        return set(cls.srv.label_values("pod", matchers=[selector], start=0, end=end))

    def check(self, pattern, want=None):
        if want is None:
            want = {v for v in self.values if re.fullmatch(pattern, v, re.S)}
        got = self.pods('{service_name="rx", pod=~"%s"}' % pattern)
        self.assertEqual(got, want, f"pod=~{pattern!r}")

    def test_issue_patterns(self):
        # Python's backtracking re is itself exponential on (a|aa)+b over a
        # long run of a's without b, so the oracle here is written out.
        a_then_b = {v for v in self.values if v.endswith("b") and set(v[:-1]) == {"a"}}
        self.check("(a)+b", a_then_b)
        self.check("(a|aa)+b", a_then_b)
        self.check("(.)+", set(self.values))
        self.check("(.)*b", {v for v in self.values if v.endswith("b")})
        for p in ("a+", "(ab)+", "x+y"):
            self.check(p)

    def test_random_patterns_against_python_re(self):
        rnd = random.Random(12)
        atoms = ["a", "b", "x", "y", ".", "[ab]", "[^a]"]
        quants = ["", "", "*", "+", "?", "{1,3}"]
        for _ in range(40):
            parts = []
            for _ in range(rnd.randint(1, 3)):
                a = rnd.choice(atoms)
                if rnd.random() < 0.3:  # alternatives kept disjoint: Python's re must not blow up
                    a = "(" + rnd.choice([a, "a|x", "b|y", "ab|y"]) + ")"
                parts.append(a + rnd.choice(quants))
            self.check("".join(parts))

    def test_undecidable_is_an_error(self):
        end = h.now_ms() + 3600_000
        req_cls, _ = h.rpc_classes(f"{h.QUERIER}/LabelValues")
        r = self.srv.call(f"{h.QUERIER}/LabelValues",
                          req_cls(name="pod", matchers=['{pod=~"(a|a|aa)*(b|c)"}'], start=0,
                                  end=end), check=False)
        self.assertIn(r.status // 100, (4, 5), r.describe())
        self.assertIn("regular expression", r.body.decode(errors="replace"))



class SeriesStepTest(h.ServerTestCase):
    """Pyroscope's querier reads SelectSeries from start - step and its
    rangeSeries puts [start - step, start] into the point at start; later
    profiles go to the first boundary start + k*step >= t that is <= end.
    So with step > end - start, the answer is the point at start."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = cls.srv.ingest("steppy{env=test}", h.read_testdata(GOOD), {"format": "pprof"},
                           content_type="application/octet-stream")
        assert r.status == 200, r.describe()
        cls.t_ms = h.manifest()[GOOD]["time_nanos"] // 1_000_000
        cls.total = h.wait_for(lambda: cls.srv.series_sum(CPU, '{service_name="steppy"}',
                                                          cls.t_ms - 60_000, cls.t_ms + 60_000),
                               timeout=15, what="profile stored")

    def points(self, start, end, step):
        m = self.srv.q("SelectSeries", profile_typeID=CPU, label_selector='{service_name="steppy"}',
                       start=start, end=end, step=step)
        return [(pt.timestamp, pt.value) for s in m.series for pt in s.points]

    def test_step_larger_than_range(self):
        t = self.t_ms
        # the profile is within one step before start: one point, at start
        self.assertEqual(self.points(t + 10, t + 20, 60.0), [(t + 10, self.total)])
        self.assertEqual(self.points(t, t, 60.0), [(t, self.total)])
        # past start and no boundary <= end after it: Pyroscope answers nothing
        self.assertEqual(self.points(t - 10, t + 10, 60.0), [])

    def test_small_steps_unchanged(self):
        t = self.t_ms
        pts = self.points(t - 10_000, t + 10_000, 1.0)
        self.assertEqual(sum(v for _, v in pts), self.total)
        self.assertEqual(len(pts), 1)
        self.assertGreaterEqual(pts[0][0], t)
        self.assertLess(pts[0][0], t + 1000)


def gzip_bomb(size):
    """gzip of `size` zero bytes (about 1 MB for 1 GiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    return b"".join([c.compress(chunk) for _ in range(size // len(chunk))] + [c.flush()])


class GzipBombTest(h.ServerTestCase):
    CAP = 16 << 20
    server_args = ("--ingest.max-profile-bytes=16MiB",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bomb = gzip_bomb(1 << 30)
        r = cls.srv.ingest("calm{env=test}", h.read_testdata(GOOD), {"format": "pprof"},
                           content_type="application/octet-stream")
        assert r.status == 200, r.describe()

    def send_bomb(self, path="/ingest?name=bomb&format=pprof"):
        return self.srv.request("POST", path, self.bomb,
                                {"Content-Encoding": "gzip",
                                 "Content-Type": "application/octet-stream"}, timeout=60)

    def test_bomb_is_refused_within_the_profile_cap(self):
        before = self.srv.rss_peak_kib()
        r = self.send_bomb()
        self.assertIn(r.status, (413, 503), r.describe())
        grown = (self.srv.rss_peak_kib() - before) * 1024
        self.assertLessEqual(grown, 3 * self.CAP, f"peak RSS grew by {grown >> 20} MiB")

    def test_queries_stay_fast_while_eight_bombs_arrive(self):
        end = h.now_ms() + 3600_000
        statuses, lat = [], []
        threads = [threading.Thread(target=lambda: statuses.append(self.send_bomb().status))
                   for _ in range(8)]
        episode0 = time.monotonic()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            t0 = time.monotonic()
            self.assertIn("calm", self.srv.label_values("service_name", start=0, end=end))
            lat.append(time.monotonic() - t0)
        for t in threads:
            t.join()
        episode = time.monotonic() - episode0
        self.assertEqual(len(statuses), 8)
        self.assertTrue(all(s in (413, 503) for s in statuses), statuses)
        # Queries are answered while the bombs are handled, not after them:
        # several answers, each within half the episode. Both are measured on
        # the same busy machine, so load scales both sides (docs/testing.md).
        self.assertGreaterEqual(len(lat), 2, f"one query spanned the {episode:.3f}s episode")
        self.assertLess(max(lat), episode / 2,
                        f"LabelValues took up to {max(lat):.3f}s of a {episode:.3f}s episode")
        self.assertLessEqual(self.srv.rss_peak_kib() * 1024, 3 * self.CAP + (64 << 20))


class IdleConnectionsTest(h.ServerTestCase):
    server_args = ("--http.max-connections=1100",)

    def open_idle(self, n):
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
            socks.append(s)
        # one request on each, so every connection has been read from
        for s in socks:
            s.sendall(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in socks:
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
        return socks

    def test_thousand_idle_connections_are_cheap(self):
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 2400:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
        warm = self.open_idle(20)  # warm-up: first-use allocations are not per connection
        pid = self.srv.proc.pid
        base = h.rss_kib(pid)
        socks = self.open_idle(1000)
        time.sleep(0.5)
        flood = h.rss_kib(pid) - base
        per_conn = flood * 1024 / 1000
        print(f"\nidle connection cost: {per_conn / 1024:.1f} KiB each")
        self.assertLessEqual(per_conn, 16 * 1024)
        # past --http.max-connections: a clear 503 and a close
        extra = [socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
                 for _ in range(100)]
        refused = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        data = refused.recv(4096)
        self.assertTrue(data.startswith(b"HTTP/1.1 503"), data)
        self.assertIn(b"too many open connections", data)
        for s in warm + socks + extra + [refused]:
            s.close()
        h.wait_for(lambda: h.http_request(self.srv.port, "GET", "/ready").status == 200)
        time.sleep(1.0)
        kept = h.rss_kib(pid) - base
        print(f"flood: +{flood} KiB with 1,000 idle connections, +{kept} KiB after they closed")
        # Before the fix: ~60 KiB per connection, kept after close. What stays now
        # (fragments of a ~5 MB flood, under 8 KiB a connection) is bounded.
        self.assertLessEqual(kept, 8192, "memory not given back after the flood")


class TenantRateLimitTest(h.ServerTestCase):
    """Per-tenant ingestion rate: a tenant over its rate gets 429 with
    Retry-After while another tenant's pushes and queries go on."""
    server_args = ("--auth.multitenancy-enabled=true", "--ingest.rate-limit-profiles=1",
                   "--ingest.rate-burst-profiles=3")

    def push(self, tenant):
        raw = h.read_testdata(GOOD)
        return self.srv.push([({"__name__": "process_cpu", "service_name": f"svc-{tenant}"}, [raw])],
                             headers={"X-Scope-OrgID": tenant})

    def test_over_rate_is_429_others_unaffected(self):
        a = [self.push("noisy") for _ in range(6)]
        self.assertEqual([r.status for r in a[:3]], [200] * 3, [r.describe() for r in a])
        limited = [r for r in a[3:] if r.status == 429]
        self.assertGreaterEqual(len(limited), 2, [r.status for r in a])
        self.assertTrue(all(int(r.header("retry-after", "0")) >= 1 for r in limited))
        r = self.srv.ingest("svc-noisy", h.read_testdata(GOOD), {"format": "pprof"},
                            content_type="application/octet-stream",
                            headers={"X-Scope-OrgID": "noisy"})
        self.assertEqual(r.status, 429, r.describe())
        for _ in range(3):
            self.assertEqual(self.push("quiet").status, 200)
        end = h.now_ms() + 3600_000
        req_cls, _ = h.rpc_classes(f"{h.QUERIER}/LabelValues")
        r = self.srv.call(f"{h.QUERIER}/LabelValues", req_cls(name="service_name", start=0, end=end),
                          headers={"X-Scope-OrgID": "quiet"})
        self.assertEqual(list(r.msg.names), ["svc-quiet"])
        time.sleep(1.1)  # one profile/s refills
        self.assertEqual(self.push("noisy").status, 200)
        metrics = h.http_request(self.srv.port, "GET", "/metrics").body.decode()
        self.assertIn('ember_tenant_rate_limited_total{tenant="noisy"}', metrics)
        self.assertNotIn('ember_tenant_rate_limited_total{tenant="quiet"}', metrics)
        self.assertIn('ember_tenant_ingest_profiles_total{tenant="quiet"} 3', metrics)


class SeriesLimitTest(h.ServerTestCase):
    """--ingest.max-series-per-tenant=3: a request that would add a fourth
    active series is refused whole (429, nothing stored, counted per tenant);
    known series and other tenants go on."""
    server_args = ("--auth.multitenancy-enabled=true", "--ingest.max-series-per-tenant=3")

    def folded(self, tenant, svc):
        return self.srv.ingest(f"{svc}.cpu", b"main;work 5\n", {"format": "folded"},
                               headers={"X-Scope-OrgID": tenant})

    def services(self, tenant):
        end = h.now_ms() + 3600_000
        req_cls, _ = h.rpc_classes(f"{h.QUERIER}/LabelValues")
        r = self.srv.call(f"{h.QUERIER}/LabelValues", req_cls(name="service_name", start=0, end=end),
                          headers={"X-Scope-OrgID": tenant})
        return sorted(r.msg.names)

    def test_new_series_past_the_limit_are_refused_whole(self):
        for svc in ("a", "b", "c"):
            self.assertEqual(self.folded("wide", svc).status, 200)
        r = self.folded("wide", "d")
        self.assertEqual(r.status, 429, r.describe())
        self.assertIn("active series", r.describe())
        raw = h.read_testdata(GOOD)
        r = self.srv.push([({"__name__": "process_cpu", "service_name": "a"}, [raw]),
                           ({"__name__": "process_cpu", "service_name": "e"}, [raw])],
                          headers={"X-Scope-OrgID": "wide"})
        self.assertEqual(r.status, 429, r.describe())   # one new series: the whole push
        self.assertEqual(self.folded("wide", "b").status, 200)   # known: goes on
        for svc in ("x", "y", "z"):
            self.assertEqual(self.folded("narrow", svc).status, 200)
        self.assertEqual(self.services("wide"), ["a", "b", "c"])
        self.assertEqual(self.services("narrow"), ["x", "y", "z"])
        m = h.http_request(self.srv.port, "GET", "/metrics").body.decode()
        self.assertIn('ember_tenant_series_limited_total{tenant="wide"} 2', m)
        self.assertNotIn('ember_tenant_series_limited_total{tenant="narrow"}', m)
        self.assertIn('ember_tenant_active_series{tenant="wide"} 3', m)


class ConcurrentQueries:
    """--querier.max-concurrent-queries=1: queries of one tenant that overlap
    get 429 with Retry-After (counted per tenant on /metrics) while another
    tenant's queries in the same moments are all answered, and every answer
    given is the full one (checked against the folded stacks written)."""
    ARGS = ("--auth.multitenancy-enabled=true", "--querier.max-concurrent-queries=1")
    N = 12

    def write(self, writer):
        self.want = {}
        # folded stacks of <name>.cpu at the default 100 Hz: process_cpu, in ns
        # Besides small random bodies, a few with 20,000 distinct stacks each,
        # so one merge takes long enough for the others to arrive during it.
        wide = "".join(f"main;w{i % 100};x{i} 1\n" for i in range(20_000)).encode()
        for tenant in ("busy", "calm"):
            total = 0
            for seed in range(46):
                body = dh.folded(seed) if seed < 40 else wide
                total += sum(int(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines())
                r = writer.ingest(f"svc-{tenant}.cpu", body, {"format": "folded"},
                                  headers={"X-Scope-OrgID": tenant})
                self.assertEqual(r.status, 200, r.describe())
            self.want[tenant] = total * 10_000_000

    def merge(self, target, tenant):
        req_cls, resp_cls = h.rpc_classes(f"{h.QUERIER}/SelectMergeStacktraces")
        req = req_cls(profile_typeID=CPU, label_selector=f'{{service_name="svc-{tenant}"}}', start=0,
                      end=h.now_ms() + 3600_000)
        return target.call(f"{h.QUERIER}/SelectMergeStacktraces", req,
                           headers={"X-Scope-OrgID": tenant}, check=False)

    def overlap(self, target):
        """N busy merges released together, calm merges alongside."""
        gate = threading.Barrier(self.N + 1)
        busy, calm = [None] * self.N, []

        def one(i):
            gate.wait()
            busy[i] = self.merge(target, "busy")

        threads = [threading.Thread(target=one, args=(i,)) for i in range(self.N)]
        for t in threads:
            t.start()
        gate.wait()
        for _ in range(3):
            calm.append(self.merge(target, "calm"))
        for t in threads:
            t.join()
        return busy, calm

    def check_total(self, r, tenant):
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(r.msg.flamegraph.total, self.want[tenant])

    def run_overlap(self, target, metrics_of):
        for attempt in range(5):
            busy, calm = self.overlap(target)
            for r in calm:
                self.check_total(r, "calm")
            refused = [r for r in busy if r.status == 429]
            for r in busy:
                if r.status != 429:
                    self.check_total(r, "busy")
            if refused:
                break
        self.assertTrue(refused, "no overlapping query was refused in 5 rounds")
        self.assertTrue(all(r.header("retry-after") == "1" for r in refused))
        self.assertIn("too many concurrent queries", refused[0].describe())
        m = metrics_of()
        self.assertRegex(m, r'ember_tenant_queries_refused_total\{tenant="busy"\} [1-9]')
        self.assertNotIn('ember_tenant_queries_refused_total{tenant="calm"}', m)
        # the slots were all given back
        self.check_total(self.merge(target, "busy"), "busy")


class ConcurrentQueriesAllInOneTest(ConcurrentQueries, h.ServerTestCase):
    server_args = ConcurrentQueries.ARGS

    def test_overlapping_queries_of_one_tenant(self):
        self.write(self.srv)
        self.run_overlap(self.srv, lambda: h.http_request(self.srv.port, "GET",
                                                          "/metrics").body.decode())


class ConcurrentQueriesQuerierTest(ConcurrentQueries, dh.ClusterTestCase):

    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.ingester = dh.ingester(cls.redis.url, args=("--auth.multitenancy-enabled=true",))
        cls.querier = dh.querier(cls.redis.url, args=ConcurrentQueries.ARGS)
        for p in (cls.ingester, cls.querier):
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.querier, 1)

    def test_overlapping_queries_through_ember_querier(self):
        self.write(self.ingester)
        self.redis.wait_drained()
        self.run_overlap(self.querier, lambda: h.http_request(self.querier.port, "GET",
                                                              "/metrics").body.decode())


def exchange(port, raw, wait=3.0):
    """Sends raw bytes, reads until the server closes or `wait` passes."""
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(raw)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            data += d
    return data


class StrictHttpTest(h.ServerTestCase):

    def test_chunk_data_without_crlf_is_refused(self):
        for bad in (b"3\r\nabcXX0\r\n\r\n", b"3\r\nabc\n0\r\n\r\n", b"3\r\nabc\r0\r\n\r\n"):
            raw = (b"POST /ingest?name=smuggle&format=folded HTTP/1.1\r\nHost: x\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n" + bad +
                   b"GET /nope-404 HTTP/1.1\r\nHost: x\r\n\r\n")
            data = exchange(self.srv.port, raw)
            self.assertTrue(data.startswith(b"HTTP/1.1 400"), (bad, data[:300]))
            self.assertEqual(data.count(b"HTTP/1.1 "), 1, f"pipelined request served: {data!r}")

    def test_well_formed_chunks_still_work(self):
        raw = (b"POST /ingest?name=chunky&format=folded HTTP/1.1\r\nHost: x\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n6\r\na;b 1\n\r\n0\r\n\r\n"
               b"GET /nope-404 HTTP/1.1\r\nHost: x\r\n\r\n")
        data = exchange(self.srv.port, raw)
        self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:300])
        self.assertIn(b"HTTP/1.1 404", data[10:], data[:400])


if __name__ == "__main__":
    unittest.main()
