"""The official Go SDK (github.com/grafana/pyroscope-go v1.5.x, godeltaprof)
pushing live to ember through a recording proxy.

tests/integration/sdk/go is built with the machine's Go from the module proxy
(go.sum pinned; the module cache is Go's own, the binary is cached under the
build dir). It burns CPU in main.emberBusyGo under the tag request=busy,
allocates, contends a mutex and blocks, for a few seconds with 2 s uploads.
Checked against what the SDK sent (each captured upload decoded by `go tool
pprof -raw`): every profile type the SDK sent is in ProfileTypes with the same
total; the top self frame of CPU is main.emberBusyGo; the tag and the env tag
are queryable.
"""
import os
import time
import unittest

import harness as h
import sdk_util as su

SECONDS = 7


def build():
    go = su.newest_go()
    if not go:
        raise unittest.SkipTest("no Go toolchain on this machine")
    out = os.path.join(su.cache_dir("go"), "sdk-go-app")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod")
    su.run([go, "build", "-o", out, "."], cwd=os.path.join(su.SDK_DIR, "go"), env=env,
           timeout=900, what="go build (pyroscope-go)")
    return out


class SdkGoTest(su.SdkProgramCase):
    app = "sdk-go-app"
    what = "the Go SDK program"
    seconds = SECONDS

    @classmethod
    def command(cls):
        return [build()]

    def expected(self):
        exp = su.expected_from_pprof_uploads(self.proxy.ingests())
        return {p: v for (svc, p), v in exp.items() if svc == self.app}

    def test_uploads_captured(self):
        ups = self.proxy.ingests()
        self.assertGreaterEqual(len(ups), 3, "the SDK uploaded")
        self.assertTrue(all(u.status == 200 for u in ups), [u.status for u in ups])

    def test_totals_equal_what_was_sent(self):
        exp = self.expected()
        names = {p.split(":")[0] for p in exp}
        for want in ("process_cpu", "memory", "goroutine", "mutex", "block"):  # pyroscope-go names goroutines "goroutine"
            self.assertIn(want, names, f"the SDK sent no {want} profile: {sorted(exp)}")
        got = su.wait_totals(self.srv, self.app, exp, self.window)
        self.assertEqual(got, exp)
        types = {t.ID for t in self.srv.q("ProfileTypes", start=self.window[0],
                                          end=self.window[1]).profile_types}
        self.assertLessEqual(set(exp), types)

    def test_top_frame_and_tags(self):
        cpu = next(p for p in self.expected() if p.startswith("process_cpu:cpu:"))
        # A goroutine stopped by the runtime's asynchronous preemption (which a
        # busy machine makes frequent: the collector waits for the loop) is
        # sampled in runtime.asyncPreempt, a frame injected at the point where
        # emberBusyGo was running; such a leaf counts for its caller.
        self.assertEqual(su.top_self(self.srv, cpu, self.app, self.window,
                                     skip=("runtime.asyncPreempt",)), "main.emberBusyGo")
        kw = dict(matchers=['{service_name="%s"}' % self.app], start=self.window[0],
                  end=self.window[1])
        self.assertIn("busy", self.srv.label_values("request", **kw))
        self.assertIn("sdk-test", self.srv.label_values("env", **kw))
        sel = '{service_name="%s",request="busy"}' % self.app
        self.assertGreater(self.srv.series_sum(cpu, sel, *self.window), 0)


if __name__ == "__main__":
    unittest.main()
