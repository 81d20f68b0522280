"""The official Rust SDK (the `pyroscope` crate, 2.1.5, with its pprof-rs
backend, from crates.io) pushing live to ember through a recording proxy.

cargo builds sdk/rust (target dir under ~/.cache/ember-sdk, so later runs only
relink); the program burns CPU in ember_busy_rust under the tag request=busy
with 2 s uploads. Checked against what the SDK sent (captured uploads decoded
with the project's protos and `go tool pprof -raw`): ProfileTypes holds the
types sent and their totals are equal, the top self frame of CPU is
ember_busy_rust, the tag and env are queryable.
"""
import os
import shutil
import unittest

import harness as h
import sdk_util as su

SECONDS = 6


def build():
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    if not os.path.exists(cargo):
        raise unittest.SkipTest("cargo is not on this machine")
    target = os.path.join(su.cache_dir("rust"), "target")
    su.run([cargo, "build", "--release", "--locked", "--target-dir", target],
           cwd=os.path.join(su.SDK_DIR, "rust"), timeout=1800, what="cargo build (pyroscope)")
    return os.path.join(target, "release", "ember-sdk-rust")


class SdkRustTest(su.SdkProgramCase):
    app = "sdk-rust-app"
    what = "the Rust SDK program"
    seconds = SECONDS

    @classmethod
    def command(cls):
        return [build()]

    def test_uploads_captured(self):
        self.assertGreaterEqual(len(self.proxy.uploads), 2)
        self.assertTrue(all(u.status == 200 for u in self.proxy.uploads),
                        [(u.path, u.status, u.answer[:200]) for u in self.proxy.uploads])

    def test_totals_equal_what_was_sent(self):
        exp = su.expected_from_uploads(self.proxy, self.app)
        self.assertTrue(any(p.startswith("process_cpu:") for p in exp), exp)
        got = su.wait_totals(self.srv, self.app, exp, self.window)
        self.assertEqual(got, exp)
        types = {t.ID for t in self.srv.q("ProfileTypes", start=self.window[0],
                                          end=self.window[1]).profile_types}
        self.assertLessEqual(set(exp), types)

    def test_top_frame_and_tags(self):
        cpu = next(p for p in su.expected_from_uploads(self.proxy, self.app)
                   if p.startswith("process_cpu:"))
        top = su.top_self(self.srv, cpu, self.app, self.window) or ""
        self.assertIn("ember_busy_rust", top)
        kw = dict(matchers=['{service_name="%s"}' % self.app], start=self.window[0],
                  end=self.window[1])
        self.assertIn("busy", self.srv.label_values("request", **kw))
        self.assertIn("sdk-test", self.srv.label_values("env", **kw))


if __name__ == "__main__":
    unittest.main()
