"""The chart on a simulated cluster (k8s_sim.py): the microservices preset
tests/integration/k8s-sim-values.yaml (two zones of two ingesters, one querier,
a scraper with a static target, the in-chart Redis) rendered by helm and every pod run as rendered, each in a
network namespace of its own, talking through the Service names.

The oracle is an all-in-one `ember` on loopback fed the same pushes: every push
the ingest Service acknowledged goes to it too, and the querier Service must
answer the same as it (flame graphs, series sums, profile types, label values),
and the flame graph's total must equal the sum of the values pushed. Then one
ingester pod is SIGKILLed while pushes go on, restarted on its volume (same name,
IP and PVC directory: StatefulSet semantics), and the answers must again equal the
all-in-one's, now from zone a, which holds that ingester's share (nothing
acknowledged lost). Then querier.replicas goes 1 -> 3 (a new render: only the
querier Deployment may change) and each new querier pod answers the same.
"""
import os
import signal
import unittest
from urllib.parse import quote

import distributed_harness as dh
import harness as h
import k8s_harness as k
import k8s_sim

NS = "ember-sim"
VALUES = os.path.join(h.HERE, "k8s-sim-values.yaml")
QUERIER = f"http://ember-querier.{NS}.svc.cluster.local:4040"
INGEST = f"http://ember-ingest.{NS}:4040"          # a short form, like a pod in the namespace uses

WHY_NOT = k8s_sim.can_run()


@unittest.skipIf(WHY_NOT, f"simulated cluster: {WHY_NOT}")
class SimulatedClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = None
        cls.aio = None
        try:
            k.ensure_tools()
            cls.cluster = k8s_sim.Cluster(NS)
            cls.aio = h.Ember()
            cls.aio.start()
            docs = k.render(files=[VALUES], namespace=NS)
            cls.cluster.apply(docs)
            cls.cluster.wait_ready(timeout=60)
        except BaseException:
            cls.tearDownClass()
            raise
        cls.t0 = (h.now_ms() // 1000 - 3600) * 1000
        cls.t1 = cls.t0 + 3600 * 1000
        cls.pushed_total = 0
        cls.pushes = 0

    @classmethod
    def tearDownClass(cls):
        if cls.aio:
            cls.aio.cleanup()
        if cls.cluster:
            cls.cluster.cleanup()
            left = cls.cluster.leftovers()
            assert not left, f"simulated cluster left behind: {left}"

    # ---- pushes and answers
    def push(self, i):
        """One folded profile through the ingest Service; on 200 the same to the
        all-in-one. Returns the status."""
        ts = self.t0 // 1000 + (i % 100) * 30
        body = dh.folded(i)
        name = f"app.cpu{{svc=s{i % 3}}}"   # the legacy ingest name: unquoted values
        q = f"name={quote(name)}&from={ts}&until={ts + 10}&format=folded&sampleRate=100"
        code, data = self.cluster.curl(f"{INGEST}/ingest?{q}", body)
        if code == 200:
            r = self.aio.ingest(name, body, params={"from": str(ts), "until": str(ts + 10), "format": "folded",
                                                          "sampleRate": "100"})
            self.assertEqual(200, r.status, r.describe())
            type(self).pushed_total += sum(int(l.rsplit(" ", 1)[1]) for l in body.decode().splitlines())
            type(self).pushes += 1
        return code

    def aio_json(self, method, req):
        r = self.aio.call(f"{h.QUERIER}/{method}", req, codec="json")
        return r.json

    def answers(self, base):
        """What the querier at base (or the all-in-one for base=None) answers."""
        ask = (lambda m, r: self.aio_json(m, r)) if base is None else \
              (lambda m, r: self.cluster.connect_json(base, m, r))
        t0, t1 = str(self.t0), str(self.t1)
        types = ask("ProfileTypes", {"start": t0, "end": t1})
        out = {"types": sorted(t["ID"] for t in types.get("profileTypes", [])),
               "svc": ask("LabelValues", {"name": "svc", "start": t0, "end": t1}).get("names", [])}
        # folded stacks to /ingest with name app.cpu: Pyroscope's process_cpu type
        pt = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        for sel in ("{}", '{svc="s1"}'):
            out[f"flame {sel}"] = ask("SelectMergeStacktraces", {"profileTypeID": pt, "labelSelector": sel, "start": t0, "end": t1,
                                                                "maxNodes": 64})
            series = ask("SelectSeries", {"profileTypeID": pt, "labelSelector": sel, "start": t0, "end": t1, "step": 600,
                                          "groupBy": ["svc"]})
            out[f"series {sel}"] = sorted(
                (tuple(sorted((l["name"], l["value"]) for l in s.get("labels", []))),
                 sum(float(p.get("value", 0)) for p in s.get("points", [])))
                for s in series.get("series", []))
        return out

    def settled(self, base=QUERIER):
        """Waits until every zone's group got and acknowledged every stream entry
        (asked from the client pod through the Redis Service name), then returns
        the answers of the querier at base."""
        h.wait_for(self._groups_drained, timeout=60, what="streams drained in both zones")
        return self.answers(base)

    def _groups_drained(self):
        script = (f"import socket, sys; sys.path.insert(0, {h.HERE!r})\n"
                  "import distributed_harness as dh\n"
                  "class R(dh.Redis):\n"
                  "    def __init__(self): pass\n"
                  "    def cmd(self, *args):\n"
                  "        out = b'*%d\\r\\n' % len(args)\n"
                  "        for a in args:\n"
                  "            a = a if isinstance(a, bytes) else str(a).encode()\n"
                  "            out += b'$%d\\r\\n%s\\r\\n' % (len(a), a)\n"
                  f"        with socket.create_connection(('ember-redis.{NS}.svc.cluster.local', 6379), timeout=5) as s:\n"
                  "            s.sendall(out)\n"
                  "            return dh._resp(s.makefile('rb'))\n"
                  "r = R()\n"
                  "print(bool(r.cmd('KEYS', 'ember:ingest:*')) and dh.groups_drained(r, ['ingesters.a', 'ingesters.b']))\n")
        import subprocess
        out = subprocess.run(["ip", "netns", "exec", self.cluster.client, "/usr/bin/python3", "-c", script],
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise AssertionError(out.stderr[-1000:])
        return out.stdout.strip() == "True"

    def assertSameAsAllInOne(self, base=QUERIER):
        got = self.settled(base)
        want = self.answers(None)
        self.assertEqual(["process_cpu:cpu:nanoseconds:cpu:nanoseconds"], want["types"])
        self.assertEqual(["s0", "s1", "s2"], sorted(want["svc"]))
        # folded samples at sampleRate=100 are 10 ms of CPU each (nanoseconds)
        self.assertEqual(self.pushed_total * 10_000_000, int(want["flame {}"]["flamegraph"]["total"]),
                         "the all-in-one holds every acknowledged push")
        self.assertEqual(want, got)
        return got

    def querier_gauge(self, pod, name):
        code, data = self.cluster.curl(f"http://{self.cluster.pods[pod].ip}:4040/metrics")
        for line in data.decode(errors="replace").splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
        return -1

    # ---- the scenario (one test: its steps build on each other)
    def test_cluster(self):
        c = self.cluster
        ingesters = sorted(n for n in c.pods if n.startswith("ember-ingester-"))
        self.assertEqual(["ember-ingester-a-0", "ember-ingester-a-1", "ember-ingester-b-0", "ember-ingester-b-1"],
                         ingesters)
        self.assertEqual({"ember-redis-0", "ember-querier-0", "ember-scraper-0"},
                         set(c.pods) - set(ingesters))
        self.assertTrue(all(p.ready for p in c.pods.values()))
        h.wait_for(lambda: self.querier_gauge("ember-querier-0", "ember_querier_complete_zones") == 2,
                   timeout=30, what="querier sees both zones complete")

        # 1. pushes through the ingest Service, queries through the querier Service
        for i in range(60):
            self.assertEqual(200, self.push(i))
        self.assertSameAsAllInOne()

        # 2. SIGKILL an ingester of zone a, keep pushing, restart it on its volume
        victim = "ember-ingester-a-0"
        pvc = os.path.join(c.pvc_root, f"data-{victim}")
        self.assertTrue(os.listdir(pvc), "the ingester wrote to its volume")
        before = {e: os.stat(os.path.join(pvc, e)).st_ino for e in os.listdir(pvc)}
        c.kill(victim, signal.SIGKILL)
        for i in range(60, 100):
            self.assertEqual(200, self.push(i))
        # zone a is incomplete now: the querier answers from zone b
        h.wait_for(lambda: self.querier_gauge("ember-querier-0", "ember_querier_complete_zones") == 1,
                   timeout=30, what="zone a incomplete")
        c.restart(victim)
        c.wait_ready([victim], timeout=60)
        self.assertEqual(before, {e: os.stat(os.path.join(pvc, e)).st_ino for e in before},
                         "restarted on the same volume")
        h.wait_for(lambda: self.querier_gauge("ember-querier-0", "ember_querier_complete_zones") == 2,
                   timeout=30, what="zone a complete again")
        # zone a is first by name: it answers again, with the victim's share from its volume
        self.assertSameAsAllInOne()

        # 3. querier.replicas 1 -> 3
        docs = k.render(files=[VALUES], sets=["querier.replicas=3"], namespace=NS)
        changed = c.apply(docs)
        self.assertEqual([], changed, "only the querier's replica count changed")
        queriers = sorted(n for n in c.pods if n.startswith("ember-querier-"))
        self.assertEqual(["ember-querier-0", "ember-querier-1", "ember-querier-2"], queriers)
        c.wait_ready(queriers, timeout=60)
        with open(f"/etc/netns/{c.client}/hosts") as f:
            hosts = f.read()
        self.assertEqual(3, sum(1 for l in hosts.splitlines()
                                if l.endswith(f"\tember-querier.{NS}.svc.cluster.local")))
        for q in queriers:
            h.wait_for(lambda: self.querier_gauge(q, "ember_querier_complete_zones") == 2, timeout=30,
                       what=f"{q} sees both zones")
            self.assertSameAsAllInOne(f"http://{c.pods[q].ip}:4040")
        for i in range(100, 120):
            self.assertEqual(200, self.push(i))
        self.assertSameAsAllInOne()
        self.assertEqual(120, self.pushes)


if __name__ == "__main__":
    unittest.main()
