"""The chart on a simulated cluster (k8s_sim.py) with closed blocks in S3 and the
streams on a Redis Cluster (issue 27, item 5): helm renders the microservices
chart for 2 zones x 2 ingesters and 2 queriers with `storage.backend: s3`
(credentials from an existing Secret, 30 min blocks, `storage.localRetention: 1h`)
and `redis.cluster.enabled` with external seeds. Outside the release, on the same
pod network (k8s_sim hosts, each in a namespace of its own): a 6-node Redis
Cluster (3 masters + 3 replicas, `redis-cli --cluster create`) and SeaweedFS's
S3 server.

The oracle is what the test sent: for every push the ingest Service
acknowledged, the folded body's sample count x 10 ms, kept per service and
profile type (and per time range). Every answer is asked through the querier
Service (or one querier pod) and must equal it exactly.

The steps build on each other, in this order:

1. 12 h backfilled into the past plus live pushes: the ingesters upload their
   closed blocks and drop those past the local retention (counted, gone from
   their volumes); a 7-day merged profile with every cache cold, then warm, gives
   the same bytes; the totals over the whole range and over the dropped hours
   alone equal what was sent;
2. querier.replicas 2 -> 3 (a new render; only the querier Deployment changes):
   each querier pod answers the same totals and the same 7-day bytes;
3. kill -9 of the Redis master holding most stream entries during pushes: its
   replica takes over, the killed node rejoins as a replica, and the totals are
   exact: each push of that phase carries a label of its own and is asked alone:
   an acknowledged one is stored exactly once, one answered otherwise (503 while
   the slot map still names the dead master) once or not at all;
4. kill -9 of ingester a-0 and its volume deleted: zone b answers everything
   exactly meanwhile; restarted empty under its name, the old hours are not
   restored to its volume, the hours past the local retention are answered
   exactly through the querier Service, and their 7-day merged profile, cold
   and warm, is byte-identical to the one taken before the loss;
5. the recent hours after that restart: the lost volume held profiles
   acknowledged but not uploaded yet (the open block). The restarted ingester
   recorded a note (it lacks what it held), so zone a, complete again, gives
   way to zone b and every total is exact.
"""
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest
from urllib.parse import quote

import distributed_harness as dh
import harness as h
import k8s_harness as k
import k8s_sim
import weed_harness as wh

NS = "ember-sim"
QUERIER = f"http://ember-querier.{NS}.svc.cluster.local:4040"
INGEST = f"http://ember-ingest.{NS}:4040"
S3_HOST, S3_PORT = "seaweedfs", 8333
REDIS_NODES = [f"redis-{i}" for i in range(6)]
REDIS_PORT = 6379
VICTIM = "ember-ingester-a-0"
SECRET_NAME = "ember-s3"
MIN_MS = 60 * 1000
HOUR_MS = 60 * MIN_MS
DAY_MS = 24 * HOUR_MS
BLOCK_MS = 30 * MIN_MS
NS_PER_SAMPLE = 10_000_000            # folded counts at sampleRate=100: 10 ms each
SERVICES = ("api", "db", "worker")
# legacy ingest names: the suffix picks the profile type
KINDS = {"cpu": "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
         "wall": "wall:wall:nanoseconds:cpu:nanoseconds"}
NODE_TIMEOUT_MS = 3000                # Redis Cluster failover: short for the test


def why_not():
    why = k8s_sim.can_run()
    if why:
        return why
    for tool in ("redis-server", "redis-cli"):
        if not shutil.which(tool):
            return f"no {tool}"
    return None


WHY_NOT = why_not()

VALUES = {
    "mode": "microservices",
    "ingester": {"zones": ["a", "b"], "replicas": 2},
    "querier": {"replicas": 2, "cache": {"size": "256MiB"}},
    # a killed ingester's entries move to its zone peer quickly; a publish whose
    # outcome is unknown during a failover is retried instead of answered 503
    "ingest": {"partitions": 8, "claimIdle": "2s", "publishRetry": "30s"},
    "redis": {"enabled": False, "waitReplicas": 1, "cluster": {"enabled": True},
              "url": ",".join(f"redis://{n}:{REDIS_PORT}" for n in REDIS_NODES[:3])},
    "storage": {"backend": "s3", "prefix": "sim", "blockDuration": "30m", "localRetention": "1h",
                "mapSize": "1GiB",
                "s3": {"endpoint": f"http://{S3_HOST}:{S3_PORT}", "bucketName": wh.BUCKET,
                       "forcePathStyle": True, "existingSecret": SECRET_NAME}},
}

# the Secret the release is pointed at (created before the install, not by the chart)
SECRET = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
          "metadata": {"name": SECRET_NAME, "namespace": NS},
          "stringData": {"AWS_ACCESS_KEY_ID": wh.ACCESS, "AWS_SECRET_ACCESS_KEY": wh.SECRET}}


def folded_samples(seed):
    return sum(int(line.rsplit(" ", 1)[1]) for line in dh.folded(seed).decode().splitlines())


def redis_call(ip, args):
    """One command to the node at ip (from a thread in the client namespace)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    with socket.create_connection((ip, REDIS_PORT), timeout=5) as s:
        s.sendall(out)
        return dh._resp(s.makefile("rb"))


def stacks(connect_json):
    """A merged profile (Connect JSON) as {(sample type, stack of function
    names): value}: what it says, free of the id order that differs between
    sets of ingesters."""
    p = json.loads(connect_json)
    strings = p["stringTable"]
    fn = {f["id"]: strings[int(f.get("name", 0))] for f in p.get("function", [])}
    loc = {l["id"]: tuple(fn[ln["functionId"]] for ln in l.get("line", []))
           for l in p.get("location", [])}
    out = {}
    for smp in p.get("sample", []):
        stack = tuple(name for lid in smp.get("locationId", []) for name in loc[lid])
        for i, v in enumerate(smp.get("value", [])):
            key = (i, stack)
            out[key] = out.get(key, 0) + int(v)
    return out


def info_fields(reply):
    text = reply.decode() if isinstance(reply, bytes) else reply
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


class Sent:
    """The oracle: what the ingest Service acknowledged (and what it answered
    otherwise), in ns, per (kind, service) and per push time."""

    def __init__(self):
        self.acked = []       # (kind, svc, ts_ms, ns, push number)
        self.maybe = []
        self.refusals = {}    # status -> count, for the report
        self.last_refusal = b""

    def add(self, acked, kind, svc, ts_ms, ns, number):
        (self.acked if acked else self.maybe).append((kind, svc, ts_ms, ns, number))

    def total(self, kind=None, svc=None, t0=0, t1=1 << 62):
        return sum(ns for k_, s, ts, ns, _ in self.acked
                   if (kind is None or k_ == kind) and (svc is None or s == svc) and t0 <= ts < t1)


@unittest.skipIf(WHY_NOT, f"simulated cluster: {WHY_NOT}")
class SimulatedBucketClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = None
        cls.redis_argv = {}
        try:
            weed = wh.weed_binary()     # SkipTest (outside CI) when it cannot be built
            k.ensure_tools()
            cls.cluster = k8s_sim.Cluster(NS)
            cls.start_redis_cluster()
            cls.start_seaweedfs(weed)
            docs = k.render(files=[k.tmp_values(VALUES)], namespace=NS)
            cls.check_render(docs)
            cls.cluster.apply(docs + [SECRET])
            cls.cluster.wait_ready(timeout=120)
        except BaseException:
            cls.tearDownClass()
            raise
        cls.sent = Sent()
        cls.seed = itertools.count()
        now = h.now_ms()
        cls.block = now // BLOCK_MS * BLOCK_MS    # the open block's start
        cls.t0 = cls.block - 12 * HOUR_MS         # backfill: 24 closed blocks
        cls.t_end = cls.block + 2 * BLOCK_MS     # after every live push of the test (< 30 min)

    @classmethod
    def tearDownClass(cls):
        if cls.cluster:
            cls.cluster.cleanup()
            left = cls.cluster.leftovers()
            assert not left, f"simulated cluster left behind: {left}"

    # ---- the external services
    @classmethod
    def start_redis_cluster(cls):
        c = cls.cluster
        for name in REDIS_NODES:
            host = c.add_host(name)
            d = os.path.join(c.root, name)
            os.makedirs(d)
            cls.redis_argv[name] = [
                shutil.which("redis-server"), "--port", str(REDIS_PORT), "--bind", host.ip,
                "--protected-mode", "no", "--dir", d, "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--cluster-enabled", "yes",
                "--cluster-config-file", os.path.join(d, "nodes.conf"),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS), "--daemonize", "no"]
            c.start_host(name, cls.redis_argv[name])
        for name in REDIS_NODES:
            h.wait_for(lambda: cls.redis_ping(name), timeout=20, what=f"{name} up")
        addrs = [f"{c.hosts[n].ip}:{REDIS_PORT}" for n in REDIS_NODES]
        r = subprocess.run(["ip", "netns", "exec", c.client, shutil.which("redis-cli"), "--cluster", "create",
                            *addrs, "--cluster-replicas", "1", "--cluster-yes"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise AssertionError(f"redis-cli --cluster create: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        h.wait_for(cls.redis_cluster_ok, timeout=60, what="cluster_state:ok on every node")

    @classmethod
    def redis(cls, name, *args):
        return cls.cluster.on_client(redis_call, cls.cluster.hosts[name].ip, args)

    @classmethod
    def redis_ping(cls, name):
        try:
            return cls.redis(name, "PING") in (b"PONG", "PONG")
        except (OSError, RuntimeError):
            return False

    @classmethod
    def redis_cluster_ok(cls):
        try:
            return all(info_fields(cls.redis(n, "CLUSTER", "INFO")).get("cluster_state") == "ok"
                       for n in REDIS_NODES if cls.cluster.hosts[n].proc.poll() is None)
        except (OSError, RuntimeError):
            return False

    @classmethod
    def note_of(cls, ingester):
        """The ingester's standing note, from the master owning the members' slot."""
        for n in cls.redis_masters():
            try:
                v = cls.redis(n, "HGET", "{ember:members:ingester}:notes", ingester)
            except (OSError, RuntimeError):
                continue    # MOVED: another master owns the slot
            return v.decode() if isinstance(v, bytes) else (v or "")
        return ""

    @classmethod
    def redis_masters(cls):
        got = []
        for n in REDIS_NODES:
            if cls.cluster.hosts[n].proc.poll() is not None:
                continue
            try:
                if info_fields(cls.redis(n, "INFO", "replication")).get("role") == "master":
                    got.append(n)
            except (OSError, RuntimeError):
                pass
        return got

    @classmethod
    def start_seaweedfs(cls, weed):
        c = cls.cluster
        host = c.add_host(S3_HOST)
        d = os.path.join(c.root, S3_HOST)
        os.makedirs(os.path.join(d, "data"))
        cfg = os.path.join(d, "s3.json")
        with open(cfg, "w") as f:
            json.dump({"identities": [{"name": "ember", "credentials": [
                {"accessKey": wh.ACCESS, "secretKey": wh.SECRET}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        # its own namespace: the default ports are free; the catalogs are turned off
        c.start_host(S3_HOST, [weed, "server", f"-ip={host.ip}", "-ip.bind=0.0.0.0",
                               f"-dir={os.path.join(d, 'data')}", "-s3", f"-s3.port={S3_PORT}",
                               f"-s3.config={cfg}", "-s3.port.iceberg=0", "-s3.port.lance=0",
                               "-master.volumeSizeLimitMB=64", "-volume.max=30"])

        def bucket_made():
            if host.proc.poll() is not None:
                raise AssertionError(f"weed exited:\n{open(host.log_path).read()[-3000:]}")
            r = subprocess.run(["ip", "netns", "exec", c.client, "curl", "-s", "-o", "/dev/null", "-w",
                                "%{http_code}", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                                f"{wh.ACCESS}:{wh.SECRET}", "-H", "x-amz-content-sha256: "
                                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                                f"http://{host.ip}:{S3_PORT}/{wh.BUCKET}"],
                               capture_output=True, text=True, timeout=30)
            return r.stdout.strip() in ("200", "409")
        h.wait_for(bucket_made, timeout=180, interval=1.0, what="SeaweedFS's S3 port, the bucket made")

    @classmethod
    def check_render(cls, docs):
        """The rendered pods carry the S3 and Redis Cluster settings as the values say
        (the simulation then runs exactly these)."""
        ing = k.by_name(docs, "StatefulSet", "ember-ingester-a")["spec"]["template"]["spec"]["containers"][0]
        args = ing["args"]
        for want in ("--storage.backend=s3", f"--storage.s3.endpoint=http://{S3_HOST}:{S3_PORT}",
                     "--storage.local-retention=1h", "--storage.block-duration=30m",
                     "--storage.s3.force-path-style=true"):
            assert want in args, (want, args)
        env = {e["name"]: e for e in ing["env"]}
        assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["name"] == SECRET_NAME, env
        assert env["EMBER_REDIS_CLUSTER"]["value"] == "true", env
        assert env["EMBER_REDIS_WAIT_REPLICAS"]["value"] == "1", env
        assert not [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == SECRET_NAME]

    # ---- pushes
    def push(self, ts_ms, timeout=30, tagged=False):
        """One folded profile through the ingest Service; the oracle records it.
        tagged: with a label push=<its number>, so what was stored of it can be
        asked alone."""
        i = next(self.seed)
        kind = ("cpu", "wall")[i % 2]
        svc = SERVICES[i % 3]
        ts = ts_ms // 1000
        name = f"app.{kind}{{svc={svc}{f',push={i}' if tagged else ''}}}"   # legacy: unquoted values
        q = f"name={quote(name)}&from={ts}&until={ts + 10}&format=folded&sampleRate=100"
        code, data = self.cluster.curl(f"{INGEST}/ingest?{q}", dh.folded(i), timeout=timeout)
        self.sent.add(code == 200, kind, svc, ts * 1000, folded_samples(i) * NS_PER_SAMPLE, i)
        if code != 200:
            self.sent.refusals[code] = self.sent.refusals.get(code, 0) + 1
            self.sent.last_refusal = data[:300]
        return code, data

    def push_ok(self, ts_ms):
        code, data = self.push(ts_ms)
        self.assertEqual(200, code, data[:300])

    def backfill(self):
        """12 h into the past: 8 profiles per 30 min block, spread inside it."""
        for b in range(24):
            for j in range(8):
                self.push_ok(self.t0 + b * BLOCK_MS + j * 217_000 + b * 1000)

    def not_near_block_end(self, margin_ms):
        """Returns once the open block has at least margin_ms to go (waits past its end
        when it has not: at most margin_ms, once in 30 min)."""
        left = BLOCK_MS - h.now_ms() % BLOCK_MS
        if left < margin_ms:
            time.sleep((left + 2000) / 1000)

    def live(self, n):
        for _ in range(n):
            self.push_ok(h.now_ms() - 5000)

    # ---- waiting
    def drained(self):
        def once():
            try:
                return all(dh.groups_drained(_NodeView(self, m), ["ingesters.a", "ingesters.b"])
                           for m in self.redis_masters())
            except (OSError, RuntimeError):
                return False
        h.wait_for(once, timeout=90, interval=0.5, what="every master's streams drained in both zones")

    def metric(self, pod, name):
        code, data = self.cluster.curl(f"http://{self.cluster.pods[pod].ip}:4040/metrics", timeout=10)
        if code != 200:
            return -1
        for line in data.decode(errors="replace").splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return int(float(line.rsplit(" ", 1)[1]))
        return 0

    def ingesters(self):
        return sorted(n for n in self.cluster.pods if n.startswith("ember-ingester-"))

    def queriers(self):
        return sorted(n for n in self.cluster.pods if n.startswith("ember-querier-"))

    def wait_zones(self, complete, queriers=None):
        for q in queriers or self.queriers():
            h.wait_for(lambda: self.metric(q, "ember_querier_complete_zones") == complete, timeout=60,
                       what=f"{q}: {complete} complete zones")

    def wait_dropped(self):
        """Every ingester uploaded its closed blocks and dropped those past the local
        retention: what stays on its volume is the last hour's blocks at most."""
        old_end = self.old_end()

        def done():
            return all(self.metric(p, "ember_bucket_blocks_pending") == 0 and
                       all(b >= old_end for b in self.local_blocks(p)) for p in self.ingesters())
        h.wait_for(done, timeout=180, interval=1.0, what="old blocks uploaded and dropped locally")
        # each zone held every old block once: at least 22 of them were dropped per zone
        for zone in "ab":
            self.assertGreaterEqual(sum(self.metric(p, "ember_bucket_local_blocks_dropped_total")
                                        for p in self.ingesters() if p.startswith(f"ember-ingester-{zone}-")),
                                    22, zone)

    def local_blocks(self, pod):
        d = os.path.join(self.cluster.pvc_root, f"data-{pod}", "blocks")
        return sorted(int(n) * 1000 for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []

    # ---- answers
    def ask(self, base, method, req):
        return self.cluster.connect_json(base, method, req)

    def totals(self, base, t0, t1):
        """{(kind, svc): ns} from SelectSeries grouped by svc, and
        {kind: ns} from the merged flame graph, over [t0, t1)."""
        per_svc, flame = {}, {}
        types = self.ask(base, "ProfileTypes", {"start": str(t0), "end": str(t1 - 1)})
        self.assertEqual(sorted(KINDS.values()), sorted(t["ID"] for t in types.get("profileTypes", [])))
        for kind, pt in KINDS.items():
            # Pyroscope's points: each sums the samples after the previous one up to its
            # own time, so the steps (30 min, like t0 and t1) end exactly at t1
            series = self.ask(base, "SelectSeries", {
                "profileTypeID": pt, "labelSelector": "{}", "start": str(t0), "end": str(t1),
                "step": BLOCK_MS // 1000, "groupBy": ["svc"]})
            for s in series.get("series", []):
                svc = {l["name"]: l["value"] for l in s.get("labels", [])}.get("svc")
                per_svc[(kind, svc)] = int(sum(float(p.get("value", 0)) for p in s.get("points", [])))
            fg = self.ask(base, "SelectMergeStacktraces", {"profileTypeID": pt, "labelSelector": "{}",
                                                            "start": str(t0), "end": str(t1 - 1),
                                                            "maxNodes": 64})
            flame[kind] = int(fg.get("flamegraph", {}).get("total", 0))
        return per_svc, flame

    def expected(self, t0, t1):
        per_svc = {(kd, s): self.sent.total(kd, s, t0, t1) for kd in KINDS for s in SERVICES}
        return ({k_: v for k_, v in per_svc.items() if v}, {kd: self.sent.total(kd, None, t0, t1) for kd in KINDS})

    def assertExact(self, what, base=QUERIER, t0=None, t1=None):
        t0 = self.t0 if t0 is None else t0
        t1 = self.t_end if t1 is None else t1
        want = self.expected(t0, t1)
        self.assertGreater(sum(want[1].values()), 0)
        self.assertEqual(want, self.totals(base, t0, t1), what)

    def old_end(self):
        """Every block that ends by here is past the local retention (dropped)."""
        return self.block - HOUR_MS

    def week_bytes(self, base=QUERIER, end=None):
        """A 7-day merged profile (Connect JSON) up to end: the bytes as served."""
        end = self.t_end if end is None else end
        req = {"profileTypeID": KINDS["cpu"], "labelSelector": "{}", "start": str(end - 7 * DAY_MS),
               "end": str(end)}
        code, data = self.cluster.curl(f"{base}/querier.v1.QuerierService/SelectMergeProfile",
                                       json.dumps(req).encode(),
                                       {"Content-Type": "application/json", "Connect-Protocol-Version": "1"},
                                       timeout=120)
        self.assertEqual(200, code, data[:300])
        return data

    # ---- the scenario (its steps build on each other, in this order)
    def test_1_backfill_and_live(self):
        self.assertEqual(["ember-ingester-a-0", "ember-ingester-a-1", "ember-ingester-b-0",
                          "ember-ingester-b-1"], self.ingesters())
        self.assertEqual(["ember-querier-0", "ember-querier-1"], self.queriers())
        self.assertEqual(3, len(self.redis_masters()))
        self.wait_zones(2)
        self.backfill()
        self.live(16)
        self.drained()
        self.wait_dropped()
        # the first queries over the dropped hours: every ingester's cache is cold
        cls = type(self)
        cls.week = self.week_bytes()
        self.assertEqual(cls.week, self.week_bytes(), "7 days: cold cache, then warm")
        cls.week_old = self.week_bytes(end=self.old_end())
        self.assertExact("12 h + live, the old hours read back from the bucket")
        self.assertExact("the dropped hours alone", t1=self.old_end())

    def test_2_queriers_2_to_3(self):
        c = self.cluster
        docs = k.render(files=[k.tmp_values(VALUES)], sets=["querier.replicas=3"], namespace=NS)
        self.assertEqual([], c.apply(docs + [SECRET]), "only the querier's replica count changed")
        self.assertEqual(["ember-querier-0", "ember-querier-1", "ember-querier-2"], self.queriers())
        c.wait_ready(self.queriers(), timeout=60)
        self.wait_zones(2)
        for q in self.queriers():
            base = f"http://{c.pods[q].ip}:4040"
            self.assertExact(q, base)
            self.assertEqual(self.week, self.week_bytes(base), f"{q}: the 7-day profile")

    def test_3_redis_master_killed_during_pushes(self):
        self.redis_failover()
        self.assertExact("after the Redis master's failover")

    def test_4_ingester_volume_lost(self):
        """kill -9 of an ingester, its volume deleted: zone b answers meanwhile; restarted
        empty, the hours past the local retention are answered exactly again."""
        c = self.cluster
        # profiles in the open block, which goes up only once it ends: the victim
        # holds a share that is not in the bucket when it dies (step 5 needs one)
        self.not_near_block_end(30_000)
        self.live(12)
        self.drained()
        c.kill(VICTIM, signal.SIGKILL)
        shutil.rmtree(os.path.join(c.pvc_root, f"data-{VICTIM}"))
        self.wait_zones(1)
        self.live(8)
        self.drained()
        self.assertExact("zone a incomplete: zone b answers everything")
        c.restart(VICTIM)
        c.wait_ready([VICTIM], timeout=120)
        self.wait_zones(2)
        self.assertEqual([], [b for b in self.local_blocks(VICTIM) if b < self.old_end()],
                         "the old hours are not restored to the volume")
        self.assertExact("restarted empty: the hours past the local retention", t1=self.old_end())
        # zone a lacks what the lost volume held only locally: zone b answers
        # (step 5), whose members split the profiles otherwise, so the bytes are
        # its own; what they say is the same
        week_b = self.week_bytes(end=self.old_end())
        self.assertTrue(stacks(week_b))
        self.assertEqual(stacks(self.week_old), stacks(week_b), "up to the local retention, 7 days")
        self.assertEqual(week_b, self.week_bytes(end=self.old_end()), "the same bytes again")

    def test_5_restarted_zone_lacks_nothing_recent(self):
        """What the killed ingester had acknowledged but not uploaded yet (its
        open block) went with its volume. Restarted empty under its name, it
        records a note at its first heartbeat (members.h), so zone a, complete
        again, gives way to zone b: the recent hours are exact too."""
        self.assertIn("new volume", self.note_of(VICTIM))
        self.assertExact("restarted empty: everything, the recent hours too")

    def redis_failover(self):
        c = self.cluster

        def entries(m):
            """Entries ever added to the master's streams (consumed ones are trimmed)."""
            return sum(dh._pairs(self.redis(m, "XINFO", "STREAM", key)).get("entries-added", 0)
                       for key in self.redis(m, "KEYS", "ember:ingest:*"))
        masters = self.redis_masters()
        victim = max(masters, key=entries)
        self.assertGreater(entries(victim), 0)
        before = len(self.sent.acked)
        first = next(self.seed) + 1      # the tagged pushes are numbered from here
        stop = threading.Event()
        errors = []

        def pushing():
            try:
                while not stop.is_set():
                    self.push(h.now_ms() - 5000, timeout=90, tagged=True)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
        t = threading.Thread(target=pushing, daemon=True)
        t.start()
        try:
            h.wait_for(lambda: len(self.sent.acked) - before >= 10, timeout=60, what="pushes before the kill")
            c.kill_host(victim, signal.SIGKILL)
            h.wait_for(lambda: len(self.redis_masters()) == 3 and victim not in self.redis_masters(),
                       timeout=60, what="a replica promoted")
            c.start_host(victim, self.redis_argv[victim])   # same dir and nodes.conf: a replica now
            h.wait_for(self.redis_cluster_ok, timeout=60, what="cluster_state:ok again")
            after = len(self.sent.acked)
            h.wait_for(lambda: len(self.sent.acked) - after >= 24, timeout=120, what="pushes after the failover")
        finally:
            stop.set()
            t.join(120)
        self.assertEqual([], errors)
        self.assertNotIn(victim, self.redis_masters())
        # a pod whose link to the dead master is still down answers 503 (/ready too)
        # until its link is back; as the kubelet would, wait until every pod is ready
        # again before the steps that expect every push through the Service to succeed
        h.wait_for(lambda: all(c.probe_ok(p) for p in c.pods.values()), timeout=120, interval=0.5,
                   what="every pod ready again after the failover")
        self.drained()
        # the heartbeats on the failed master's slots come back with the next beat
        self.wait_zones(2)
        print(f"failover: {len(self.sent.acked) - before} acknowledged, {len(self.sent.maybe)} not: "
              f"{self.sent.refusals} {self.sent.last_refusal!r}")
        self.account_per_push(first)

    def account_per_push(self, first):
        """Each tagged push asked alone (series grouped by its push label): an
        acknowledged one is stored exactly once; one answered otherwise (e.g. 503
        while the slot map still names the dead master) is stored once or not at
        all, and counts as sent when it is, for the totals that follow."""
        stored = {}
        for kind, pt in KINDS.items():
            series = self.ask(QUERIER, "SelectSeries", {
                "profileTypeID": pt, "labelSelector": "{}", "start": str(self.t0), "end": str(self.t_end),
                "step": BLOCK_MS // 1000, "groupBy": ["push"]})
            for sr in series.get("series", []):
                number = {l["name"]: l["value"] for l in sr.get("labels", [])}.get("push")
                if number:
                    stored[int(number)] = int(sum(float(p.get("value", 0)) for p in sr.get("points", [])))
        acked = {e[4]: e[3] for e in self.sent.acked if e[4] >= first}
        self.assertEqual(acked, {n: stored.get(n, 0) for n in acked}, "acknowledged: each stored once")
        maybe = {e[4]: e[3] for e in self.sent.maybe}
        for n, ns in maybe.items():
            self.assertIn(stored.get(n, 0), (0, ns), f"push {n} answered otherwise: stored once or not")
        self.assertEqual(set(stored), set(acked) | {n for n in maybe if stored.get(n)}, "no other push tagged")
        self.sent.acked += [e for e in self.sent.maybe if stored.get(e[4])]
        self.sent.maybe = []


class _NodeView:
    """What dh.groups_drained needs of a Redis node (cmd), for a cluster host."""

    def __init__(self, test, name):
        self.test = test
        self.name = name

    def cmd(self, *args):
        return self.test.redis(self.name, *args)


if __name__ == "__main__":
    unittest.main()
