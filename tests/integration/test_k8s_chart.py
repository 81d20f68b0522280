"""The Helm chart deploy/k8s/ember: `helm lint --strict` and `helm template` of every
preset in deploy/k8s/ember/ci/ (all-in-one; microservices with 1, 2 and 3 zones; in-chart
Redis, an external Redis URL or one from a Secret; scraper and agent on and off), every
rendered object validated (strictly: unknown fields fail) against the Kubernetes 1.29 and
1.33 schemas with kubernetes-validate, and the chart's promises checked on what it renders:
every flag a container passes is one its binary's --help lists, the same Redis URL and
partition count everywhere, per-zone StatefulSets with their headless Services, probes,
security contexts, RBAC, and the values schema refusing bad values.
"""
import os
import re
import unittest

import k8s_harness as k

PRESETS = ("all-in-one", "all-in-one-scraper-agent", "microservices-1zone",
           "microservices-2zones", "microservices-3zones-external-redis",
           "microservices-redis-secret", "microservices-s3-redis-cluster")
NS = "ember-test"
BINARIES = ("ember", "ember-ingester", "ember-querier", "ember-scraper", "ember-agent")
# the flag each binary takes for the number of stream partitions: one name in all
PARTITIONS_FLAG = {b: "--ingest.partitions" for b in ("ember", "ember-ingester", "ember-scraper",
                                                      "ember-agent")}


def values_of(name):
    import yaml
    with open(k.preset(name)) as f:
        return yaml.safe_load(f) or {}


def ember_containers(docs):
    """(workload, container, binary name) of every container running an ember binary."""
    out = []
    for w in k.workloads(docs):
        for c in w["spec"]["template"]["spec"]["containers"]:
            b = os.path.basename(c["command"][0])
            if b in BINARIES:
                out.append((w, c, b))
    return out


def env_value(c, name):
    for e in c.get("env", []):
        if e["name"] == name:
            return e.get("value", e.get("valueFrom"))
    return None


def arg(c, flag):
    vals = [a.split("=", 1)[1] for a in c.get("args", []) if a.split("=", 1)[0] == flag]
    return vals[-1] if vals else None


class ChartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        k.ensure_tools()
        cls.rendered = {p: k.render([p], namespace=NS) for p in PRESETS}

    def test_lint_strict(self):
        for p in PRESETS:
            with self.subTest(preset=p):
                r = k.helm("lint", "--strict", k.CHART, "-f", k.preset(p), check=False)
                self.assertEqual(0, r.returncode, r.stdout + r.stderr)
                self.assertIn("1 chart(s) linted, 0 chart(s) failed", r.stdout)

    def test_validates_against_kubernetes_schemas(self):
        for p, docs in self.rendered.items():
            results = k.kube_validate(docs)
            self.assertEqual(len(docs) * len(k.KUBE_VERSIONS), len(results))
            for version, what, status, msg in results:
                with self.subTest(preset=p, version=version, obj=what):
                    if what.startswith("ServiceMonitor/"):
                        # a CRD: kubernetes-validate ships no schema for it
                        self.assertIn(status, ("ok", "no-schema"), msg)
                    else:
                        self.assertEqual("ok", status, msg)

    def test_validator_rejects_a_typo(self):
        # the oracle itself: an unknown field and a wrong type must fail
        docs = self.rendered["microservices-1zone"]
        svc = dict(k.by_name(docs, "Service", "ember-querier"))
        svc["spec"] = dict(svc["spec"], portz=1)
        dep = k.by_name(docs, "Deployment", "ember-querier")
        bad = {**dep, "spec": {**dep["spec"], "replicas": "two"}}
        for version, what, status, msg in k.kube_validate([svc, bad]):
            self.assertEqual("invalid", status, f"{version} {what}: {msg}")

    def test_flags_are_ones_the_binaries_take(self):
        for p, docs in self.rendered.items():
            for w, c, b in ember_containers(docs):
                flags = k.binary_flags(b)
                for a in c.get("args", []):
                    with self.subTest(preset=p, container=c["name"], arg=a):
                        self.assertTrue(a.startswith("--"), a)
                        self.assertIn(k.flag_name(a), flags, f"{b} does not take {a}")
                        self.assertNotIn(" ", a.split("=", 1)[0])
                for e in c.get("env", []):
                    if e["name"].startswith("EMBER_"):
                        want = e["name"][6:].lower().replace("_", ".")
                        self.assertTrue(any(f[2:].replace("-", ".") == want for f in flags),
                                        f"{b}: {e['name']} names no flag")

    def test_same_redis_url_and_partitions_everywhere(self):
        for p, docs in self.rendered.items():
            v = values_of(p)
            micro = v.get("mode") == "microservices"
            uses_redis = micro or v.get("agent", {}).get("enabled")
            urls, parts = set(), set()
            for w, c, b in ember_containers(docs):
                urls.add(str(env_value(c, "EMBER_REDIS_URL")))
                if b in PARTITIONS_FLAG and uses_redis:
                    parts.add(arg(c, PARTITIONS_FLAG[b]))
            with self.subTest(preset=p):
                self.assertEqual(1, len(urls), urls)
                url = urls.pop()
                redis_sts = [d for d in k.kinds(docs, "StatefulSet")
                             if d["metadata"]["name"].endswith("-redis")]
                if not uses_redis:
                    self.assertEqual("None", url)
                    self.assertEqual([], redis_sts)
                    continue
                want_parts = str(v.get("ingest", {}).get("partitions", 16))
                self.assertEqual({want_parts}, parts)
                r = v.get("redis", {})
                if r.get("enabled", True):
                    self.assertEqual(f"redis://ember-redis.{NS}.svc.cluster.local:6379", url)
                    self.assertEqual(1, len(redis_sts))
                    a = redis_sts[0]["spec"]["template"]["spec"]["containers"][0]["args"]
                    pairs = dict(zip(a[::2], a[1::2]))
                    self.assertEqual("yes", pairs["--appendonly"])
                    self.assertEqual(r.get("appendfsync", "everysec"), pairs["--appendfsync"])
                    self.assertEqual("noeviction", pairs["--maxmemory-policy"])
                    self.assertEqual("no", pairs["--rdbcompression"])
                    self.assertEqual("", pairs["--save"])
                    svc = k.by_name(docs, "Service", "ember-redis")
                    self.assertTrue(k.selects(svc["spec"]["selector"],
                                              redis_sts[0]["spec"]["template"]["metadata"]["labels"]))
                elif r.get("url"):
                    self.assertEqual(r["url"], url)
                    self.assertEqual([], redis_sts)
                else:
                    self.assertIn(r["existingSecret"], url)
                    self.assertEqual([], redis_sts)

    def test_ingester_zones(self):
        for p, docs in self.rendered.items():
            v = values_of(p)
            if v.get("mode") != "microservices":
                continue
            zones = v["ingester"]["zones"]
            ing = [d for d in k.kinds(docs, "StatefulSet")
                   if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "ingester"]
            with self.subTest(preset=p):
                self.assertEqual(sorted(f"ember-ingester-{z}" for z in zones),
                                 sorted(d["metadata"]["name"] for d in ing))
                ingest = k.by_name(docs, "Service", "ember-ingest")
                for d in ing:
                    zone = d["metadata"]["name"].rsplit("-", 1)[1]
                    spec = d["spec"]
                    pod = spec["template"]
                    c = pod["spec"]["containers"][0]
                    self.assertEqual(v["ingester"]["replicas"], spec["replicas"])
                    self.assertEqual(zone, arg(c, "--ingester.zone"))
                    self.assertEqual("$(POD_NAME)", arg(c, "--ingester.id"))
                    self.assertEqual("/data", arg(c, "--data.dir"))
                    self.assertEqual(["data"], [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]])
                    self.assertIn({"name": "data", "mountPath": "/data"}, c["volumeMounts"])
                    headless = k.by_name(docs, "Service", spec["serviceName"])
                    self.assertEqual("None", headless["spec"]["clusterIP"])
                    self.assertTrue(k.selects(headless["spec"]["selector"], pod["metadata"]["labels"]))
                    self.assertTrue(k.selects(spec["selector"]["matchLabels"], pod["metadata"]["labels"]))
                    self.assertEqual(
                        f"http://$(POD_NAME).{spec['serviceName']}.{NS}.svc.cluster.local:4040",
                        arg(c, "--ingester.advertise-url"))
                    self.assertTrue(k.selects(ingest["spec"]["selector"], pod["metadata"]["labels"]))
                    # other zones' headless Services do not select this zone's pods
                    for z in zones:
                        if z != zone:
                            other = k.by_name(docs, "Service", f"ember-ingester-{z}-headless")
                            self.assertFalse(k.selects(other["spec"]["selector"], pod["metadata"]["labels"]))
                    aff = pod["spec"].get("affinity", {}).get("podAntiAffinity", {})
                    self.assertTrue(aff, "ingesters carry pod anti-affinity")
                    if len(zones) > 1 and v["ingester"].get("antiAffinity") == "hard":
                        req = aff["requiredDuringSchedulingIgnoredDuringExecution"][0]
                        exprs = {e["key"]: e["values"] for e in req["labelSelector"]["matchExpressions"]}
                        self.assertEqual(sorted(set(zones) - {zone}), sorted(exprs["ember.io/zone"]))
                    pdb = k.by_name(docs, "PodDisruptionBudget", f"ember-ingester-{zone}")
                    self.assertTrue(k.selects(pdb["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"]))
                q = k.by_name(docs, "Service", "ember-querier")
                qd = k.by_name(docs, "Deployment", "ember-querier")
                self.assertTrue(k.selects(q["spec"]["selector"], qd["spec"]["template"]["metadata"]["labels"]))
                for d in ing:
                    self.assertFalse(k.selects(q["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"]))
                hpa = k.kinds(docs, "HorizontalPodAutoscaler")
                autoscaled = v.get("querier", {}).get("autoscaling", {}).get("enabled", False)
                self.assertEqual(autoscaled, bool(hpa))
                self.assertEqual(autoscaled, "replicas" not in qd["spec"])

    def test_probes_and_security(self):
        for p, docs in self.rendered.items():
            for w, c, b in ember_containers(docs):
                with self.subTest(preset=p, workload=w["metadata"]["name"]):
                    ports = {pt["name"] for pt in c["ports"]}
                    for probe, path in (("readinessProbe", "/ready"), ("livenessProbe", "/live")):
                        g = c[probe]["httpGet"]
                        self.assertEqual(path, g["path"])
                        self.assertIn(g["port"], ports)
                    sc = c["securityContext"]
                    self.assertTrue(sc["readOnlyRootFilesystem"])
                    pod = w["spec"]["template"]["spec"]
                    if b == "ember-agent":
                        self.assertTrue(pod["hostPID"])
                        mounts = {m["mountPath"] for m in c["volumeMounts"]}
                        self.assertTrue({"/sys/kernel/debug", "/sys/fs/cgroup", "/sys/fs/bpf"} <= mounts)
                        self.assertEqual({"fieldRef": {"fieldPath": "spec.nodeName"}}, env_value(c, "NODE_NAME"))
                        self.assertIn("--node=$(NODE_NAME)", c["args"])
                        if values_of(p)["agent"].get("privileged", True):
                            self.assertTrue(sc["privileged"])
                        else:
                            self.assertIn("BPF", sc["capabilities"]["add"])
                            self.assertIn("PERFMON", sc["capabilities"]["add"])
                    else:
                        self.assertFalse(sc["privileged"])
                        self.assertFalse(sc["allowPrivilegeEscalation"])
                        self.assertEqual(["ALL"], sc["capabilities"]["drop"])
                        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
                        self.assertIn("resources", c)

    def test_scraper_config_and_rbac(self):
        for p, docs in self.rendered.items():
            v = values_of(p)
            scraper = v.get("scraper", {}).get("enabled", False)
            agent = v.get("agent", {}).get("enabled", False)
            with self.subTest(preset=p):
                self.assertEqual(scraper or agent, bool(k.kinds(docs, "ClusterRole")))
                if not scraper:
                    self.assertEqual([], [d for d in k.kinds(docs, "ConfigMap")
                                          if d["metadata"]["name"] == "ember-scraper"])
                    continue
                role = k.kinds(docs, "ClusterRole")[0]
                rule = [r for r in role["rules"] if "pods" in r["resources"]][0]
                self.assertEqual({"get", "list", "watch"}, set(rule["verbs"]))
                binding = k.kinds(docs, "ClusterRoleBinding")[0]
                self.assertEqual(role["metadata"]["name"], binding["roleRef"]["name"])
                sa = binding["subjects"][0]
                self.assertEqual(NS, sa["namespace"])
                self.assertTrue(k.by_name(docs, "ServiceAccount", sa["name"]))
                cm = k.by_name(docs, "ConfigMap", "ember-scraper")
                import yaml
                self.assertIn("scrape_configs", yaml.safe_load(cm["data"]["scrape.yaml"]))
                for w, c, b in ember_containers(docs):
                    if b in ("ember-scraper", "ember"):
                        self.assertEqual(sa["name"], w["spec"]["template"]["spec"]["serviceAccountName"])
                        mnt = [m for m in c["volumeMounts"] if m["name"] == "scrape-config"][0]
                        flag = "--config.file" if b == "ember-scraper" else "--scrape.config-file"
                        self.assertEqual(mnt["mountPath"] + "/scrape.yaml", arg(c, flag))
                        vol = [x for x in w["spec"]["template"]["spec"]["volumes"] if x["name"] == "scrape-config"][0]
                        self.assertEqual("ember-scraper", vol["configMap"]["name"])

    def test_scrape_config_change_rolls_the_scrapers(self):
        def checksums(extra):
            docs = k.render(["microservices-2zones"], sets=extra, namespace=NS)
            return {w["metadata"]["name"]: w["spec"]["template"]["metadata"].get("annotations", {}).get("checksum/scrape-config")
                    for w in k.workloads(docs)}
        a = checksums([])
        b = checksums(["scraper.config.scrape_configs[0].scrape_interval=30s"])
        self.assertIsNotNone(a["ember-scraper"])
        self.assertNotEqual(a["ember-scraper"], b["ember-scraper"])
        # the other pods do not roll
        for name in a:
            if name != "ember-scraper":
                self.assertEqual(a[name], b[name], name)

    def test_values_pass_through(self):
        docs = k.render(["microservices-2zones"], namespace=NS,
                        sets=["retention=7d", "limits.maxSamples=1234", "multitenancy.enabled=true",
                              "limits.rejectOlderThan=2h", "ingest.partitions=5"])
        for w, c, b in ember_containers(docs):
            if b in ("ember", "ember-ingester"):
                self.assertEqual("7d", arg(c, "--retention"))
                self.assertEqual("1234", arg(c, "--ingest.max-samples"))
                self.assertEqual("2h", arg(c, "--ingest.reject-older-than"))
            if b in ("ember", "ember-ingester", "ember-querier"):
                self.assertEqual("true", arg(c, "--auth.multitenancy-enabled"))
            if b in PARTITIONS_FLAG:
                self.assertEqual("5", arg(c, PARTITIONS_FLAG[b]))

    def test_object_storage_and_redis_cluster(self):
        docs = self.rendered["microservices-s3-redis-cluster"]
        stores = [(c, b) for _, c, b in ember_containers(docs) if b == "ember-ingester"]
        self.assertEqual(2, len(stores))  # one StatefulSet per zone
        # the querier reads the bucket below the ingesters' marks: the same bucket flags
        readers = stores + [(c, b) for _, c, b in ember_containers(docs) if b == "ember-querier"]
        for c, b in readers:
            self.assertEqual("s3", arg(c, "--storage.backend"))
            self.assertEqual("ember-blocks", arg(c, "--storage.s3.bucket-name"))
            self.assertEqual("https://s3.eu-west-1.amazonaws.com", arg(c, "--storage.s3.endpoint"))
            self.assertEqual("prod", arg(c, "--storage.prefix"))
            for var, key in (("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
                             ("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY")):
                self.assertEqual({"secretKeyRef": {"name": "ember-s3", "key": key}},
                                 env_value(c, var))
        for _, c, b in ember_containers(docs):
            self.assertEqual("true", env_value(c, "EMBER_REDIS_CLUSTER"), b)
            if b not in ("ember-ingester", "ember-querier"):
                self.assertIsNone(env_value(c, "AWS_SECRET_ACCESS_KEY"), b)
        (q,) = [c for _, c, b in ember_containers(docs) if b == "ember-querier"]
        self.assertEqual("10GiB", arg(q, "--storage.cache-size"))
        self.assertIn({"name": "cache", "mountPath": "/cache"}, q["volumeMounts"])
        for c, _ in stores:
            self.assertEqual("6h", arg(c, "--storage.local-retention"))
        for s in ("storage.backend=s3", "storage.backend=filesystem", "storage.backend=gcs"):
            r = k.helm("template", "x", k.CHART, "--set", s, check=False)
            self.assertNotEqual(0, r.returncode, f"--set {s} rendered")
        docs = k.render(["all-in-one"], namespace=NS, sets=[
            "storage.backend=filesystem", "storage.filesystem.dir=/blocks"])
        (_, c, _), = ember_containers(docs)
        self.assertEqual("/blocks", arg(c, "--storage.filesystem.dir"))

    def test_schema_refuses_bad_values(self):
        bad = ["mode=cluster", "ingester.zones={A_1}", "ingester.replicas=0", "redis.appendfsync=sometimes",
               "retention=thirty", "ingest.partitions=0", "ingesterr.replicas=2"]
        for s in bad:
            with self.subTest(set=s):
                r = k.helm("template", "x", k.CHART, "--set", s, check=False)
                self.assertNotEqual(0, r.returncode, f"--set {s} rendered:\n{r.stdout[:300]}")
        r = k.helm("template", "x", k.CHART, "--set", "mode=microservices,redis.enabled=false", check=False)
        self.assertNotEqual(0, r.returncode)
        self.assertIn("redis.url", r.stderr)

    def test_notes_print_both_urls(self):
        # helm renders NOTES.txt only on install, which needs a cluster: render a copy
        # of it as an ordinary template (--debug prints it although it is not YAML)
        import shutil
        chart = os.path.join(k.mkdtemp("ember-chart-"), "ember")
        try:
            shutil.copytree(k.CHART, chart)
            shutil.copy(os.path.join(chart, "templates", "NOTES.txt"), os.path.join(chart, "templates", "notes-copy.txt"))
            for p in ("all-in-one", "microservices-2zones", "microservices-3zones-external-redis"):
                r = k.helm("template", "ember", chart, "-n", NS, "--debug", "-f", k.preset(p),
                           "--show-only", "templates/notes-copy.txt", check=False)
                self.assertIn("# Source: ember/templates/notes-copy.txt", r.stdout, r.stderr[-500:])
                docs = self.rendered[p]
                for svc in ("ember-querier", "ember-ingest"):
                    k.by_name(docs, "Service", svc)
                    self.assertIn(f"http://{svc}.{NS}.svc.cluster.local:4040", r.stdout)
        finally:
            k.rmtree(os.path.dirname(chart))

    def test_readme_lists_every_value(self):
        import yaml
        with open(os.path.join(k.CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        with open(os.path.join(k.CHART, "README.md")) as f:
            rows = [l for l in f if l.startswith("| `")]
        documented = set()
        for row in rows:
            toks = re.findall(r"`([^`]+)`", row.split("|")[1])
            first = toks[0]
            for t in toks:
                documented.add(first.rsplit(".", 1)[0] + t if t.startswith(".") else t)

        def leaves(d, prefix=""):
            for key, v in d.items():
                path = prefix + key
                if isinstance(v, dict) and v:
                    yield from leaves(v, path + ".")
                else:
                    yield path

        for path in leaves(values):
            parts = path.split(".")
            with self.subTest(value=path):
                self.assertTrue(any(".".join(parts[:i]) in documented for i in range(1, len(parts) + 1)),
                                f"{path} is not in the chart README's value table")

    def test_names_are_dns_labels(self):
        for p, docs in self.rendered.items():
            for d in docs:
                n = d["metadata"]["name"]
                self.assertRegex(n, r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
                self.assertLessEqual(len(n), 63)
                if d["kind"] == "Service":
                    self.assertLessEqual(len(n), 63)
                for w in [d] if d["kind"] in ("StatefulSet", "Deployment", "DaemonSet") else []:
                    for c in w["spec"]["template"]["spec"]["containers"]:
                        for pt in c.get("ports", []):
                            self.assertLessEqual(len(pt["name"]), 15)


if __name__ == "__main__":
    unittest.main()
