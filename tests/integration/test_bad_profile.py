"""One bad profile never hurts anyone else (issue 25): a profile whose values
overflow int64 when the store sums them is refused by the receiver with a
4xx naming the reason — through /ingest pprof, Push, OTLP/HTTP and folded
text — by the all-in-one `ember` and by an `ember-ingester` over a real
redis-server, while eight client threads push valid profiles alongside.

Every valid push gets 200 and is stored: its service's total read back
(SelectSeries) equals what the client sent, computed here from the values
the test put in. Over Redis nothing stays pending afterwards (XPENDING and
XINFO GROUPS on the redis-server). Before the fix the all-in-one's writer
failed whole batches (503 for valid clients too) and over Redis the receiver
answered 200 for an entry that stayed pending for good. Nothing here
depends on wall time."""
import json
import threading
import time
import unittest

import distributed_harness as dh
import harness as h

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
INT64_MAX = (1 << 63) - 1
CLIENTS = 8
PUSHES_PER_CLIENT = 6
OTLP_HTTP = "/v1development/profiles"


def pprof(values, time_ns):
    """An uncompressed cpu/nanoseconds pprof: one sample per value, each on a
    stack of its own (main;f<i>)."""
    P = h.pb().profile
    p = P.Profile()
    p.string_table.extend(["", "cpu", "nanoseconds", "main"])
    p.sample_type.add(type=1, unit=2)
    p.period_type.type, p.period_type.unit, p.period = 1, 2, 10_000_000
    p.time_nanos = time_ns
    p.function.add(id=1, name=3, system_name=3)
    p.location.add(id=1).line.add(function_id=1)
    for i, v in enumerate(values):
        p.string_table.append(f"f{i}")
        p.function.add(id=i + 2, name=len(p.string_table) - 1, system_name=len(p.string_table) - 1)
        p.location.add(id=i + 2).line.add(function_id=i + 2)
        p.sample.add(location_id=[i + 2, 1], value=[v])
    return p.SerializeToString()


def otlp_all_max(service, time_ns):
    """OTLP/HTTP JSON: one profile, two samples whose every value is int64 max."""
    samples = [{"stackIndex": s, "values": [str(INT64_MAX)]} for s in (1, 2)]
    return json.dumps({
        "dictionary": {"stringTable": ["", "off_cpu", "nanoseconds", "main", "work", service],
                       "mappingTable": [{}],
                       "functionTable": [{}, {"nameStrindex": 3}, {"nameStrindex": 4}],
                       "locationTable": [{}, {"lines": [{"functionIndex": 1}]},
                                         {"lines": [{"functionIndex": 2}]}],
                       "stackTable": [{}, {"locationIndices": [1]}, {"locationIndices": [2, 1]}]},
        "resourceProfiles": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": service}}]},
            "scopeProfiles": [{"profiles": [{
                "sampleType": {"typeStrindex": 1, "unitStrindex": 2},
                "timeUnixNano": str(time_ns), "samples": samples}]}]}]}).encode()


# folded at sampleRate=100: every value x 1e7 ns; 5e11 -> 5e18 per line.
FOLDED_REPEATED = b"main;work 500000000000\nmain;work 500000000000\n"
FOLDED_TWO_STACKS = b"main;a 500000000000\nmain;b 500000000000\n"


class Load:
    """Eight clients pushing valid profiles (alternately /ingest pprof and
    Push), each under a service of its own; records what was sent and every
    status that was not 200."""

    def __init__(self, srv, run):
        self.srv, self.run = srv, run
        self.sent = {}
        self.failures = []
        self.lock = threading.Lock()

    def client(self, k):
        service = f"ok-{self.run}-{k}"
        total = 0
        for i in range(PUSHES_PER_CLIENT):
            values = [(k + 1) * 10_000_000, (i + 1) * 10_000_000]
            body = pprof(values, time.time_ns())
            if i % 2 == 0:
                r = self.srv.ingest(service, body, {"format": "pprof"},
                                    content_type="application/octet-stream")
            else:
                r = self.srv.push([({"__name__": "process_cpu", "service_name": service},
                                    [body])])
            if r.status == 200:
                total += sum(values)
            else:
                with self.lock:
                    self.failures.append((service, i, r.describe()))
        with self.lock:
            self.sent[service] = total

    def start(self):
        self.threads = [threading.Thread(target=self.client, args=(k,)) for k in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join()


class BadProfileCase:
    """The checks, for a receiver `self.ingest_srv` and a query front
    `self.query_srv` (the same all-in-one, or an ingester and a querier)."""

    def send_bad(self, run):
        """Each overflowing profile through each path; the answers."""
        srv, now = self.ingest_srv, time.time_ns()
        bad = pprof([INT64_MAX, INT64_MAX], now)
        out = {}
        out["pprof"] = srv.ingest(f"bad-{run}", bad, {"format": "pprof"},
                                  content_type="application/octet-stream")
        out["push"] = srv.push([({"__name__": "process_cpu", "service_name": f"bad-{run}"},
                                 [bad])])
        out["otlp"] = srv.request("POST", OTLP_HTTP, otlp_all_max(f"bad-{run}", now),
                                  {"Content-Type": "application/json"})
        for name, body in (("folded_repeated", FOLDED_REPEATED),
                           ("folded_two_stacks", FOLDED_TWO_STACKS)):
            out[name] = srv.ingest(f"bad-{run}.cpu", body,
                                   {"format": "folded", "sampleRate": "100"})
        return out

    def check_refusals(self, answers):
        want = {"pprof": (422, "sum past int64"), "push": (400, "sum past int64"),
                "otlp": (400, "sum past int64"), "folded_repeated": (422, "sum past int64"),
                "folded_two_stacks": (422, "sum past int64")}
        for name, (status, why) in want.items():
            r = answers[name]
            self.assertEqual(r.status, status, f"{name}: {r.describe()}")
            self.assertIn(why, r.body.decode(errors="replace"), f"{name}: {r.describe()}")

    def run_with_load(self, run):
        load = Load(self.ingest_srv, run)
        load.start()
        answers = [self.send_bad(run) for _ in range(3)]   # while the clients push
        load.join()
        for a in answers:
            self.check_refusals(a)
        self.assertEqual(load.failures, [], "every valid push gets 200")
        self.assertEqual(len(load.sent), CLIENTS)
        start, end = h.now_ms() - 3600_000, h.now_ms() + 60_000
        for service, total in load.sent.items():
            got = h.eventually(lambda s=service: self.query_srv.series_sum(
                CPU, f'{{service_name="{s}"}}', start, end), total, timeout=30)
            self.assertEqual(got, total, f"{service}: stored total equals what was sent")
        for bad in (f"bad-{run}",):
            got = self.query_srv.series_sum(CPU, f'{{service_name="{bad}"}}', start, end)
            self.assertEqual(got, 0, "nothing of the refused profiles is stored")


class AllInOneTest(BadProfileCase, h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ingest_srv = cls.query_srv = cls.srv

    def test_refused_with_valid_clients_alongside(self):
        self.run_with_load("aio")


class OverRedisTest(BadProfileCase, dh.ClusterTestCase):

    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis().start()
        cls.ingester = dh.ingester(cls.redis.url)
        cls.procs.append(cls.ingester)
        cls.ingester.start()
        cls.querier = dh.querier(cls.redis.url)
        cls.procs.append(cls.querier)
        cls.querier.start()
        dh.wait_members(cls.querier, 1)
        cls.ingest_srv, cls.query_srv = cls.ingester, cls.querier

    def test_refused_with_valid_clients_alongside(self):
        self.run_with_load("redis")
        self.redis.wait_drained()
        streams = self.redis.streams()
        self.assertTrue(streams, "the valid profiles went through the streams")
        for key in streams:
            summary = self.redis.cmd("XPENDING", key, "ingesters")
            self.assertEqual(summary[0], 0, f"{key}: nothing pending ({summary})")
        self.assertEqual(self.redis.totals()["pending"], 0)


if __name__ == "__main__":
    unittest.main()
