"""The streams on Redis Cluster: Debian's redis-server in cluster mode, 3
masters + 3 replicas on loopback (`redis-cli --cluster create ...
--cluster-replicas 1`), 2 ember-ingester and 1 ember-querier with
--redis.cluster (seeds in --redis.url), --redis.wait-replicas=1 and
--redis.publish-retry, and an all-in-one `ember` that gets every profile the
cluster acknowledged (the reference).

- pushes through the cluster: the partitions' streams are spread over the
  masters and the querier's totals equal the reference's;
- kill -9 a master during pushes: its replica takes over, the killed node
  comes back as a replica, pushes resume, and every acknowledged profile is
  stored exactly once (nothing acknowledged lost, nothing doubled; a push
  answered 503 may be stored, at most once).
"""
import os
import shutil
import socket
import subprocess
import time
import unittest

import distributed_harness as dh
import harness as h
import test_distributed_chaos as chaos

REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
# A master unseen this long is failed over: short for the test, long enough
# not to flap on a loaded 2-core CI box.
NODE_TIMEOUT_MS = 3000


def cluster_port():
    """A free port whose cluster bus port (+10000) is free too."""
    for _ in range(200):
        p = h.free_port()
        if p < 55535 and port_free(p + 10000):
            return p
    raise AssertionError("no free port pair for a cluster node")


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def node_args(node):
    return ["--cluster-enabled", "yes",
            "--cluster-config-file", os.path.join(node.dir, "nodes.conf"),
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS)]


def info(node, section):
    text = node.cmd(section[0], *section[1:])
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


class ClusterTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
        cls.nodes = []
        for _ in range(6):
            n = dh.Redis()
            n.port = cluster_port()
            n.args = node_args(n)
            cls.nodes.append(n)
            cls.procs.append(n)   # cleaned up (stopped, dir removed) with the others
            n.start()
        addrs = [f"127.0.0.1:{n.port}" for n in cls.nodes]
        subprocess.run([REDIS_CLI, "--cluster", "create", *addrs, "--cluster-replicas", "1",
                        "--cluster-yes"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT, timeout=60)
        h.wait_for(cls.cluster_ok, timeout=30, what="cluster_state:ok on every node")
        seeds = ",".join(f"redis://127.0.0.1:{n.port}" for n in cls.nodes[:3])
        flags = ["--redis.cluster", "--redis.wait-replicas=1", "--redis.publish-retry=30s"]
        cls.aio = h.Ember()
        cls.maybe = h.Ember()       # pushes answered 503: stored or not
        cls.ingesters = [dh.ingester(seeds, flags) for _ in range(2)]
        cls.querier = dh.querier(seeds, ["--redis.cluster"])
        for p in [cls.aio, cls.maybe, *cls.ingesters, cls.querier]:
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.querier, 2)
        cls.t0 = (h.now_ms() // 1000 - 3600) * 1000
        cls.t1 = cls.t0 + 40 * 30 * 1000 + 60_000

    @classmethod
    def cluster_ok(cls):
        try:
            return all(info(n, ["CLUSTER", "INFO"]).get("cluster_state") == "ok"
                       for n in cls.nodes if n.proc)
        except (OSError, RuntimeError):
            return False

    def masters(self):
        got = []
        for n in self.nodes:
            try:
                if n.proc and info(n, ["INFO", "replication"]).get("role") == "master":
                    got.append(n)
            except (OSError, RuntimeError):
                pass
        return got

    def drained(self):
        """Every stream on every master delivered and acknowledged."""
        try:
            return all((lambda t: t["pending"] == 0 and t["lag"] == 0)(m.totals())
                       for m in self.masters())
        except (OSError, RuntimeError):
            return False

    total = chaos.ChaosTest.total   # sum of the merged profile's samples

    def check_stored_once(self):
        h.wait_for(self.drained, timeout=60, what="streams drained on every master")
        # A member whose heartbeat key was on a killed master is missed until
        # its next heartbeat reaches the promoted replica: the querier refuses
        # (no complete zone) until then, so wait for both ingesters again.
        dh.wait_members(self.querier, len(self.ingesters), timeout=60)
        got, acked, maybe = self.total(self.querier), self.total(self.aio), self.total(self.maybe)
        self.assertGreater(acked, 0)
        self.assertLessEqual(acked, got)            # nothing acknowledged lost
        self.assertLessEqual(got, acked + maybe)    # nothing doubled
        return got - acked

    def test_1_streams_spread_and_totals(self):
        with chaos.Pusher(self, self.ingesters, 1) as p:
            h.wait_for(lambda: p.statuses.get(200, 0) >= 60, timeout=60, what="60 pushes")
        self.assertEqual(set(p.statuses), {200}, p.statuses)
        # Each partition's stream lives on the master owning its slot: all
        # three masters hold some.
        per_master = [len(m.cmd("KEYS", "ember:ingest:*")) for m in self.masters()]
        self.assertEqual(3, len(per_master))
        self.assertTrue(all(n > 0 for n in per_master), per_master)
        self.assertEqual(16, sum(per_master))
        self.assertEqual(0, self.check_stored_once())

    def test_2_master_killed_during_pushes(self):
        # The master whose streams hold the most entries: the pushes' three
        # series (one partition each) go to it.
        victim = max(self.masters(), key=lambda m: sum(
            m.cmd("XLEN", k) for k in m.cmd("KEYS", "ember:ingest:*")))
        with chaos.Pusher(self, self.ingesters, 2) as p:
            h.wait_for(lambda: p.statuses.get(200, 0) >= 20, timeout=60, what="pushes")
            victim.kill9()
            h.wait_for(lambda: len(self.masters()) == 3, timeout=60,
                       what="a replica promoted")
            victim.start()      # same port, dir and nodes.conf: rejoins as a replica
            # Pushes rotate over the series: 30 acknowledged in a row means
            # the failed master's partitions are reached again (on its replica).
            h.wait_for(lambda: len(p.log) > 30 and all(s == 200 for _, _, s in p.log[-30:]),
                       timeout=90, what="every series acknowledged again after the failover")
        h.wait_for(self.cluster_ok, timeout=30, what="cluster_state:ok again")
        self.assertEqual(3, len(self.masters()))
        self.assertNotIn(victim, self.masters())
        print(f"failover: {p.statuses}")
        extra = self.check_stored_once()
        print(f"stored although answered 503: {extra} of {self.total(self.maybe)}")


if __name__ == "__main__":
    unittest.main()
