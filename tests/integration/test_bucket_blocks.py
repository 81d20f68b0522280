"""Closed blocks in the object store (issue 27): 1 redis-server, a real
SeaweedFS (weed_harness), zone a (2 ember-ingester) and zone b (1), all with
--storage.backend=s3, and an ember-querier.

Hours of folded profiles are pushed with old timestamps (1 h blocks, so they
close at once and are compacted and uploaded). The oracle is what the test
sent: the sum of the values of every acknowledged folded body. Then every
ingester is stopped, its data dir deleted and it is started empty under the
same id: the querier's total over the old range must still equal what was
sent (it is 0 without the bucket). Then the bucket goes down during pushes:
ingest goes on (200s), the uploads fail (counted, blocks wait locally), and
once weed is back everything goes up; a second wipe-and-restart still
answers every profile sent. Last, ingesters stopped right after pushes (no
wait for the upload passes) and wiped still answer every profile: a
graceful stop uploads what ended."""
import os
import random
import shutil
import subprocess
import time

import distributed_harness as dh
import harness as h
import weed_harness as wh

HOUR_MS = 3600 * 1000
NAME = 'app.cpu{svc="%s"}'
SERVICES = ("api", "db", "worker")
NS_PER_SAMPLE = 10_000_000


def folded_total(body):
    return sum(int(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines() if line)


class BucketBlocksTest(dh.ClusterTestCase):
    @classmethod
    def set_up(cls):
        cls.weed = wh.Weed()
        cls.weed.start()
        redis_url, redis_flags = cls.start_redis()
        prefix = f"t{time.monotonic_ns()}"
        cls.bucket_args = cls.weed.storage_args(prefix)
        ing_args = [*cls.bucket_args, *redis_flags, "--storage.block-duration=1h",
                    "--storage.local-retention=0"]  # every block local: restored whole
        cls.ingesters = [dh.zoned_ingester(redis_url, z, f"{z}-{i}", ing_args)
                         for z, i in (("a", 0), ("a", 1), ("b", 0))]
        cls.querier = dh.querier(redis_url, [*cls.bucket_args, *redis_flags])
        for p in [*cls.ingesters, cls.querier]:
            cls.procs.append(p)
            p.start()
        dh.wait_zones(cls.querier, live=3, complete=2, asked=2)
        # Six whole hours, ending two hours ago: every block is closed.
        cls.t0 = (h.now_ms() // HOUR_MS - 8) * HOUR_MS
        cls.t1 = cls.t0 + 6 * HOUR_MS
        cls.sent = 0
        cls.n = 0

    @classmethod
    def start_redis(cls):
        cls.redis = dh.Redis()
        cls.redis.start()
        return cls.redis.url, []

    def push(self, count, hours):
        """count profiles spread over the given hours (offsets from t0)."""
        rnd = random.Random(len(hours) * 1000 + type(self).n)
        for _ in range(count):
            i = type(self).n
            type(self).n += 1
            ts = (self.t0 + rnd.choice(hours) * HOUR_MS) // 1000 + rnd.randint(0, 3599)
            body = dh.folded(i)
            r = rnd.choice(self.ingesters).ingest(
                NAME % SERVICES[i % 3], body,
                params={"from": str(ts), "until": str(ts + 10), "format": "folded",
                        "sampleRate": "100"})
            self.assertEqual(200, r.status, r.describe())
            # a folded count is samples; at 100 Hz each one is 10 ms of CPU in ns
            type(self).sent += folded_total(body) * NS_PER_SAMPLE

    def total(self):
        return dh.merged_total(self.querier, self.t0, self.t1)

    def uploads_settled(self):
        """Every ingester uploaded something and has nothing pending, twice
        in a row (a pass may have begun before the last write)."""
        def once():
            return all(dh.metric(i, "ember_bucket_blocks_uploaded_total") > 0 and
                       dh.gauge(i, "ember_bucket_blocks_pending") == 0 and
                       dh.gauge(i, "ember_store_blocks_uncompacted") == 0
                       for i in self.ingesters)
        def twice():
            if not once():
                return False
            time.sleep(4.5)   # two upload passes
            return once()
        h.wait_for(twice, timeout=180, interval=1.0, what="every closed block uploaded")

    def drained(self):
        dh.wait_groups_drained(self.redis, ["ingesters.a", "ingesters.b"], timeout=60)

    def wipe_and_restart(self):
        for i in self.ingesters:
            i.stop()
        for i in self.ingesters:
            shutil.rmtree(i.data_dir)
            self.assertFalse(os.path.exists(i.data_dir))
        for i in self.ingesters:
            i.start(timeout=120)
        dh.wait_zones(self.querier, live=3, complete=2, asked=2, timeout=60)

    def test_1_wiped_ingesters_answer_from_the_bucket(self):
        self.push(90, range(0, 6))
        self.drained()
        self.uploads_settled()
        self.assertEqual(self.sent, self.total())
        self.wipe_and_restart()
        self.assertEqual(self.sent, self.total(), "after every data dir was deleted")
        restored = sum(dh.metric(i, "ember_bucket_blocks_uploaded_total") for i in
                       self.ingesters)
        self.assertEqual(0, restored, "restored blocks are not uploaded again")

    def test_2_bucket_down_loses_nothing(self):
        self.weed.stop()
        failures = [dh.metric(i, "ember_bucket_failures_total") for i in self.ingesters]
        self.push(45, range(2, 6))  # late writes into uploaded blocks, and new ones
        self.drained()
        # a failure alone may be a rollup's (bucket_rollup.c), counted in a pass
        # that ran before the late writes landed: wait for blocks waiting too
        h.wait_for(lambda: any(dh.metric(i, "ember_bucket_failures_total") > f
                               for i, f in zip(self.ingesters, failures)) and
                   any(dh.gauge(i, "ember_bucket_blocks_pending") > 0 for i in self.ingesters),
                   timeout=120, interval=1.0,
                   what="uploads failing while weed is down, blocks waiting locally")
        self.assertEqual(self.sent, self.total(), "answered locally while the bucket is down")
        # an intact data dir restarts while the bucket is down (it has nothing to restore)
        self.ingesters[0].stop()
        self.ingesters[0].start(timeout=120)
        dh.wait_zones(self.querier, live=3, complete=2, asked=2, timeout=60)
        self.assertEqual(self.sent, self.total(), "after a restart while the bucket is down")
        self.weed.start()
        self.uploads_settled()
        self.wipe_and_restart()
        self.assertEqual(self.sent, self.total(), "after the outage and another wipe")

    def test_3_stopped_right_after_pushes_loses_nothing(self):
        """No wait for the upload passes: a graceful stop settles the ended
        blocks and uploads them itself, so the wiped ingesters still answer
        every profile (late writes into uploaded blocks included)."""
        self.push(45, range(0, 6))
        self.drained()
        self.wipe_and_restart()
        self.assertEqual(self.sent, self.total(), "after a stop right after the pushes")

    def test_4_the_open_hour_goes_up_at_a_graceful_stop(self):
        """Profiles of the hour still being written: a graceful stop uploads
        that block as it is, so the wiped ingesters restore them."""
        now = h.now_ms()
        hour = now // HOUR_MS * HOUR_MS
        sent = 0
        for i in range(20):
            ts = max(hour, now - 600 * 1000) // 1000 + i % 10
            body = dh.folded(5000 + i)
            r = self.ingesters[i % 3].ingest(
                NAME % SERVICES[i % 3], body,
                params={"from": str(ts), "until": str(ts + 1), "format": "folded",
                        "sampleRate": "100"})
            self.assertEqual(200, r.status, r.describe())
            sent += folded_total(body) * NS_PER_SAMPLE
        self.drained()
        window = (hour - HOUR_MS, hour + 2 * HOUR_MS)
        h.wait_for(lambda: dh.merged_total(self.querier, *window) == sent, timeout=60,
                   what="the open hour answered")
        self.wipe_and_restart()
        self.assertEqual(sent, dh.merged_total(self.querier, *window),
                         "the open hour after a graceful stop and a wipe")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        if getattr(cls, "weed", None):
            cls.weed.stop()


class BucketBlocksClusterTest(BucketBlocksTest):
    """The same wipe-and-restart scenario with the streams on a Redis Cluster (3 masters
    + 3 replicas, test_redis_cluster's way)."""
    test_2_bucket_down_loses_nothing = None  # the outage case runs once, above
    test_4_the_open_hour_goes_up_at_a_graceful_stop = None  # so does the open hour

    @classmethod
    def start_redis(cls):
        import test_redis_cluster as rc
        cls.nodes = []
        for _ in range(6):
            n = dh.Redis()
            n.port = rc.cluster_port()
            n.args = rc.node_args(n)
            cls.nodes.append(n)
            cls.procs.append(n)
            n.start()
        addrs = [f"127.0.0.1:{n.port}" for n in cls.nodes]
        subprocess.run([rc.REDIS_CLI, "--cluster", "create", *addrs, "--cluster-replicas", "1",
                        "--cluster-yes"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT, timeout=60)
        h.wait_for(lambda: all(rc.info(n, ["CLUSTER", "INFO"]).get("cluster_state") == "ok"
                               for n in cls.nodes), timeout=30, what="cluster_state:ok")
        cls.masters = [n for n in cls.nodes
                       if rc.info(n, ["INFO", "replication"]).get("role") == "master"]
        seeds = ",".join(f"redis://127.0.0.1:{n.port}" for n in cls.nodes[:3])
        return seeds, ["--redis.cluster"]

    def drained(self):
        groups = ["ingesters.a", "ingesters.b"]
        h.wait_for(lambda: all(dh.groups_drained(m, groups) for m in self.masters),
                   timeout=60, what="every master's streams drained")
