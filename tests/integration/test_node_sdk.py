"""The real Pyroscope Node SDK against ember (reference/real-clients.md §1):
0.6.4 uploads raw gzipped pprof with format=pprof, 0.4.13 uploads multipart
without format=. Both profile a small app calling fib() for ~12 s; ember must
then list their profile types and labels and serve a flame graph with fib."""
import os
import subprocess
import time
import unittest

import harness as h

VERSIONS = ("0.6.4", "0.4.13")
RUN_MS = 12000
FLUSH_MS = 3000
CLIENT = os.path.join(h.HERE, "node", "client.js")
UTF8_ACCEPT = {"Accept": "application/proto; allow-utf8-labelnames=true"}


def has_fib(fg):
    """The Node SDK names functions `<file>:<function>:<line>`, e.g.
    ./node/client.js:fib:17 (its pprof Function.name)."""
    return any(n == "fib" or ":fib:" in n for n in h.flamegraph_names(fg))


def npm_install(version):
    """Installs @pyroscope/nodejs@version under .work/; returns node_modules or
    raises unittest.SkipTest when npm cannot reach the registry."""
    d = os.path.join(h.WORK_DIR, f"node-{version}")
    mods = os.path.join(d, "node_modules")
    pkg = os.path.join(mods, "@pyroscope", "nodejs", "package.json")
    if os.path.exists(pkg):
        return mods
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "package.json"), "w") as f:
        f.write('{"name": "ember-it-node-%s", "private": true}\n' % version.replace(".", ""))
    r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                        f"@pyroscope/nodejs@{version}"], cwd=d, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0 or not os.path.exists(pkg):
        raise unittest.SkipTest(f"npm install @pyroscope/nodejs@{version} failed (no network?): "
                                f"{r.stderr.strip()[-400:]}")
    return mods


class NodeSdkTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        mods = {v: npm_install(v) for v in VERSIONS}
        super().setUpClass()
        cls.t0 = h.now_ms() - 60_000
        cls.apps = {v: f"node-sdk-{v.replace('.', '')}" for v in VERSIONS}
        procs = {}
        for v in VERSIONS:
            env = dict(os.environ, NODE_PATH=mods[v], DEBUG="pyroscope*")
            procs[v] = subprocess.Popen(["node", CLIENT, f"http://127.0.0.1:{cls.srv.port}",
                                         cls.apps[v], str(RUN_MS), str(FLUSH_MS)],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        cls.results = {}
        for v, p in procs.items():
            try:
                out, _ = p.communicate(timeout=RUN_MS / 1000 + 60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            cls.results[v] = (p.returncode, out.decode(errors="replace"))
        cls.t1 = h.now_ms() + 60_000

    def types_of(self, app):
        return {v for ls in self.srv.series_labels([f'{{service_name="{app}"}}'], ["__profile_type__"],
                                                   self.t0, self.t1)
                for k, v in ls if k == "__profile_type__"}

    def wait_types(self, app):
        def ok():
            t = self.types_of(app)
            return t if any(x.startswith("wall:") for x in t) and any(
                x.startswith("memory:") for x in t) else None
        try:
            return h.wait_for(ok, timeout=20, what=f"wall and memory profile types of {app}")
        except AssertionError as e:
            raise AssertionError(f"{e}\nclient output:\n{self.client_log(app)}\n{self.srv.log_tail()}")

    def client_log(self, app):
        v = next(v for v, a in self.apps.items() if a == app)
        return self.results[v][1][-3000:]

    def test_clients_ran(self):
        for v in VERSIONS:
            with self.subTest(version=v):
                rc, out = self.results[v]
                self.assertEqual(rc, 0, f"node client {v} failed:\n{out[-2000:]}")

    def test_profile_types(self):
        for v, app in self.apps.items():
            with self.subTest(version=v):
                types = self.wait_types(app)
                wall = [t for t in types if t.startswith("wall:")]
                mem = [t for t in types if t.startswith("memory:")]
                self.assertTrue(any(t.split(":")[1] == "wall" for t in wall), f"{app}: {types}")
                self.assertTrue(any(t.split(":")[1:3] == ["inuse_space", "bytes"] for t in mem),
                                f"{app}: {types}")
                listed = {pt.ID for pt in self.srv.q("ProfileTypes", start=self.t0, end=self.t1).profile_types}
                self.assertLessEqual(types, listed, "ProfileTypes must list the SDK's types")

    def test_label_names(self):
        for v, app in self.apps.items():
            with self.subTest(version=v):
                self.wait_types(app)
                sel = [f'{{service_name="{app}"}}']
                names = self.srv.q("LabelNames", matchers=sel, start=self.t0, end=self.t1).names
                for want in ("service_name", "region", "env", "handler", "__name__", "__profile_type__"):
                    self.assertIn(want, names, f"LabelNames for {app}")
                self.assertEqual(list(names), sorted(set(names)), "LabelNames sorted, unique")
                self.assertFalse([n for n in names if "." in n],
                                 "dotted names need Accept: allow-utf8-labelnames=true")
                self.assertEqual(self.srv.label_values("region", sel, self.t0, self.t1), ["local"])
                self.assertEqual(self.srv.label_values("handler", sel, self.t0, self.t1), ["fib"])
                if v == "0.6.4":        # 0.6.x adds otel.scope.name & co.
                    r = self.srv.call(f"{h.QUERIER}/LabelNames",
                                      h.pb().types.LabelNamesRequest(matchers=sel, start=self.t0, end=self.t1),
                                      headers=UTF8_ACCEPT)
                    for want in ("otel.scope.name", "process.runtime.name", "region"):
                        self.assertIn(want, r.msg.names, "LabelNames with allow-utf8-labelnames=true")

    def test_flamegraph_has_fib(self):
        for v, app in self.apps.items():
            with self.subTest(version=v):
                types = self.wait_types(app)
                sel = f'{{service_name="{app}"}}'
                for t in sorted(types):
                    if not t.startswith("wall:"):
                        continue
                    fg = self.srv.flamegraph(t, sel, self.t0, self.t1)
                    self.assertGreater(fg.total, 0, f"{app} {t}")
                    self.assertTrue(has_fib(fg), f"{app} {t}: no function fib in {sorted(h.flamegraph_names(fg))}")
                for t in types:
                    if t.startswith("memory:") and ":inuse_space:" in t:
                        self.assertGreater(self.srv.flamegraph(t, sel, self.t0, self.t1).total, 0, t)
                # the sample label handler=fib became a series label
                t = next(t for t in sorted(types) if t.startswith("wall:wall:"))
                fg = self.srv.flamegraph(t, f'{{service_name="{app}", handler="fib"}}', self.t0, self.t1)
                self.assertTrue(has_fib(fg), f"{app} {t} with handler=fib: no function fib")


if __name__ == "__main__":
    unittest.main()
