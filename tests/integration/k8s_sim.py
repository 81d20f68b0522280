"""A simulated Kubernetes node for the chart tests: runs the pods `helm template`
renders as process trees, each in a network namespace of its own.

- Network: one namespace holds the test bridge (the "node"); every pod gets a
  namespace, a veth pair whose outer end is on the bridge and one IP of a private
  /24 that exists only inside these namespaces (the machine's own namespace never
  gets an address or route in it). A "client" namespace stands in for a client pod.
- DNS: /etc/netns/<netns>/hosts (which `ip netns exec` mounts over /etc/hosts)
  maps every rendered Service's names (<svc>.<ns>.svc.<domain>, <svc>.<ns>,
  <svc>) to the IPs of the ready pods it selects, and a StatefulSet pod's name
  under its headless Service (<pod>.<svc>.<ns>.svc.<domain>) to its IP. A Service
  over several pods gets one line per pod, i.e. a multi-A record like a headless
  Service has (glibc returns them all; curl tries them in turn): no kube-proxy
  virtual IP exists here, and a client that finds one pod down moves to the next
  just as kube-proxy stops sending to a pod that fails its readiness probe.
- Pods: each container's command/args/env are taken as rendered: $(VAR) is
  expanded from the container's env like the kubelet does, valueFrom.fieldRef
  (metadata.name, metadata.namespace, status.podIP, spec.nodeName) and
  secretKeyRef/configMapKeyRef from rendered objects are resolved. The image's
  binaries are mapped to the build tree by name (/usr/local/bin/ember-querier ->
  <build>/.../ember-querier; redis-server -> Debian's). Volumes become host
  directories: a PVC (volumeClaimTemplates) is a directory named after the claim
  and the pod that outlives the pod, an emptyDir one that does not, a ConfigMap
  one holding its keys as files. A process cannot see a mount at the container's
  path without a root filesystem of its own, so args and env values naming a
  mountPath (or a path under it) are rewritten to the host directory.
- External hosts (add_host): a service the chart only points at (a Redis Cluster's
  nodes, an S3 server) runs as a process in a namespace of its own on the same
  bridge, under a host name every hosts file maps to its IP.
- Pods are started in their own session; kill(pod, SIGKILL) kills the process by
  pid. cleanup() stops every process, deletes every namespace (with them the veths
  and the bridge) and every /etc/netns dir; it is registered with atexit too.
"""
import atexit
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import harness as h
import k8s_harness as k

NETNS_ETC = "/etc/netns"


def can_run():
    """None when this machine can make network namespaces, else why not."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, bridge)"
    if not shutil.which("ip"):
        return "no ip(8) (iproute2)"
    if not shutil.which("curl"):
        return "no curl"
    tag = f"embchk{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", tag], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", tag], capture_output=True)
    return None


def sh(*cmd, check=True):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


class Pod:
    def __init__(self, name, workload, template, ip, index):
        self.name = name
        self.workload = workload          # the rendered StatefulSet / Deployment
        self.template = template          # its spec.template
        self.ip = ip
        self.index = index
        self.labels = dict(template["metadata"].get("labels", {}))
        self.procs = []                   # Popen per container
        self.logs = []
        self.netns = None
        self.empty_dirs = []
        self.ready = False


class Host:
    """A machine outside the release but on the pod network (add_host)."""

    def __init__(self, name, ip, netns, log_path):
        self.name = name
        self.ip = ip
        self.netns = netns
        self.log_path = log_path
        self.proc = None


class Cluster:
    def __init__(self, namespace, domain="cluster.local", node_name="sim-node"):
        self.ns = namespace
        self.domain = domain
        self.node_name = node_name
        self.tag = f"embk8s{os.getpid()}"
        sweep_stale()
        self.node_netns = f"{self.tag}-node"
        self.bridge = "br0"
        self.subnet = "10.96.77"          # inside our namespaces only
        self.next_ip = 10
        self.next_link = 0
        self.root = tempfile.mkdtemp(prefix=f"ember-k8s-{self.tag}-")
        self.pvc_root = os.path.join(self.root, "pvc")
        os.makedirs(self.pvc_root)
        self.docs = []
        self.pods = {}                    # name -> Pod
        self.hosts = {}                   # name -> Host (add_host)
        self.ips = {}                     # pod name -> ip (kept across restarts)
        self.netns_all = []
        self.client = None
        self._closed = False
        atexit.register(self.cleanup)
        sh("ip", "netns", "add", self.node_netns)
        self.netns_all.append(self.node_netns)
        self._nx(self.node_netns, "ip", "link", "set", "lo", "up")
        self._nx(self.node_netns, "ip", "link", "add", self.bridge, "type", "bridge")
        self._nx(self.node_netns, "ip", "link", "set", self.bridge, "up")
        self.client = self._make_netns("client")

    # ---- plumbing
    def _nx(self, netns, *cmd):
        return sh("ip", "netns", "exec", netns, *cmd)

    def _alloc_ip(self, name):
        if name not in self.ips:
            if self.next_ip > 250:
                raise AssertionError("simulated cluster: out of pod IPs")
            self.ips[name] = f"{self.subnet}.{self.next_ip}"
            self.next_ip += 1
        return self.ips[name]

    def _make_netns(self, name):
        """A pod network namespace with its veth on the bridge; returns its name."""
        netns = f"{self.tag}-{name}"
        ip = self._alloc_ip(name)
        sh("ip", "netns", "add", netns)
        self.netns_all.append(netns)
        os.makedirs(os.path.join(NETNS_ETC, netns), exist_ok=True)
        self._write_hosts(netns, name)
        self.next_link += 1
        outer = f"veth{self.next_link}"       # unique within our node namespace
        sh("ip", "-n", self.node_netns, "link", "add", outer, "type", "veth", "peer", "name", "eth0",
           "netns", netns)
        sh("ip", "-n", self.node_netns, "link", "set", outer, "master", self.bridge)
        sh("ip", "-n", self.node_netns, "link", "set", outer, "up")
        sh("ip", "-n", netns, "link", "set", "lo", "up")
        sh("ip", "-n", netns, "addr", "add", f"{ip}/24", "dev", "eth0")
        sh("ip", "-n", netns, "link", "set", "eth0", "up")
        return netns

    def _del_netns(self, netns):
        sh("ip", "netns", "del", netns, check=False)
        shutil.rmtree(os.path.join(NETNS_ETC, netns), ignore_errors=True)
        if netns in self.netns_all:
            self.netns_all.remove(netns)

    # ---- DNS
    def service_records(self):
        """{name: [ip, ...]} for every rendered Service and headless pod name."""
        recs = {}

        def add(names, ips):
            for n in names:
                recs.setdefault(n, [])
                for ip in ips:
                    if ip not in recs[n]:
                        recs[n].append(ip)

        for svc in k.kinds(self.docs, "Service"):
            name = svc["metadata"]["name"]
            sel = svc["spec"].get("selector") or {}
            headless = svc["spec"].get("clusterIP") == "None"
            not_ready_too = svc["spec"].get("publishNotReadyAddresses", False)
            pods = sorted((p for p in self.pods.values() if k.selects(sel, p.labels)), key=lambda p: p.name)
            ips = [p.ip for p in pods if p.ready or not_ready_too]
            fq = f"{name}.{self.ns}.svc.{self.domain}"
            add([fq, f"{name}.{self.ns}.svc", f"{name}.{self.ns}", name], ips)
            if headless:
                for p in pods:
                    if p.workload["kind"] == "StatefulSet" and p.workload["spec"].get("serviceName") == name:
                        add([f"{p.name}.{fq}", f"{p.name}.{name}.{self.ns}.svc", f"{p.name}.{name}"], [p.ip])
        for host in self.hosts.values():
            add([host.name], [host.ip])
        return recs

    def _hosts_text(self, own):
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        if own in self.ips:
            lines.append(f"{self.ips[own]}\t{own}")
        for name, ips in sorted(self.service_records().items()):
            for ip in ips:
                lines.append(f"{ip}\t{name}")
        return "\n".join(lines) + "\n"

    def _write_hosts(self, netns, own):
        path = os.path.join(NETNS_ETC, netns, "hosts")
        text = self._hosts_text(own)
        # in place (same inode): running pods see it through their bind mount
        with open(path, "a+") as f:
            f.seek(0)
            f.truncate()
            f.write(text)

    def update_dns(self):
        for p in self.pods.values():
            if p.netns:
                self._write_hosts(p.netns, p.name)
        self._write_hosts(self.client, "client")
        for host in self.hosts.values():
            self._write_hosts(host.netns, host.name)

    # ---- external hosts
    def add_host(self, name):
        """A namespace on the bridge whose IP every hosts file maps `name` to, for a
        service the chart is pointed at from outside the release; start_host runs
        its process."""
        if name in self.hosts or name in self.pods:
            raise AssertionError(f"{name}: already a host or pod")
        netns = self._make_netns(name)
        host = Host(name, self.ips[name], netns, os.path.join(self.root, f"{name}.log"))
        self.hosts[name] = host
        self.update_dns()
        return host

    def start_host(self, name, argv):
        """Runs argv in the host's namespace (killed with the test process)."""
        host = self.hosts[name]
        if host.proc is not None and host.proc.poll() is None:
            raise AssertionError(f"{name}: already running")
        with open(host.log_path, "ab") as log:
            log.write(f"\n=== {' '.join(argv)}\n".encode())
            log.flush()
            host.proc = subprocess.Popen(["ip", "netns", "exec", host.netns, *argv], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        return host

    def kill_host(self, name, sig=signal.SIGKILL):
        """Signals the host's process (by pid) and waits for it."""
        proc = self.hosts[name].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # ---- objects
    def apply(self, docs):
        """Takes a new render: starts the pods it adds, stops those it removes,
        keeps the others (their templates must be unchanged: returns the names of
        workloads whose pod template changed, which this simulation does not roll)."""
        old = {(d["kind"], d["metadata"]["name"]): d for d in k.workloads(self.docs)}
        self.docs = docs
        changed = []
        want = {}
        for w in k.workloads(docs):
            if w["kind"] == "DaemonSet":
                continue                  # the eBPF agent is not part of the simulation
            key = (w["kind"], w["metadata"]["name"])
            if key in old and old[key]["spec"]["template"] != w["spec"]["template"]:
                changed.append(w["metadata"]["name"])
            n = w["spec"].get("replicas", 1)
            for i in range(n):
                want[f"{w['metadata']['name']}-{i}"] = (w, i)
        for name in [n for n in self.pods if n not in want]:
            self.delete_pod(name)
        new = []
        for name, (w, i) in want.items():
            if name not in self.pods:
                pod = Pod(name, w, w["spec"]["template"], self._alloc_ip(name), i)
                self.pods[name] = pod
                new.append(pod)
        self.update_dns()
        for pod in new:
            self.start_pod(pod)
        return changed

    def _lookup(self, kind, name, key):
        obj = k.by_name(self.docs, kind, name)
        if kind == "Secret":
            import base64
            if key in obj.get("stringData", {}):
                return obj["stringData"][key]
            return base64.b64decode(obj["data"][key]).decode()
        return obj["data"][key]

    def _env(self, pod, c):
        env = {}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = expand(str(e["value"]), env)
                continue
            vf = e["valueFrom"]
            if "fieldRef" in vf:
                path = vf["fieldRef"]["fieldPath"]
                env[e["name"]] = {"metadata.name": pod.name, "metadata.namespace": self.ns,
                                  "status.podIP": pod.ip, "spec.nodeName": self.node_name}[path]
            elif "secretKeyRef" in vf:
                r = vf["secretKeyRef"]
                env[e["name"]] = self._lookup("Secret", r["name"], r["key"])
            elif "configMapKeyRef" in vf:
                r = vf["configMapKeyRef"]
                env[e["name"]] = self._lookup("ConfigMap", r["name"], r["key"])
            else:
                raise AssertionError(f"{pod.name}: env {e} not simulated")
        return env

    def _volumes(self, pod):
        """{volume name: host dir}."""
        spec = pod.template["spec"]
        out = {}
        for t in pod.workload["spec"].get("volumeClaimTemplates", []):
            claim = f"{t['metadata']['name']}-{pod.name}"
            d = os.path.join(self.pvc_root, claim)
            os.makedirs(d, exist_ok=True)
            out[t["metadata"]["name"]] = d
        for v in spec.get("volumes", []):
            if "emptyDir" in v:
                d = tempfile.mkdtemp(prefix=f"{pod.name}-{v['name']}-", dir=self.root)
                pod.empty_dirs.append(d)
                out[v["name"]] = d
            elif "configMap" in v:
                cm = k.by_name(self.docs, "ConfigMap", v["configMap"]["name"])
                d = tempfile.mkdtemp(prefix=f"{pod.name}-{v['name']}-", dir=self.root)
                pod.empty_dirs.append(d)
                for key, text in cm.get("data", {}).items():
                    with open(os.path.join(d, key), "w") as f:
                        f.write(text)
                out[v["name"]] = d
            elif "persistentVolumeClaim" in v:
                d = os.path.join(self.pvc_root, v["persistentVolumeClaim"]["claimName"])
                os.makedirs(d, exist_ok=True)
                out[v["name"]] = d
            else:
                raise AssertionError(f"{pod.name}: volume {v} not simulated")
        return out

    def start_pod(self, pod):
        if pod.netns is None:
            pod.netns = self._make_netns(pod.name)
        vols = self._volumes(pod)
        pod.procs, pod.logs = [], []
        for c in pod.template["spec"]["containers"]:
            env = self._env(pod, c)
            mounts = sorted(((m["mountPath"].rstrip("/"), vols[m["name"]]) for m in c.get("volumeMounts", [])),
                            key=lambda x: -len(x[0]))
            argv = [expand(a, env) for a in (c.get("command") or []) + (c.get("args") or [])]
            argv = [map_paths(a, mounts) for a in argv]
            env = {n: map_paths(v, mounts) for n, v in env.items()}
            argv[0] = host_binary(argv[0])
            log_path = os.path.join(self.root, f"{pod.name}.{c['name']}.log")
            log = open(log_path, "ab")
            log.write(f"\n=== {' '.join(argv)}\n".encode())
            log.flush()
            # a container's environment is its env alone (no API server here, so no
            # KUBERNETES_SERVICE_HOST)
            base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp"}
            p = subprocess.Popen(["ip", "netns", "exec", pod.netns, *argv], stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env={**base, **env}, start_new_session=True,
                                 preexec_fn=_die_with_parent)
            pod.procs.append(p)
            pod.logs.append(log_path)
            log.close()
        return pod

    def probe_ok(self, pod):
        """The readiness probe of every container, as the kubelet runs it."""
        for p in pod.procs:
            if p.poll() is not None:
                raise AssertionError(f"{pod.name} exited with {p.returncode}\n{self.log_tail(pod)}")
        for c in pod.template["spec"]["containers"]:
            probe = c.get("readinessProbe")
            if not probe:
                continue
            port = probe.get("httpGet", probe.get("tcpSocket", {})).get("port")
            if isinstance(port, str):
                port = [x["containerPort"] for x in c["ports"] if x["name"] == port][0]
            if "httpGet" in probe:
                code = self.curl_status(f"http://{pod.ip}:{port}{probe['httpGet']['path']}")
                if code != 200:
                    return False
            else:
                r = subprocess.run(["ip", "netns", "exec", self.client, "bash", "-c",
                                    f"exec 3<>/dev/tcp/{pod.ip}/{port}"], capture_output=True, timeout=10)
                if r.returncode != 0:
                    return False
        return True

    def wait_ready(self, pods=None, timeout=60):
        pods = [self.pods[n] for n in pods] if pods else list(self.pods.values())
        deadline = time.monotonic() + timeout
        pending = [p for p in pods if not p.ready]
        while pending:
            became = False
            for p in list(pending):
                if self.probe_ok(p):
                    p.ready = True
                    pending.remove(p)
                    became = True
            if became:
                self.update_dns()     # the endpoints controller: a ready pod joins its Services
            if pending and time.monotonic() > deadline:
                raise AssertionError(f"pods not ready after {timeout}s: {[p.name for p in pending]}\n" +
                                     "\n".join(self.log_tail(p) for p in pending))
            if pending:
                time.sleep(0.2)
        self.update_dns()

    def kill(self, name, sig=signal.SIGKILL):
        """Kills the pod's containers (by pid) and waits for them; the pod stays known
        (its IP, its PVC directory), marked not ready."""
        pod = self.pods[name]
        for p in pod.procs:
            if p.poll() is None:
                p.send_signal(sig)
        for p in pod.procs:
            p.wait(30)
        pod.ready = False
        self.update_dns()

    def restart(self, name):
        """The StatefulSet controller recreating the pod: same name, same IP and DNS,
        same PVC directory; emptyDirs are new."""
        pod = self.pods[name]
        for d in pod.empty_dirs:
            shutil.rmtree(d, ignore_errors=True)
        pod.empty_dirs = []
        self.start_pod(pod)

    def delete_pod(self, name):
        pod = self.pods.pop(name)
        self._stop(pod)
        if pod.netns:
            self._del_netns(pod.netns)
        self.update_dns()

    def _stop(self, pod):
        for p in pod.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in pod.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for d in pod.empty_dirs:
            shutil.rmtree(d, ignore_errors=True)

    def log_tail(self, pod, n=30):
        out = []
        for path in pod.logs:
            try:
                with open(path, "rb") as f:
                    lines = f.read().decode(errors="replace").splitlines()
                out.append(f"--- {os.path.basename(path)} ---\n" + "\n".join(lines[-n:]))
            except OSError:
                pass
        return "\n".join(out)

    # ---- clients (curl in the client namespace, names resolved by its hosts file)
    def on_client(self, fn, *args):
        """fn(*args) on a thread moved into the client namespace (setns: its sockets
        reach pod and host IPs; names are not resolved there, use IPs)."""
        out = {}

        def run():
            try:
                _enter_netns(self.client)
                out["value"] = fn(*args)
            except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
                out["error"] = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join()
        if "error" in out:
            raise out["error"]
        return out["value"]

    def curl(self, url, body=None, headers=None, timeout=30):
        """(status, body bytes) of one request from the client pod."""
        out = tempfile.NamedTemporaryFile(dir=self.root, delete=False)
        out.close()
        cmd = ["ip", "netns", "exec", self.client, "curl", "-sS", "-o", out.name, "-w", "%{http_code}",
               "--max-time", str(timeout)]
        for k_, v in (headers or {}).items():
            cmd += ["-H", f"{k_}: {v}"]
        if body is not None:
            cmd += ["--data-binary", "@-"]
        cmd.append(url)
        r = subprocess.run(cmd, input=body, capture_output=True, timeout=timeout + 10)
        try:
            with open(out.name, "rb") as f:
                data = f.read()
        finally:
            os.unlink(out.name)
        code = int(r.stdout.decode() or 0) if r.stdout.decode().strip().isdigit() else 0
        return code, data if code else r.stderr

    def curl_status(self, url):
        return self.curl(url, timeout=5)[0]

    def connect_json(self, base, method, req):
        code, data = self.curl(f"{base}/querier.v1.QuerierService/{method}", json.dumps(req).encode(),
                               {"Content-Type": "application/json", "Connect-Protocol-Version": "1"})
        if code != 200:
            raise AssertionError(f"{base} {method}: HTTP {code} {data[:300]!r}")
        return json.loads(data)

    # ---- the end
    def cleanup(self):
        if self._closed:
            return
        self._closed = True
        for pod in list(self.pods.values()):
            try:
                self._stop(pod)
            except Exception:  # noqa: BLE001 - keep cleaning up
                pass
        for name in self.hosts:
            self.kill_host(name, signal.SIGTERM)
        for netns in list(self.netns_all):
            self._del_netns(netns)
        shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self):
        """Namespaces, /etc/netns dirs and processes of this cluster still present."""
        left = []
        r = sh("ip", "netns", "list", check=False)
        left += [l.split()[0] for l in r.stdout.splitlines() if l.startswith(self.tag + "-")]
        if os.path.isdir(NETNS_ETC):
            left += [f"/etc/netns/{d}" for d in os.listdir(NETNS_ETC) if d.startswith(self.tag + "-")]
        for pod in self.pods.values():
            left += [f"pid {p.pid}" for p in pod.procs if p.poll() is None]
        left += [f"pid {x.proc.pid}" for x in self.hosts.values() if x.proc and x.proc.poll() is None]
        return left


def _die_with_parent():
    """In the child before exec: SIGKILL when the test process dies, even by SIGKILL
    (a ctest timeout), so no pod outlives its test."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)        # PR_SET_PDEATHSIG


def _enter_netns(netns):
    """The calling thread joins the network namespace (setns(2), CLONE_NEWNET)."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/var/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), f"setns {netns}")
    finally:
        os.close(fd)


def sweep_stale():
    """Removes what an earlier run that was killed before its clean-up left: the
    namespaces embk8s<pid>-* (and /etc/netns dirs) of test processes that no longer
    exist, and the processes still inside those namespaces (by pid)."""
    r = sh("ip", "netns", "list", check=False)
    names = [l.split()[0] for l in r.stdout.splitlines() if l.strip()]
    if os.path.isdir(NETNS_ETC):
        names += [d for d in os.listdir(NETNS_ETC) if d not in names]
    for name in names:
        m = re.match(r"^embk8s(\d+)-", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        sh("ip", "netns", "del", name, check=False)
        shutil.rmtree(os.path.join(NETNS_ETC, name), ignore_errors=True)


def expand(s, env):
    """The kubelet's $(VAR) expansion: defined names are replaced, $$ escapes, the
    rest is left as written."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, s)


def map_paths(s, mounts):
    """Rewrites a container path under a mountPath (whole value, or after '=') to the
    host directory that stands for the volume."""
    prefix, sep, value = s.partition("=") if s.startswith("--") else ("", "", s)
    for mp, host in mounts:
        if value == mp or value.startswith(mp + "/"):
            return prefix + sep + host + value[len(mp):]
    return s


def host_binary(path):
    name = os.path.basename(path)
    if name.startswith("ember"):
        return k.find_binary(name)
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if not found:
        raise AssertionError(f"{name}: not on this machine")
    return found
