"""ember-agent, the standalone agent: eBPF samples -> Redis streams, on a
redis-server of our own.

Checks the binary's flags (--redis.url, --agent.sample-rate,
--agent.interval, --agent.filter, --node), /ready and /metrics, that the
profiles land in the ember:ingest:<p> streams as lean entries of
ember.v1.IngestProfile messages (read back with XRANGE, unpacked by the zstd
tool and decoded by python protobuf from the repo's protos: independent
decoders) carrying the known functions of a
known program, that the filter keeps every other process out, and a clean
SIGTERM drain. Needs root (CI runs as root).
"""
import importlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import unittest

import distributed_harness as dh
import harness as h
import test_agent as ta

INTERVAL_S = 2


PARTITIONS = 16


def agent_binary():
    return os.path.join(h.BIN_DIR, "services", "agent", "ember-agent")


_INGEST_PB = None


def ingest_pb():
    """ember.v1.IngestProfile from proto/, generated next to harness.pb()'s
    modules (package `embpb`, whose types.v1 it imports)."""
    global _INGEST_PB
    if _INGEST_PB is None:
        h.pb()
        tmp = h.temp_dir("ember-agent-pb-")
        src, out = os.path.join(tmp, "src"), os.path.join(tmp, "out")
        os.makedirs(out)
        for rel in ("types/v1/types.proto", "ember/v1/ingest.proto"):
            with open(os.path.join(h.SRC_DIR, "proto", rel)) as f:
                text = re.sub(r'^import "([^"]+)";', r'import "embpb/\1";', f.read(), flags=re.M)
            dst = os.path.join(src, "embpb", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "w") as f:
                f.write(text)
        subprocess.run(["protoc", f"--python_out={out}", f"-I{src}", "embpb/ember/v1/ingest.proto"],
                       check=True, cwd=src)
        sys.path.insert(0, out)
        _INGEST_PB = importlib.import_module("embpb.ember.v1.ingest_pb2")
    return _INGEST_PB


def resp_command(port, *args):
    """One Redis command over RESP; returns the decoded reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        req = f"*{len(args)}\r\n".encode()
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            req += f"${len(a)}\r\n".encode() + a + b"\r\n"
        s.sendall(req)
        with s.makefile("rb") as f:
            return _resp_read(f)


def _resp_read(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp_read(f) for _ in range(n)]
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"-":
        raise AssertionError(rest.decode())
    return int(rest) if kind == b":" else rest


def entry_message(m):
    """The IngestProfile bytes of stream entry m: a lean entry (0x00 'E' 'L'
    0x02, the message's length as u32 little endian, one zstd frame)
    unpacked by the zstd tool (an independent decoder), else m itself."""
    if m[:1] != b"\x00":
        return m
    assert m[:4] == b"\x00EL\x02", m[:4]
    (n,) = struct.unpack("<I", m[4:8])
    out = subprocess.run(["zstd", "-d", "-c", "-q"], input=m[8:], capture_output=True,
                         check=True).stdout
    assert len(out) == n, (len(out), n)
    return out


def stream_messages(port, lean=True):
    """Every IngestProfile in every partition's stream; each entry must be
    lean when `lean` (the agent and the scraper publish lean entries)."""
    pb = ingest_pb()
    out = []
    for p in range(PARTITIONS):
        for _id, fields in resp_command(port, "XRANGE", f"ember:ingest:{p}", "-", "+") or []:
            m = dict(zip(fields[::2], fields[1::2]))[b"m"]
            assert not lean or m[:4] == b"\x00EL\x02", m[:8]
            out.append((p, pb.IngestProfile.FromString(entry_message(m))))
    return out


def function_totals(profile):
    """{function name: inclusive cpu ns} of a pprof (python protobuf)."""
    strings = profile.string_table
    fn = {f.id: strings[f.name] for f in profile.function}
    loc = {l.id: [fn[line.function_id] for line in l.line] for l in profile.location}
    totals = {}
    for s in profile.sample:
        names = {n for lid in s.location_id for n in loc[lid]}
        for n in names:
            totals[n] = totals.get(n, 0) + s.value[1]
    return totals


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
class AgentRedisTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ember-agent-redis-")
        cls.c_bin, _ = ta.build_programs(cls.tmp)
        cls.redis = dh.Redis().start()
        cls.agent = dh.Role(agent_binary(), False, args=[
            f"--redis.url={cls.redis.url}", f"--agent.interval={INTERVAL_S}s",
            "--agent.sample-rate=97", '--agent.filter={comm="cpu_mix"}', "--node=it-node"])
        cls.agent.start()

    @classmethod
    def tearDownClass(cls):
        cls.agent.cleanup()
        cls.redis.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_profiles_land_in_the_streams_and_the_filter_holds(self):
        run = ta.Run([self.c_bin, "mix", str(2 * INTERVAL_S)]).finish()

        def arrived():
            msgs = stream_messages(self.redis.port)
            mine = [(p, m) for p, m in msgs
                    if {l.name: l.value for l in m.labels}.get("pid") == str(run.pid)]
            totals = {}
            for _, m in mine:
                prof = h.pb().profile.Profile.FromString(m.pprof)
                for k, v in function_totals(prof).items():
                    totals[k] = totals.get(k, 0) + v
            return (msgs, mine, totals) if totals.get("beta_work") else None

        msgs, mine, totals = h.wait_for(arrived, timeout=8 * INTERVAL_S, interval=0.5,
                                        what="the agent's profiles in the Redis streams")
        # This test is about delivery through the streams; the 3:1 CPU split
        # itself is judged in test_agent.py, where every interval is queried.
        self.assertGreater(totals["alpha_work"], 0)
        self.assertIn("main", totals)
        for p, m in msgs:
            labels = {l.name: l.value for l in m.labels}
            self.assertEqual(labels["comm"], "cpu_mix", "the filter let another process through")
            self.assertEqual(labels["node"], "it-node")
            self.assertEqual(labels["__name__"], "process_cpu")
            self.assertEqual(m.tenant, "anonymous")
            self.assertEqual(len(m.ingest_id), 16)
        self.assertEqual(len({p for p, _ in mine}), 1, "one series, one partition")
        m = self.agent.metrics()
        self.assertGreaterEqual(m[("ember_agent_profiles_published_total", frozenset())],
                                len(msgs))
        self.assertGreater(m[("ember_agent_samples_skipped_total",
                              frozenset({("reason", "filtered")}))], 0)
        self.assertEqual(self.agent.request("GET", "/ready").status, 200)

    def test_ready_follows_redis_and_sigterm_drains(self):
        redis = dh.Redis(aof=False).start()
        agent = dh.Role(agent_binary(), False, args=[
            f"--redis.url={redis.url}", "--agent.interval=1s", "--agent.sample-rate=19"])
        try:
            agent.start()
            self.assertEqual(agent.request("GET", "/ready").status, 200)
            redis.stop()
            h.wait_for(lambda: agent.request("GET", "/ready").status == 503, timeout=15,
                       what="/ready to report Redis down")
            self.assertEqual(agent.request("GET", "/ready").body, b"redis down")
            redis.start()  # same port: the link comes back by itself
            h.wait_for(lambda: agent.request("GET", "/ready").status == 200, timeout=20,
                       what="/ready after Redis came back")
            self.assertEqual(agent.stop(), 0)
            with open(agent.log_path, "rb") as f:
                log = f.read().decode(errors="replace")
            self.assertIn('msg="agent: stopped"', log)
        finally:
            agent.cleanup()
            redis.cleanup()

    def test_bad_flags_exit_2(self):
        import subprocess
        for args in (["--agent.sample-rate=0"], ["--agent.interval=10ms"]):
            r = subprocess.run([agent_binary(), f"--redis.url={self.redis.url}", *args],
                               capture_output=True, timeout=20)
            self.assertEqual(r.returncode, 2, r.stderr)
        r = subprocess.run([agent_binary(), "--http.address=127.0.0.1:0"], capture_output=True,
                           timeout=20)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"--redis.url is required", r.stderr)


def cgroup2_root():
    """Where the unified cgroup hierarchy is mounted (pure v2 or hybrid), or None."""
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    return None


class FakeApiServer:
    """A Kubernetes API server that only lists pods: answers the node's
    PodList and records the request paths."""

    def __init__(self, pod_list):
        import http.server
        import threading
        body = json.dumps(pod_list).encode()
        paths = self.paths = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
class AgentKubernetesTest(unittest.TestCase):
    """A process in a cgroup named like a containerd container of a pod (the
    systemd driver's shape) gets namespace/pod/container labels from a fake
    API server listing the node's pods, and service_name namespace/container."""

    CID = "4f1e" + "0123456789abcdef" * 3 + "a1b2c3d4e5f6"

    def test_pod_labels_from_the_api_server(self):
        root = cgroup2_root()
        if not root or not os.access(root, os.W_OK):
            self.skipTest("no writable cgroup v2 hierarchy")
        self.assertEqual(len(self.CID), 64)
        pod_dir = os.path.join(root, "kubepods.slice", "kubepods-pod1a2b.slice")
        cg = os.path.join(pod_dir, f"cri-containerd-{self.CID}.scope")
        os.makedirs(cg, exist_ok=True)
        api = FakeApiServer({"kind": "PodList", "items": [{
            "metadata": {"namespace": "shop", "name": "cart-7d9f"},
            "status": {"containerStatuses": [
                {"name": "cart", "containerID": f"containerd://{self.CID}"}]}}]})
        redis = dh.Redis(aof=False).start()
        agent = dh.Role(agent_binary(), False, args=[
            f"--redis.url={redis.url}", f"--agent.interval={INTERVAL_S}s",
            "--agent.sample-rate=97", "--node=k8s-node-1", f"--agent.kubernetes-api={api.url}",
            '--agent.filter={container_id!=""}'])
        tmp = tempfile.mkdtemp(prefix="ember-agent-k8s-")
        try:
            c_bin, _ = ta.build_programs(tmp)
            agent.start()
            # The shell moves itself into the container's cgroup, then execs the
            # workload, which runs until the agent has labelled it: a busy
            # machine delays the agent's first look, and a process gone by
            # then has no cgroup left to read (docs/testing.md: wait for it).
            run = ta.Run(["sh", "-c", f'echo $$ > {cg}/cgroup.procs && exec {c_bin} mix 120'])

            def labelled():
                for _, m in stream_messages(redis.port):
                    labels = {l.name: l.value for l in m.labels}
                    if labels.get("pid") == str(run.pid) and labels.get("pod"):
                        return labels
                return None

            try:
                labels = h.wait_for(labelled, timeout=60, interval=0.5,
                                    what="a profile with pod labels")
            finally:
                run.proc.kill()
                run.finish()
            self.assertEqual(labels["namespace"], "shop")
            self.assertEqual(labels["pod"], "cart-7d9f")
            self.assertEqual(labels["container"], "cart")
            self.assertEqual(labels["container_id"], self.CID)
            self.assertEqual(labels["service_name"], "shop/cart")
            self.assertEqual(labels["cgroup"], cg[len(root):])
            self.assertTrue(any("fieldSelector=spec.nodeName%3Dk8s-node-1" in p
                                for p in api.paths), api.paths)
        finally:
            agent.cleanup()
            redis.cleanup()
            api.close()
            shutil.rmtree(tmp, ignore_errors=True)
            for d in (cg, pod_dir, os.path.dirname(pod_dir)):
                try:
                    os.rmdir(d)
                except OSError:
                    pass


if __name__ == "__main__":
    unittest.main()
