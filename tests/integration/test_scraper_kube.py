"""kubernetes_sd_configs (role pod) end to end. There is no cluster here: a
small local HTTP server plays the Kubernetes API, serving a PodList for
GET /api/v1/namespaces/<ns>/pods and a watch stream (one JSON event per line,
chunked, as the API server sends) for the same path with ?watch=1. The pods
point at a real goapp on 127.0.0.1, so what ember discovers is also scraped
and stored.

Checked: the list is requested with the configured namespaces, label
selector and bearer token, then watched from the list's resourceVersion;
pods become targets with Prometheus's __meta_kubernetes_pod_* labels, which
relabel_configs turn into service_name and pod; ADDED, MODIFIED and DELETED
events add, change and remove targets; an ERROR (410 Gone) event makes the
scraper list again; the profiles arrive under the relabelled labels.
"""
import copy
import json
import os
import queue
import shutil
import tempfile
import threading
import unittest
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness as h
from test_scraper import GoApp, targets, write_file


def pod(name, port, app="api", rv="1", ns="prod"):
    """A Pod object in the API's JSON shape (the fields discovery reads)."""
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}",
                     "resourceVersion": rv, "labels": {"app": app},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": f"{app}-rs",
                                          "controller": True}]},
        "spec": {"nodeName": "node-1",
                 "containers": [{"name": "app", "image": f"{app}:1",
                                 "ports": [{"name": "pprof", "containerPort": port,
                                            "protocol": "TCP"},
                                           {"name": "http", "containerPort": 1}]}]},
        "status": {"phase": "Running", "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


class FakeKubeAPI:
    """The API server: self.pods is what a list returns; push() sends a watch
    event to every open watch."""

    def __init__(self):
        self.pods = {}
        self.rv = 100
        self.requests = []          # (path, query dict, authorization)
        self.watches = []           # queues of open watch streams
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                with api.lock:
                    api.requests.append((u.path, q, self.headers.get("Authorization")))
                if not u.path.startswith("/api/v1/namespaces/") or not u.path.endswith("/pods"):
                    self.send_error(404)
                    return
                if q.get("watch") in ("1", "true"):
                    self.watch()
                else:
                    self.list(u.path.split("/")[4])

            def list(self, ns):
                with api.lock:
                    items = [p for p in api.pods.values() if p["metadata"]["namespace"] == ns]
                    body = json.dumps({"kind": "PodList", "apiVersion": "v1",
                                       "metadata": {"resourceVersion": str(api.rv)},
                                       "items": items}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def watch(self):
                q = queue.Queue()
                with api.lock:
                    api.watches.append(q)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while True:
                        ev = q.get()
                        if ev is None:
                            break
                        line = json.dumps(ev).encode() + b"\n"
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                finally:
                    with api.lock:
                        if q in api.watches:
                            api.watches.remove(q)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def push(self, kind, obj):
        with self.lock:
            self.rv += 1
            if kind != "ERROR":
                obj = copy.deepcopy(obj)
                obj["metadata"]["resourceVersion"] = str(self.rv)
                if kind == "DELETED":
                    self.pods.pop(obj["metadata"]["name"], None)
                else:
                    self.pods[obj["metadata"]["name"]] = obj
            for q in self.watches:
                q.put({"type": kind, "object": obj})

    def seen(self, watch=None):
        with self.lock:
            return [r for r in self.requests
                    if watch is None or (r[1].get("watch") in ("1", "true")) == watch]

    def stop(self):
        with self.lock:
            for q in self.watches:
                q.put(None)
        self.server.shutdown()
        self.server.server_close()


class ScraperKubernetesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.app = GoApp()
        cls.api = FakeKubeAPI()
        cls.api.pods["api-1"] = pod("api-1", cls.app.port)
        cls.api.pods["other"] = pod("other", cls.app.port, app="web")
        cls.dir = tempfile.mkdtemp(prefix="ember-kube-")
        cls.config = os.path.join(cls.dir, "parca.yaml")
        write_file(cls.config, (
            "scrape_configs:\n"
            "  - job_name: kube\n"
            "    scrape_interval: 1s\n"
            "    profiling_config:\n"
            "      pprof_config:\n"
            "        memory: {enabled: false}\n"
            "        block: {enabled: false}\n"
            "        mutex: {enabled: false}\n"
            "        process_cpu: {enabled: false}\n"
            "    kubernetes_sd_configs:\n"
            "      - role: pod\n"
            f"        api_server: http://127.0.0.1:{cls.api.port}/\n"
            "        bearer_token: s3cret\n"
            "        namespaces: {names: [prod]}\n"
            "        selectors: [{role: pod, label: 'app in (api,web)', field: 'status.phase=Running'}]\n"
            "    relabel_configs:\n"
            "      - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: pprof,\n"
            "         action: keep}\n"
            "      - {source_labels: [__meta_kubernetes_pod_label_app], target_label: service_name}\n"
            "      - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}\n"
            "      - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}\n"))
        cls.srv = h.Ember(args=[f"--scrape.config-file={cls.config}"])
        try:
            cls.srv.start()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "srv", None):
            cls.srv.cleanup()
        cls.api.stop()
        cls.app.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def pods_up(self):
        """{pod label: service_name} of the kube targets that are up."""
        return {t["labels"].get("pod"): t["labels"].get("service_name")
                for t in targets(self.srv)["activeTargets"]
                if t["scrapePool"] == "kube" and t["health"] == "up"}

    def test_01_list_then_watch_with_selectors_and_token(self):
        h.wait_for(lambda: self.api.seen(watch=True), timeout=10, what="a watch request")
        lists = self.api.seen(watch=False)
        path, q, auth = lists[0]
        self.assertEqual(path, "/api/v1/namespaces/prod/pods")
        self.assertEqual(q.get("labelSelector"), "app in (api,web)")
        self.assertEqual(q.get("fieldSelector"), "status.phase=Running")
        self.assertEqual(auth, "Bearer s3cret")
        path, q, auth = self.api.seen(watch=True)[0]
        self.assertEqual(q.get("resourceVersion"), "100")
        self.assertEqual(q.get("allowWatchBookmarks"), "true")
        self.assertEqual(auth, "Bearer s3cret")
        self.assertFalse([r for r in self.api.requests if "/namespaces/dev/" in r[0]])

    def test_02_pods_become_targets_with_meta_labels(self):
        got = h.eventually(self.pods_up, {"api-1": "api", "other": "web"}, timeout=15)
        self.assertEqual(got, {"api-1": "api", "other": "web"})
        t = next(t for t in targets(self.srv)["activeTargets"]
                 if t["labels"].get("pod") == "api-1")
        d = t["discoveredLabels"]
        self.assertEqual(d["__address__"], f"127.0.0.1:{self.app.port}")
        self.assertEqual(d["__meta_kubernetes_namespace"], "prod")
        self.assertEqual(d["__meta_kubernetes_pod_label_app"], "api")
        self.assertEqual(d["__meta_kubernetes_pod_ready"], "true")
        self.assertEqual(d["__meta_kubernetes_pod_controller_kind"], "ReplicaSet")
        self.assertEqual(d["__meta_kubernetes_pod_container_port_number"], str(self.app.port))
        self.assertFalse([k for k in t["labels"] if k.startswith("__meta_")])
        # The other port of the container was dropped by relabeling.
        dropped = targets(self.srv, "dropped")["droppedTargets"]
        self.assertTrue(any(x["discoveredLabels"].get("__address__") == "127.0.0.1:1"
                            for x in dropped))
        # And the profiles are stored under the relabelled labels.
        sel = '{service_name="api",pod="api-1",namespace="prod",job="kube"}'
        pid = "goroutine:goroutine:count:goroutine:count"
        total = h.wait_for(lambda: self.srv.series_sum(pid, sel, h.now_ms() - 60_000,
                                                       h.now_ms() + 1000),
                           timeout=15, what="goroutine profiles of pod api-1")
        self.assertGreater(total, 0)

    def test_03_watch_events_add_change_and_remove_targets(self):
        h.wait_for(lambda: "api-1" in self.pods_up(), timeout=15, what="api-1 up")
        self.api.push("ADDED", pod("api-2", self.app.port))
        self.assertEqual(h.eventually(lambda: self.pods_up().get("api-2"), "api", timeout=10),
                         "api")
        self.api.push("DELETED", self.api.pods["api-1"])
        self.assertEqual(h.eventually(lambda: "api-1" in self.pods_up(), False, timeout=10),
                         False)
        self.api.push("MODIFIED", pod("api-2", self.app.port, app="checkout"))
        self.assertEqual(h.eventually(lambda: self.pods_up().get("api-2"), "checkout",
                                      timeout=10), "checkout")

    def test_04_error_event_relists(self):
        h.wait_for(lambda: self.api.seen(watch=True), timeout=10, what="a watch")
        lists = len(self.api.seen(watch=False))
        # Changed while no watch would tell: only a new list can show it.
        with self.api.lock:
            self.api.pods["late"] = pod("late", self.app.port, app="late")
        self.api.push("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "message": "too old resource version", "reason": "Expired",
                                "code": 410})
        h.wait_for(lambda: len(self.api.seen(watch=False)) > lists, timeout=10,
                   what="a new list after 410")
        self.assertEqual(h.eventually(lambda: self.pods_up().get("late"), "late", timeout=10),
                         "late")


if __name__ == "__main__":
    unittest.main()
