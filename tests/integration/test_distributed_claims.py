"""Distributed mode: an ingester that loses entries it had already applied.

Ingester A commits a batch (profiles and applied ids in one LMDB
transaction) and, before its ack, dies or is paused past
--redis.claim-idle. Another ingester claims the entries and applies them
too. Queries sum over all ingesters, so A must forget its copy. The claim
script records the claim for A (ember:claimed:<group>:<A>), A forgets it at
start-up or when its ack finds the entries no longer its own, and every
acknowledged profile counts exactly once: series, flame graph and pprof
totals through a querier equal those of an all-in-one `ember` given the same
acknowledged pushes.

The crash window is made deterministic with the test-only failpoint
EMBER_FAILPOINT (exit-after-commit, stop-after-commit): right after the
first batch that wrote a profile is durable, before its ack.
"""
import random
import signal
import threading
import time
import unittest

import distributed_harness as dh
import harness as h

SERVICES = ("api", "db", "worker")


def writer_forgotten(e):
    """Messages the writer found in its store and deleted."""
    return sum(v for (n, labels), v in e.metrics().items()
               if n == "ember_writer_profiles_total" and ("result", "forgotten") in labels)


def is_stopped(proc):
    with open(f"/proc/{proc.pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


class ClaimsTest(unittest.TestCase):
    def setUp(self):
        self.procs = []
        self.redis = dh.Redis()
        self.redis.start()
        self.t0 = (h.now_ms() // 1000 - 3600) * 1000
        self.t1 = self.t0 + 3600 * 1000

    def tearDown(self):
        for p in self.procs:
            if p.proc is not None and p.proc.poll() is None:
                p.proc.send_signal(signal.SIGCONT)  # a stopped child would not see SIGTERM
            p.cleanup()
        self.redis.cleanup()

    def start_cluster(self, failpoint):
        self.aio = h.Ember()
        self.victim = dh.ingester(self.redis.url, env={"EMBER_FAILPOINT": failpoint})
        self.others = [dh.ingester(self.redis.url) for _ in range(2)]
        self.querier = dh.querier(self.redis.url)
        for p in [self.aio, self.victim, *self.others, self.querier]:
            self.procs.append(p)    # before start(): cleaned up even if it fails
            p.start()
        dh.wait_members(self.querier, 3)
        self.cid = dh.consumer_id(self.victim)

    def push_while(self, stop, acked):
        """Pushes through the other ingesters' receivers until stop is set; each
        profile the cluster acknowledged also goes to the all-in-one."""
        rnd = random.Random(7)
        while not stop.is_set():
            i = len(acked)
            ts = self.t0 // 1000 + (i % 100) * 30 + 5
            params = {"from": str(ts), "until": str(ts + 10), "format": "folded"}
            name = f"app.cpu{{svc=\"{SERVICES[i % 3]}\"}}"
            body = dh.folded(i)
            r = rnd.choice(self.others).ingest(name, body, params=params)
            if r.status == 200:
                r2 = self.aio.ingest(name, body, params=params)
                assert r2.status == 200, r2.describe()
                acked.append(i)
            time.sleep(0.005)

    def start_pushing(self):
        self.stop, self.acked = threading.Event(), []
        self.pusher = threading.Thread(target=self.push_while, args=(self.stop, self.acked))
        self.pusher.start()

    def stop_pushing(self):
        self.stop.set()
        self.pusher.join()

    def wait_claimed_from_victim(self):
        """Past claim-idle the others claim what the victim left pending, and
        each claim is recorded for it."""
        h.wait_for(lambda: self.redis.pending_of(self.cid) == 0, timeout=30,
                   what="the victim's entries claimed by the others")
        self.assertGreater(self.redis.claims_of(self.cid), 0)

    def wait_forgotten(self):
        h.wait_for(lambda: self.redis.claims_of(self.cid) == 0, timeout=30,
                   what="the claims record consumed")
        self.assertGreater(dh.metric(self.victim, "ember_redis_forgotten_total"), 0)
        # The victim had committed those entries: it found and deleted them.
        self.assertGreater(writer_forgotten(self.victim), 0)
        self.assertEqual(0, sum(dh.metric(o, "ember_redis_forgotten_total")
                                for o in self.others))

    def assert_counted_once(self):
        self.assertGreater(len(self.acked), 20)
        self.redis.wait_drained(timeout=30)
        dh.wait_members(self.querier, 3)
        ptype = self.aio.q("ProfileTypes", start=self.t0, end=self.t1).profile_types[0].ID

        def same(method, **fields):
            want = self.aio.q(method, **fields)
            got = self.querier.q(method, **fields)
            self.assertEqual(want, got, method)
            return want

        fg = same("SelectMergeStacktraces", profile_typeID=ptype, label_selector="{}",
                  start=self.t0, end=self.t1, max_nodes=0).flamegraph
        self.assertGreater(fg.total, 0)
        series = same("SelectSeries", profile_typeID=ptype, label_selector="{}",
                      start=self.t0, end=self.t1, step=60.0, group_by=["svc"])
        self.assertEqual(3, len(series.series))

        def pprof_total(e):
            raw = e.merge_profile(ptype, "{}", self.t0, self.t1)
            p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
            return sum(s.value[0] for s in p.sample)
        self.assertEqual(pprof_total(self.aio), pprof_total(self.querier))
        # And the oracle holds exactly what the cluster acknowledged (folded
        # samples at the default 100 Hz are 10 ms, in nanoseconds).
        self.assertEqual(sum(fg_sum(dh.folded(i)) for i in self.acked) * 10_000_000, fg.total)

    def test_exit_after_commit_then_restart(self):
        """The victim exits after its commit; the others claim its entries;
        restarted without the failpoint, it forgets them before reading."""
        self.start_cluster("exit-after-commit")
        self.start_pushing()
        try:
            h.wait_for(lambda: self.victim.proc.poll() is not None, timeout=30,
                       what="the victim exited at its failpoint")
            self.assertEqual(17, self.victim.proc.returncode)
            self.assertGreater(self.redis.pending_of(self.cid), 0)  # committed, never acked
            self.wait_claimed_from_victim()
            # Enough acknowledged pushes to judge, counted rather than timed.
            h.wait_for(lambda: len(self.acked) > 20, timeout=60, what="20 acknowledged pushes")
        finally:
            self.stop_pushing()
        self.victim.stop()
        self.victim.env = None
        self.victim.start()
        self.wait_forgotten()
        self.assert_counted_once()

    def test_stop_after_commit_then_continue(self):
        """The victim is stopped after its commit; the others claim its
        entries; continued, its ack finds them not its own and it forgets."""
        self.start_cluster("stop-after-commit")
        self.start_pushing()
        try:
            h.wait_for(lambda: is_stopped(self.victim.proc), timeout=30,
                       what="the victim stopped at its failpoint")
            self.assertGreater(self.redis.pending_of(self.cid), 0)
            self.wait_claimed_from_victim()
            self.victim.proc.send_signal(signal.SIGCONT)
            self.wait_forgotten()
            time.sleep(0.5)     # pushes go on across the recovery
        finally:
            self.stop_pushing()
        self.assert_counted_once()


def fg_sum(body):
    return sum(int(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines() if line)


if __name__ == "__main__":
    unittest.main()
