"""A stream entry the writer cannot apply is set aside alone (issue 25).

Entries are built here, independently of ember (python protobuf from the
repo's protos, XADD over RESP), before any ingester runs: valid
IngestProfiles and, among them in the same stream, one whose pprof has every
value at 2^63-1 (its totals overflow int64, which the store refuses; a
receiver of another version may have let it through). Then a real
ember-ingester consumes them over a real redis-server while it also takes
valid pushes over HTTP. Afterwards: nothing is pending, the bad entry is
the one dead letter in ember:dead:<p> with its origin and reason, the
counter says 1, and a querier finds every valid profile (MANIFEST totals,
not ember's) and nothing of the bad one. Today's writer failed the whole
batch: the stream stayed pending for good and the valid entries with it.
"""
import unittest

import distributed_harness as dh
import harness as h
from test_agent_redis import resp_command
from test_redis_entry_upgrade import FILE, OLD, assert_stored, bare_entry, start_and_push

SERVICE = "dead-letter-app"
PART = 3  # OLD valid entries are XADDed there directly, the bad one in their midst
NEW = 3  # valid profiles pushed over HTTP
INT64_MAX = (1 << 63) - 1


def overflowing(raw):
    """The pprof with every sample value at int64's maximum."""
    p = h.pb().profile.Profile()
    p.ParseFromString(raw)
    assert len(p.sample) >= 2
    for s in p.sample:
        for k in range(len(s.value)):
            s.value[k] = INT64_MAX
    return p.SerializeToString()


class DeadLetterTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        raw = h.gunzip_if(h.read_testdata(FILE))
        cls.t0 = (h.now_ms() // 1000 - 1800) * 1000
        stream = f"ember:ingest:{PART}"
        for k in range(OLD):
            if k == OLD // 2:
                cls.bad = bare_entry(overflowing(raw), (cls.t0 + 500) * 1_000_000, SERVICE, "bad")
                cls.bad_id = resp_command(cls.redis.port, "XADD", stream, "*", "m", cls.bad)
            body = bare_entry(raw, (cls.t0 + k * 1000) * 1_000_000, SERVICE, f"old-{k}")
            resp_command(cls.redis.port, "XADD", stream, "*", "m", body)
        # waits until nothing is pending nor undelivered: today's writer
        # left the bad entry's batch pending for good
        start_and_push(cls, SERVICE, NEW, lambda k: h.read_testdata(FILE))

    def test_bad_entry_is_the_one_dead_letter(self):
        dead = resp_command(self.redis.port, "XRANGE", f"ember:dead:{PART}", "-", "+")
        self.assertEqual(len(dead), 1)
        fields = dict(zip(dead[0][1][::2], dead[0][1][1::2]))
        self.assertEqual(fields[b"m"], self.bad)
        self.assertEqual(fields[b"stream"], f"ember:ingest:{PART}".encode())
        self.assertEqual(fields[b"id"], self.bad_id)
        # "invalid" from the store; "undecodable" once the writer's decoder
        # refuses it first (the shared validation of issue 25)
        self.assertIn(fields[b"error"], (b"invalid", b"undecodable"))
        self.assertTrue(fields[b"reason"])
        self.assertEqual(fields[b"consumer"], dh.consumer_id(self.ing).encode())
        self.assertGreater(int(fields[b"time_ms"]), self.t0)
        self.assertEqual(dh.metric(self.ing, "ember_ingest_dead_letter_total"), 1)
        for p in range(16):
            if p != PART:
                self.assertEqual(self.redis.cmd("EXISTS", f"ember:dead:{p}"), 0)

    def test_valid_profiles_are_stored(self):
        assert_stored(self, SERVICE, ((".*", OLD + NEW), ("old-.*", OLD), ("new-.*", NEW),
                                      ("bad", 0)))


if __name__ == "__main__":
    unittest.main()
