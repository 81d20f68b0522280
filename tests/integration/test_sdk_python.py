"""The official Python SDK (pyroscope-io from PyPI, pyroscope-rs inside)
pushing live to ember through a recording proxy.

The test makes a venv under the build dir (Debian's python3, pip from PyPI,
pinned in sdk/python/requirements.txt; reused when present) and runs
sdk/python/app.py: ember_busy_py burns CPU under tag_wrapper({"request":
"busy"}), and allocates, with 2 s uploads. pyroscope-io 1.4 sends Push
(connect, gzip protobuf) with process_cpu and memory series. Checked against
what the SDK sent (every captured PushRequest decoded with the project's
protos, every pprof by `go tool pprof -raw`): ProfileTypes holds the types
sent, per-type totals are equal, the top self frame of CPU is ember_busy_py,
the tag and env are queryable.
"""
import os
import unittest

import harness as h
import sdk_util as su

SECONDS = 6


def install():
    venv = os.path.join(su.cache_dir("python"), "venv")
    py = os.path.join(venv, "bin", "python")
    req = os.path.join(su.SDK_DIR, "python", "requirements.txt")
    stamp = os.path.join(venv, ".installed")
    with open(req) as f:
        want = f.read()
    if os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == want:
                return py
    if not os.path.exists(py):
        su.run(["/usr/bin/python3", "-m", "venv", venv], what="python3 -m venv")
    su.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", req],
           timeout=900, what="pip install pyroscope-io")
    with open(stamp, "w") as f:
        f.write(want)
    return py


class SdkPythonTest(su.SdkProgramCase):
    app = "sdk-python-app"
    what = "the Python SDK program"
    seconds = SECONDS

    @classmethod
    def command(cls):
        return [install(), os.path.join(su.SDK_DIR, "python", "app.py")]

    def sent(self):
        return su.expected_from_uploads(self.proxy, self.app)

    def test_uploads_captured(self):
        self.assertGreaterEqual(len(self.proxy.uploads), 2)
        self.assertTrue(all(u.status == 200 for u in self.proxy.uploads),
                        [(u.path, u.status) for u in self.proxy.uploads])

    def split(self):
        """(alloc_* of memory, everything else) of what was sent."""
        exp = self.sent()
        alloc = {p: v for p, v in exp.items() if p.startswith("memory:alloc_")}
        return alloc, {p: v for p, v in exp.items() if p not in alloc}

    def test_totals_equal_what_was_sent(self):
        _, exp = self.split()
        self.assertIn("process_cpu:cpu:nanoseconds:cpu:nanoseconds", exp)
        self.assertIn("memory:inuse_space:bytes:space:bytes", exp)
        got = su.wait_totals(self.srv, self.app, exp, self.window)
        self.assertEqual(got, exp)
        types = {t.ID for t in self.srv.q("ProfileTypes", start=self.window[0],
                                          end=self.window[1]).profile_types}
        self.assertLessEqual(set(exp), types)

    def test_alloc_totals_equal_what_was_sent(self):
        """pyroscope-io 1.4 pushes memory alloc_* as per-upload values without
        `__delta__="false"`; Pyroscope v1's server-side delta (§4.5) would
        store deltas of deltas. ember leaves profiles that declare a
        duration (these do) as sent (docs/internals/ingest.md)."""
        exp, _ = self.split()
        self.assertTrue(exp)
        got = su.wait_totals(self.srv, self.app, exp, self.window, timeout=10)
        self.assertEqual(got, exp)

    def test_top_frame_and_tags(self):
        top = su.top_self(self.srv, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", self.app,
                          self.window)
        self.assertIn("ember_busy_py", top or "")
        kw = dict(matchers=['{service_name="%s"}' % self.app], start=self.window[0],
                  end=self.window[1])
        self.assertIn("busy", self.srv.label_values("request", **kw))
        self.assertIn("sdk-test", self.srv.label_values("env", **kw))


if __name__ == "__main__":
    unittest.main()
