"""Stream entries across an upgrade: entries in the previous format (a bare
ember.v1.IngestProfile in field `m`, as every version before lean entries
wrote them) are consumed by the current ember-ingester and queryable.

The old entries are built here, independently of ember: python protobuf from
the repo's protos, XADD over RESP (test_agent_redis.py's helpers), before any
ingester runs. Then an ingester starts (its group is created at id 0, so it
reads them), the same ingester also receives profiles over HTTP, half as the
gzip file, half gunzipped (the raw ones it publishes as lean entries: zstd
behind the 0x00 'E' 'L' 0x02 header; the gzip ones as bare IngestProfiles
whose pprof is the very body sent, checked in Redis with python protobuf),
and a querier must count every profile once: the expected totals come from
testdata's MANIFEST, not from ember.
"""
import os
import struct
import unittest

import distributed_harness as dh
import harness as h
from test_agent_redis import ingest_pb, resp_command

FILE = "pprof/gopprof-sample.cpu"
SERVICE = "upgrade-app"
OLD = 6  # entries written in the previous format
NEW = 4  # profiles pushed through the new receivers
PARTITIONS = 16


def bare_entry(raw, time_ns, service, pod):
    """An IngestProfile as the previous receivers packed it (labels as the
    /ingest route sets them for this name and pprof): a bare stream entry."""
    m = ingest_pb().IngestProfile()
    m.tenant = "anonymous"
    m.ingest_id = os.urandom(16)
    m.received_unix_nanos = time_ns
    for name, value in (("__name__", "process_cpu"), ("service_name", service), ("pod", pod)):
        lp = m.labels.add()
        lp.name, lp.value = name, value
    m.pprof = raw
    m.time_nanos = time_ns
    return m.SerializeToString()


def start_and_push(cls, service, new, body_of):
    """Starts an ingester and a querier on cls.redis, then pushes new profiles
    of FILE (body_of(k): the body) as service{pod=new-<k>}, one second apart
    after cls.t0 + OLD s, and waits until the streams are drained."""
    cls.ing = dh.ingester(cls.redis.url)
    cls.q = dh.querier(cls.redis.url)
    for p in (cls.ing, cls.q):
        cls.procs.append(p)
        p.start()
    dh.wait_members(cls.q, 1)
    for k in range(new):
        ts = cls.t0 // 1000 + OLD + k
        r = cls.ing.ingest(f"{service}{{pod=new-{k}}}", body_of(k),
                           params={"from": str(ts), "until": str(ts + 1), "format": "pprof"})
        assert r.status == 200, r.describe()
    cls.redis.wait_drained()


def assert_stored(tc, service, counts):
    """Per pod regex, the querier's total is that many times FILE's MANIFEST
    cpu total (around tc.t0)."""
    entry = h.manifest()[FILE]
    cpu = h.expected_totals(entry)[("cpu", "nanoseconds")]
    ptype = h.profile_type_id("process_cpu", "cpu", "nanoseconds", entry)
    start, end = tc.t0 - 60_000, tc.t0 + 60_000
    for pods, want in counts:
        sel = f'{{service_name="{service}",pod=~"{pods}"}}'
        h.eventually(lambda: tc.q.series_sum(ptype, sel, start, end), want * cpu)


class EntryUpgradeTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        raw = h.gunzip_if(h.read_testdata(FILE))
        cls.t0 = (h.now_ms() // 1000 - 1800) * 1000
        cls.old_ids = []
        for k in range(OLD):
            body = bare_entry(raw, (cls.t0 + k * 1000) * 1_000_000, SERVICE, f"old-{k}")
            cls.old_ids.append(resp_command(cls.redis.port, "XADD", f"ember:ingest:{k % PARTITIONS}",
                                            "*", "m", body))
        start_and_push(cls, SERVICE, NEW,
                       lambda k: h.read_testdata(FILE) if k % 2 == 0 else raw)

    def test_old_and_new_entries_are_stored_once_each(self):
        assert_stored(self, SERVICE, ((".*", OLD + NEW), ("old-.*", OLD), ("new-.*", NEW)))
        self.assertEqual(dh.metric(self.ing, "ember_redis_consumed_total"), OLD + NEW)

    def test_new_entries_are_lean(self):
        gz = h.read_testdata(FILE)
        raw_len = len(h.gunzip_if(gz))
        lean, bare = [], []
        for p in range(PARTITIONS):
            for entry_id, fields in resp_command(self.redis.port, "XRANGE", f"ember:ingest:{p}",
                                                 "-", "+") or []:
                if entry_id in self.old_ids:
                    continue
                m = dict(zip(fields[::2], fields[1::2]))[b"m"]
                self.assertLess(len(m), raw_len)
                if m[:1] != b"\x00":  # a gzip body goes as it came, in a bare message
                    msg = ingest_pb().IngestProfile()
                    msg.ParseFromString(m)
                    self.assertEqual(msg.pprof, gz)
                    bare.append(m)
                    continue
                self.assertEqual(m[:4], b"\x00EL\x02")
                (length,) = struct.unpack("<I", m[4:8])
                self.assertGreater(length, raw_len)  # the IngestProfile around the pprof
                lean.append(m)
        self.assertEqual((len(lean), len(bare)), (NEW // 2, NEW // 2))
        msg_bytes = dh.metric(self.ing, "ember_stream_entry_bytes_total")
        self.assertGreater(msg_bytes, sum(len(m) for m in lean + bare))


if __name__ == "__main__":
    unittest.main()
