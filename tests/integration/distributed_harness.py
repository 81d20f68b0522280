"""Processes for the distributed tests: a redis-server of our own on a free
loopback port (temp dir, stopped by pid), `ember-ingester` and `ember-querier`
as child processes. Built on harness.Ember so calls, pushes and queries read
the same as in every other test.
"""
import os
import random
import shutil
import socket
import subprocess
import tempfile
import unittest

import harness as h

REDIS_SERVER = os.environ.get("EMBER_REDIS_SERVER", "/usr/bin/redis-server")


class Redis:
    """redis-server with AOF on (appendfsync always), our own child."""

    def __init__(self, aof=True, args=()):
        self.dir = tempfile.mkdtemp(prefix="ember-redis-")
        self.port = None
        self.proc = None
        self.log = None
        self.aof = aof
        self.args = list(args)  # more redis-server options (cluster mode)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        if self.port is None:
            self.port = h.free_port()
        cmd = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
               "--save", "", "--rdbcompression", "no",  # as the chart runs it
               "--appendonly", "yes" if self.aof else "no",
               "--appendfsync", "always", "--daemonize", "no", *self.args]
        self.log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        h.wait_for(self.ping, timeout=10, what="redis-server up")
        return self

    def ping(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def cmd(self, *args):
        """One command over a fresh connection (RESP2), the reply parsed."""
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(out)
            return _resp(s.makefile("rb"))

    def streams(self, prefix="ember:ingest:"):
        """Per stream: entries ever added, pending in the group, not yet delivered."""
        got = {}
        for key in self.cmd("KEYS", prefix + "*"):
            info = _pairs(self.cmd("XINFO", "STREAM", key))
            groups = [_pairs(g) for g in self.cmd("XINFO", "GROUPS", key)]
            g = groups[0] if groups else {}
            got[key.decode()] = {"added": info.get("entries-added", 0),
                                 "pending": g.get("pending", 0),
                                 "lag": _lag(info, g)}
        return got

    def totals(self):
        t = {"added": 0, "pending": 0, "lag": 0}
        for v in self.streams().values():
            for k in t:
                t[k] += v[k]
        return t

    def pending_of(self, consumer):
        n = 0
        for key in self.cmd("KEYS", "ember:ingest:*"):
            for c in self.cmd("XINFO", "CONSUMERS", key, "ingesters"):
                c = _pairs(c)
                if c.get("name") == consumer:
                    n += c.get("pending", 0)
        return n

    def claims_of(self, consumer, group="ingesters"):
        """Entries claimed from consumer that it has not forgotten yet."""
        return self.cmd("HLEN", f"ember:claimed:{group}:{consumer}")

    def wait_drained(self, timeout=30):
        """Every entry delivered and acknowledged: the stores hold everything."""
        return h.wait_for(lambda: (lambda t: t["pending"] == 0 and t["lag"] == 0)(self.totals()),
                          timeout=timeout, what="streams drained")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()     # our own child, by pid
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.log:
            self.log.close()
            self.log = None

    def kill9(self):
        """SIGKILL to our own child: with appendfsync always, every XADD Redis
        confirmed is in the AOF and comes back on start()."""
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        self.log.close()
        self.log = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _resp(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp(f) for _ in range(n)]
    raise RuntimeError(f"unexpected RESP {line!r}")


def _lag(stream_info, group):
    """Entries not yet delivered to the group. Redis reports lag as nil when it
    cannot count it (after trimming, or before the group read anything), so
    nil only counts as drained when the group has delivered the stream's last
    entry; a stream without a group has delivered nothing."""
    if not group:
        return stream_info.get("length", 0)
    last = stream_info.get("last-generated-id")
    if last is not None and group.get("last-delivered-id") == last:
        return 0
    lag = group.get("lag")
    return 1 if lag is None else lag


def _pairs(flat):
    """XINFO's flat [k, v, k, v ...] as a dict with str keys (and str values)."""
    d = {}
    for k, v in zip(flat[::2], flat[1::2]):
        d[k.decode()] = v.decode() if isinstance(v, bytes) else v
    return d


class Role(h.Ember):
    """ember-ingester / ember-querier as a child process (harness.Ember's API)."""

    def __init__(self, binary, with_data_dir, args=(), **kw):
        super().__init__(args=args, **kw)
        self.binary = binary
        self.with_data_dir = with_data_dir

    def start(self, args=None, timeout=20.0):
        """Keeps its port across restarts (the queriers' view of it stays);
        only when that port was taken meanwhile (another test's listener or an
        outgoing connection's ephemeral port) does it move to a free one."""
        if args is not None:
            self.args = list(args)
        if self.port is None:
            self.port = h.free_port()
        for attempt in range(3):
            mark = self._spawn()
            try:
                self.wait_ready(timeout)
                return self
            except AssertionError as e:
                self._terminate()
                if attempt == 2 or not self._log_says_since(mark, b"address already in use"):
                    raise AssertionError(f"{e}\n{self.log_tail()}") from None
                self.port = h.free_port()

    def _spawn(self):
        """Starts the process; returns the log's offset where this run begins."""
        cmd = [self.binary, f"--http.address=127.0.0.1:{self.port}",
               f"--log.level={self.log_level}", *self.args]
        if self.with_data_dir:
            cmd.insert(2, f"--data.dir={self.data_dir}")
        self._log = open(self.log_path, "ab")
        mark = self._log.tell()
        self._log.write(f"\n=== {' '.join(cmd)}\n".encode())
        self._log.flush()
        env = dict(os.environ)
        env.update(self.env or {})
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        return mark

    def _log_says_since(self, mark, needle):
        with open(self.log_path, "rb") as f:
            f.seek(mark)
            return needle in f.read()

    def kill9(self):
        self.proc.kill()        # SIGKILL to our own child, by pid
        self.proc.wait()
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"


# A dead consumer's entries are claimed after 2 s instead of a minute, so
# the tests see XAUTOCLAIM at work without waiting.
CLAIM_IDLE = "--redis.claim-idle=2s"


def ingester(redis_url, args=(), env=None):
    """env: extra environment variables (e.g. the test-only EMBER_FAILPOINT)."""
    b = os.path.join(h.BIN_DIR, "services", "ingester", "ember-ingester")
    return Role(b, True, args=[f"--redis.url={redis_url}", CLAIM_IDLE, *args], env=env)


def consumer_id(ing):
    """The default --ingester.id: <hostname>:<http port>."""
    return f"{socket.gethostname()}:{ing.port}"


def metric(e, name):
    """Sum of a metric's samples over its labels (0 when absent)."""
    return sum(v for (n, _), v in e.metrics().items() if n == name)


def querier(redis_url, args=()):
    b = os.path.join(h.BIN_DIR, "services", "querier", "ember-querier")
    return Role(b, True, args=[f"--redis.url={redis_url}", *args])


def live_ingesters(q):
    for (name, _), v in q.metrics().items():
        if name == "ember_querier_live_ingesters":
            return int(v)
    return -1


def wait_members(q, n, timeout=15):
    return h.wait_for(lambda: live_ingesters(q) == n, timeout=timeout,
                      what=f"{n} live ingesters")


# ---- replication by zones: one consumer group per zone, each a full copy.

REGISTRY = "ember:members:ingester:registry"
NOTES = "ember:members:ingester:notes"  # id -> "<until ms>|<what it lacks>"
MARKS = "ember:members:ingester:marks"  # id -> "<generation>|<ms>": the bucket below it


def mark_ms(redis, ingester_id):
    """The ingester's mark (issue 27), or None without one."""
    v = redis.cmd("HGET", MARKS, ingester_id)
    return int(v.split(b"|")[1]) if v else None


def zone_group(zone):
    """The consumer group of a zone ("" = the default zone)."""
    return f"ingesters.{zone}" if zone else "ingesters"


def zoned_ingester(redis_url, zone, ingester_id, args=()):
    """An ingester of a zone with an explicit (stable) id."""
    return ingester(redis_url, [f"--ingester.zone={zone}", f"--ingester.id={ingester_id}",
                                *args])


def groups_drained(redis, groups, prefix="ember:ingest:"):
    """Every listed group has been delivered every entry of every stream and
    acknowledged it (a stream lacking one of the groups is not drained)."""
    for key in redis.cmd("KEYS", prefix + "*"):
        info = _pairs(redis.cmd("XINFO", "STREAM", key))
        by_name = {g.get("name"): g for g in
                   (_pairs(x) for x in redis.cmd("XINFO", "GROUPS", key))}
        for name in groups:
            g = by_name.get(name)
            if not g or g.get("pending", 0) != 0 or _lag(info, g) != 0:
                return False
    return True


def wait_groups_drained(redis, groups, timeout=30):
    return h.wait_for(lambda: groups_drained(redis, groups), timeout=timeout,
                      what=f"groups {list(groups)} drained")


def pending_in_group(redis, consumer, group):
    n = 0
    for key in redis.cmd("KEYS", "ember:ingest:*"):
        for c in redis.cmd("XINFO", "CONSUMERS", key, group):
            c = _pairs(c)
            if c.get("name") == consumer:
                n += c.get("pending", 0)
    return n


def gauge(e, name):
    """A metric without labels, or -1 when absent."""
    for (n, _), v in e.metrics().items():
        if n == name:
            return int(v)
    return -1


def wait_zones(q, live, complete, asked, timeout=20):
    """The querier sees `live` ingesters, `complete` complete zones and asks `asked`."""
    def ok():
        return (gauge(q, "ember_querier_live_ingesters"), gauge(q, "ember_querier_complete_zones"),
                gauge(q, "ember_querier_asked_ingesters")) == (live, complete, asked)
    return h.wait_for(ok, timeout=timeout,
                      what=f"querier: {live} live, {complete} complete zones, asking {asked}")


def folded(seed):
    """A random folded-stacks body (3 to 12 stacks of fn_0..fn_30), the same
    for the same seed."""
    rnd = random.Random(seed)
    lines = []
    for _ in range(rnd.randint(3, 12)):
        depth = rnd.randint(1, 6)
        stack = ";".join(f"fn_{rnd.randint(0, 30)}" for _ in range(depth))
        lines.append(f"{stack} {rnd.randint(1, 500)}")
    return ("\n".join(lines) + "\n").encode()


class ClusterTestCase(unittest.TestCase):
    """Processes started once for the class by cls.set_up() and stopped at the
    end, also when set_up fails half-way (unittest then skips tearDownClass).
    set_up appends what it starts to cls.procs before starting it and may set
    cls.redis, which is stopped last."""
    procs = []
    redis = None

    @classmethod
    def setUpClass(cls):
        cls.procs, cls.redis = [], None
        try:
            cls.set_up()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            p.cleanup()
        if cls.redis:
            cls.redis.cleanup()


def merged_total(e, t0, t1):
    """Sum of the samples of SelectMergeProfile over [t0, t1] (ms) of the first
    profile type, 0 when there is none yet."""
    pt = e.q("ProfileTypes", start=t0, end=t1).profile_types
    if not pt:
        return 0
    raw = e.merge_profile(pt[0].ID, "{}", t0, t1)
    p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
    return sum(s.value[0] for s in p.sample)


def pprof_stacks(raw):
    """A pprof (gzip or not) as {stack of function names, leaf first: values}:
    what it says, free of the id order that differs between sets of ingesters."""
    p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
    fn = {f.id: p.string_table[f.name] for f in p.function}
    loc = {loc.id: tuple(fn[line.function_id] for line in loc.line) for loc in p.location}
    out = {}
    for smp in p.sample:
        stack = tuple(name for lid in smp.location_id for name in loc[lid])
        old = out.get(stack, (0,) * len(smp.value))
        out[stack] = tuple(a + b for a, b in zip(old, smp.value))
    return out


def bucket_object(path):
    """(bytes, SHA-256 hex digest in its header) of an object of the
    filesystem storage backend: "ember-obj1 <digest>\n" then the bytes."""
    header = b"ember-obj1 "
    with open(path, "rb") as f:
        raw = f.read()
    line, _, body = raw.partition(b"\n")
    assert line.startswith(header), path
    return body, line[len(header):].decode()


def push_folded(e, seed, ts_ms):
    """One folded profile of dh.folded(seed) for app.cpu{svc="x"} at ts_ms."""
    ts = ts_ms // 1000
    r = e.ingest('app.cpu{svc="x"}', folded(seed), params={
        "from": str(ts), "until": str(ts + 10), "format": "folded", "sampleRate": "100"})
    assert r.status == 200, r.describe()
