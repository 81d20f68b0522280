"""ember --agent and HotSpot (OpenJDK 17): JIT frames named from the perf map
the agent asks the running JVM for (the attach mechanism, as `jcmd PID
Compiler.perfmap` does), with and without -XX:+PreserveFramePointer.

Oracle: agentprogs/java/Split.java, whose main() calls alpha() and beta()
with a 3:1 split of loop iterations and measures its own split with the
thread's CPU time around each call (printed at exit). Without frame pointers
a compiled leaf's callers are lost (its frame keeps no rbp chain), so only
the leaves are judged; with them the stack runs down through the
interpreter's frames (main, not yet compiled: `Interpreter`) to the
launcher's JavaMain. Needs root, a kernel with BTF, and a JDK.
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness as h
from test_agent import Run, settled_nodes, wait_two_drains

INTERVAL_S = 2
RATE_HZ = 997
PERIOD_NS = 1_000_000_000 // RATE_HZ
SECONDS = 8
PROGS = os.path.join(h.HERE, "agentprogs")
JAVA, JAVAC = shutil.which("java"), shutil.which("javac")


def method(frame):
    """'alpha' for a HotSpot perf map name such as 'long Split.alpha(long)'."""
    m = re.search(r"\bSplit\.(\w+)\(", frame)
    return m.group(1) if m else None


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
@unittest.skipUnless(JAVA and JAVAC, "no JDK here")
class AgentJavaTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ember-agent-java-")
        subprocess.run([JAVAC, "-d", cls.tmp, os.path.join(PROGS, "java", "Split.java")],
                       check=True)
        cls.srv = h.Ember(args=["--agent", f"--agent.interval={INTERVAL_S}s",
                                f"--agent.sample-rate={RATE_HZ}"])
        cls.srv.start()
        variants = {"plain": [], "fp": ["-XX:+PreserveFramePointer"]}
        cls.runs = {k: Run([JAVA, *flags, "-cp", cls.tmp, "Split", str(SECONDS)],
                           stdin=subprocess.PIPE)
                    for k, flags in variants.items()}
        cls.split_lines = {k: r.proc.stdout.readline().decode() for k, r in cls.runs.items()}
        # alive until the agent has drained their samples: names are read
        # from live processes (the JVM's perf map, code objects)
        wait_two_drains(cls.srv, INTERVAL_S)
        for r in cls.runs.values():
            r.proc.stdin.close()
            r.finish(timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        for r in cls.runs.values():
            for name in (f"perf-{r.pid}.map", f".attach_pid{r.pid}"):
                try:
                    os.unlink(os.path.join("/tmp", name))
                except OSError:
                    pass


    def nodes(self, key):
        return settled_nodes(self.srv, self.runs[key], f"the {key} JVM's profile")

    def assert_split(self, key):
        """The alpha share of the named leaves against the program's own
        measure; returns the leaf nodes and the share of samples they hold."""
        m = re.match(r"split ([\d.]+) ([\d.]+)", self.split_lines[key])
        self.assertTrue(m, f"no split line from the program: {self.split_lines[key]!r}")
        want = float(m.group(1)) / (float(m.group(1)) + float(m.group(2)))
        nodes = self.nodes(key)
        leaves = [n for n in nodes if method(n["name"]) in ("alpha", "beta") and n["self"]]
        a = sum(n["self"] for n in leaves if method(n["name"]) == "alpha")
        b = sum(n["self"] for n in leaves if method(n["name"]) == "beta")
        top = sorted((n["self"], n["name"]) for n in nodes if n["self"])[-8:]
        a_n, b_n = round(a / PERIOD_NS), round(b / PERIOD_NS)
        self.assertGreater(a_n + b_n, 100, f"{key}: too few named samples; top {top}")
        share = a_n / (a_n + b_n)
        self.assertLess(abs(share - want) / want, 0.15,
                        f"{key}: alpha share {share:.3f}, the program measured {want:.3f}")
        self.assertIsNone(h.split_mismatch(a_n, a_n + b_n, want))
        total = sum(n["self"] for n in nodes)
        print(f"{key}: alpha share {share:.3f} (program {want:.3f}), "
              f"named leaves {(a + b) / total:.2f} of the samples")
        return leaves, (a + b) / total

    def test_without_frame_pointers_leaves_are_named(self):
        _, named = self.assert_split("plain")
        self.assertGreater(named, 0.5)

    def test_with_frame_pointers_full_stacks(self):
        leaves, _ = self.assert_split("fp")
        full = sum(n["self"] for n in leaves
                   if "JavaMain" in n["path"] and "Interpreter" in n["path"])
        self.assertGreaterEqual(full, 0.8 * sum(n["self"] for n in leaves),
                                f"stacks not down to JavaMain: {[n['path'] for n in leaves][:3]}")

    def test_requests_counted_and_trigger_removed(self):
        m = self.srv.metrics()
        ok = m.get(("ember_agent_jvm_perfmap_requests_total", frozenset({("result", "ok")})), 0)
        self.assertGreaterEqual(ok, 2)
        for r in self.runs.values():
            self.assertFalse(os.path.exists(f"/tmp/.attach_pid{r.pid}"))


if __name__ == "__main__":
    unittest.main()
