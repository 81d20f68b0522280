"""parca-load's request matrix (parca.md §5.1) against ember, all-in-one and
ember-querier over ingesters: every request must answer ok.

Real parca-load cannot be installed here: the Go module proxy serves neither
github.com/parca-dev/parca-load nor the buf.build generated Parca client it
imports (403 for every version). tests/integration/parcaload stands in for it:
the same matrix (ProfileTypes discovery over the longest range; per round,
five parallel goroutines for ProfileTypes, Labels, Values, QueryRange with
step = range/7680, and Query merge FLAMEGRAPH_ARROW with node_trim_threshold
1/7680) through the same client library and transport as parca-load,
connect-go with connect.WithGRPCWeb(), on code generated from the repo's
Parca protos. It counts each response's status code as parca-load's
grpc_code label does.

Data: real profiles (a Go CPU profile and a Go heap profile from the shared
test data) written through ProfileStoreService.WriteRaw over gRPC-Web with
their time set to now, for two jobs."""
import json
import os
import struct
import subprocess
import time

import distributed_harness as dh
import harness as h
import parcaload_util
from test_parca_api import frame, parse_trailers, write_raw

PS = "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"
FILES = (("process_cpu", "pprof/gopprof-sample.cpu"), ("memory", "pprof/pyroscope-heap"))
JOBS = ("api", "db")
ROUNDS = 3


def write_data(writer):
    """Writes every file for every job through WriteRaw (gRPC-Web) on writer."""
    now_ns = time.time_ns()
    for i, (name, rel) in enumerate(FILES):
        raw = h.set_time_nanos(h.read_testdata(rel), now_ns - (i + 1) * 1_000_000_000)
        for job in JOBS:
            body = frame(write_raw({"__name__": name, "job": job, "instance": f"{job}-0"}, raw))
            r = writer.request("POST", PS, body, {"content-type": "application/grpc-web+proto"})
            assert r.status == 200 and parse_trailers(r.body)[0] == 0, r.describe()


def run_load(url, rounds=ROUNDS, extra=()):
    binary = parcaload_util.build()
    r = subprocess.run([binary, f"-url={url}", f"-rounds={rounds}", "-values-for-labels=job;instance",
                        '-labels=all;{job="api"}', *extra], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"parcaload failed ({r.returncode}):\n{r.stderr[-3000:]}"
    return json.loads(r.stdout), r.stderr


class ParcaLoadTest(dh.ClusterTestCase):

    @classmethod
    def set_up(cls):
        parcaload_util.build()  # SkipTest without the Go module proxy, before any process starts
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.aio = h.Ember()
        cls.ingesters = [dh.ingester(cls.redis.url) for _ in range(2)]
        cls.querier = dh.querier(cls.redis.url)
        for p in [cls.aio, *cls.ingesters, cls.querier]:
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.querier, 2)
        write_data(cls.aio)
        write_data(cls.ingesters[0])

    def check(self, url):
        out, stderr = run_load(url)
        self.assertIn("process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta", out["types"])
        self.assertIn("memory:inuse_space:bytes:space:bytes", out["types"])
        rpcs = {row["rpc"] for row in out["rows"]}
        self.assertEqual(rpcs, {"profiletypes", "labels", "values", "queryrange", "query_merge"})
        bad = [row for row in out["rows"] if set(row["codes"]) != {"ok"}]
        self.assertEqual(bad, [], f"non-ok codes:\n{stderr[-3000:]}")
        n_types = len(out["types"])
        total = sum(sum(row["codes"].values()) for row in out["rows"])
        # per round: R + T*R + L*T*R + 2*T*R*S (R=3 ranges, L=2 labels, S=2 selectors)
        self.assertEqual(total, ROUNDS * (3 + 3 * n_types + 6 * n_types + 12 * n_types))
        return out

    def test_01_all_in_one(self):
        self.check(f"http://127.0.0.1:{self.aio.port}")

    def test_02_querier_over_ingesters(self):
        # Written through Redis: stored once the streams are drained, not when
        # the querier first answers (this raced under load).
        self.redis.wait_drained(timeout=60)
        h.wait_for(lambda: self.querier.call(h.QUERIER + "/ProfileTypes",
                                             h.pb().querier.ProfileTypesRequest(start=0, end=h.now_ms() + 60000),
                                             check=False).status == 200, what="querier answers")
        self.check(f"http://127.0.0.1:{self.querier.port}")
