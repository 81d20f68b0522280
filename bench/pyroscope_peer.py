"""A Grafana Pyroscope single binary the user provides, run beside ember by the
benchmarks (scale.py, ingest_bench.py --pyroscope BIN).

Nothing here builds Pyroscope. The binary runs as our child on free ports of
127.0.0.1 (HTTP, gRPC, memberlist, metastore raft), with the v2 storage layer
(segment writer -> object store -> metastore + compaction workers, the default
write path since Pyroscope 2.0) on the filesystem backend in a temporary
directory, one node, and the per-tenant limits that would make a benchmark
measure the limiter lifted: ingestion rate, accepting old timestamps (backfill),
query length and lookback.

Disk: the v2 write path flushes a segment object every 500 ms; compaction
workers merge segments into blocks asynchronously and the sources are deleted
only after a fixed 15-minute cleanup delay. So `disk()` reports the whole
directory, `bucket_disk()` the object store alone, `live_disk()` the objects of
the blocks the metastore still lists (its /ops/object-store page: what the data
costs once the cleanup has run) and `metastore_disk()` the metastore, whose raft
WAL is preallocated in 64 MiB segments (a fixed cost, not per sample).
"""
import http.client
import os
import re
import subprocess
import time

ULID = re.compile(rb"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def dir_bytes(d, skip=()):
    """Allocated bytes of the files under d (st_blocks, as du)."""
    total = 0
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if os.path.join(root, x) not in skip]
        for fn in files:
            try:
                total += os.lstat(os.path.join(root, fn)).st_blocks * 512
            except OSError:
                pass
    return total


class Pyroscope:
    """Pyroscope on free ports; data under tmp/pyroscope. `h` is tests/integration/harness."""

    def __init__(self, binary, h, tmp, name="pyroscope"):
        self.h = h
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.bucket = os.path.join(self.dir, "bucket")
        self.port, grpc, gossip, raft = (h.free_port() for _ in range(4))
        ip = "127.0.0.1"
        node = "bench-pyroscope"
        self.args = [
            binary, "-target=all", "-architecture.storage=v2",
            "-auth.multitenancy-enabled=false", "-self-profiling.disable-push=true",
            "-tracing.enabled=false", "-usage-stats.enabled=false", "-config.show_banner=false",
            "-storage.backend=filesystem", f"-storage.filesystem.dir={self.bucket}",
            f"-pyroscopedb.data-path={self.dir}/v1",
            f"-server.http-listen-address={ip}", f"-server.http-listen-port={self.port}",
            f"-server.grpc-listen-address={ip}", f"-server.grpc-listen-port={grpc}",
            f"-memberlist.bind-addr={ip}", f"-memberlist.bind-port={gossip}",
            f"-memberlist.advertise-addr={ip}", f"-memberlist.advertise-port={gossip}",
            f"-memberlist.nodename={node}",
            f"-distributor.ring.instance-addr={ip}", f"-distributor.ring.instance-id={node}",
            f"-overrides-exporter.ring.instance-addr={ip}", f"-overrides-exporter.ring.instance-id={node}",
            f"-query-frontend.instance-addr={ip}",
            f"-segment-writer.lifecycler.addr={ip}", f"-segment-writer.lifecycler.ID={node}",
            "-segment-writer.num-tokens=1", "-segment-writer.min-ready-duration=0",
            f"-query-backend.address={ip}:{grpc}",
            f"-metastore.address={ip}:{grpc}/{node}", "-metastore.min-ready-duration=0",
            f"-metastore.data-dir={self.dir}/metastore/data",
            f"-metastore.raft.dir={self.dir}/metastore/raft",
            f"-metastore.raft.snapshots-dir={self.dir}/metastore/raft",
            f"-metastore.raft.bind-address={ip}:{raft}", f"-metastore.raft.advertise-address={ip}:{raft}",
            f"-metastore.raft.server-id={node}", "-metastore.raft.bootstrap-expect-peers=1",
            f"-metastore.raft.bootstrap-peers={ip}:{raft}/{node}",
            f"-compaction-worker.temp-dir={self.dir}/compaction-tmp",
            # limits: a benchmark measures the server, not its per-tenant limiter
            "-distributor.ingestion-rate-limit-mb=100000", "-distributor.ingestion-burst-size-mb=100000",
            "-validation.reject-older-than=0", "-validation.max-profile-size-bytes=0",
            "-querier.max-query-length=0", "-querier.max-query-lookback=0",
        ]
        os.makedirs(os.path.join(self.dir, "compaction-tmp"))
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = None

    def start(self, timeout=180):
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pyroscope exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.request("GET", "/ready", timeout=2).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"pyroscope did not become ready:\n{self.log_tail()}")

    def log_tail(self, n=30):
        self.log.flush()
        with open(os.path.join(self.dir, "log"), "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")

    # The harness's Ember methods need only self.port / self.request.
    def request(self, method, path, body=None, headers=None, timeout=60, conn=None):
        return self.h.http_request(self.port, method, path, body, headers, timeout, conn)

    def call(self, *args, **kw):
        return self.h.Ember.call(self, *args, **kw)

    def q(self, *args, **kw):
        return self.h.Ember.q(self, *args, **kw)

    def series_sum(self, *args, **kw):
        return self.h.Ember.series_sum(self, *args, **kw)

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    # ---- disk
    def disk(self):
        """Everything under the data directory (bucket, metastore, v1 dir), bytes."""
        return dir_bytes(self.dir, skip=(os.path.join(self.dir, "log"),))

    def bucket_disk(self):
        """The object store alone (segments and blocks), bytes."""
        return dir_bytes(self.bucket)

    def metastore_disk(self):
        """The metastore's raft WAL (preallocated in 64 MiB segments), snapshots and BoltDB."""
        return dir_bytes(os.path.join(self.dir, "metastore"))

    def live_blocks(self, days=90):
        now = int(time.time())
        r = self.request("GET", "/ops/object-store/tenants/anonymous/blocks"
                         f"?queryFrom={now - days * 86400}&queryTo={now + 86400}")
        if r.status != 200:
            return None
        return {m.decode() for m in ULID.findall(r.body)}

    def live_disk(self):
        """(bytes of the objects of live blocks, live blocks, objects on disk);
        None if the metastore's block list cannot be read."""
        live = self.live_blocks()
        if live is None:
            return None
        total, on_disk = 0, 0
        for top in ("segments", "blocks"):
            base = os.path.join(self.bucket, top)
            for root, dirs, _ in os.walk(base):
                for d in list(dirs):
                    if ULID.fullmatch(d.encode()):
                        dirs.remove(d)
                        on_disk += 1
                        if d in live:
                            total += dir_bytes(os.path.join(root, d))
        return total, len(live), on_disk

    def wait_compacted(self, quiet=20, timeout=300):
        """Waits until the set of objects in the bucket has not changed for `quiet` s
        (compaction settled); returns the seconds waited."""
        t0 = time.monotonic()
        last, since = None, time.monotonic()
        while time.monotonic() - t0 < timeout:
            names = set()
            for root, dirs, _ in os.walk(self.bucket):
                names.update(d for d in dirs if ULID.fullmatch(d.encode()))
            if names != last:
                last, since = names, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
            time.sleep(1)
        return time.monotonic() - t0

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()     # our own child, by pid
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
