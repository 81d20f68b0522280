"""ember --agent and Node (V8) run with --perf-basic-prof: JIT frames named
from V8's perf map (/tmp/perf-PID.map), walked by frame pointer (V8 keeps
rbp in its generated code).

Oracle: agentprogs/node_split.js, whose main() calls alpha() and beta() with
a 3:1 split of loop iterations and measures its own split with
process.cpuUsage around each call (printed at exit). Functions V8 still
interprets show as Builtins_InterpreterEntryTrampoline frames (the perf map
names compiled code only; --interpreted-frames-native-stack gives them
names too), so the split is judged on the samples that name alpha or beta,
and those must be most of spin's. Needs root and a kernel with BTF.
"""
import os
import re
import shutil
import tempfile
import unittest

import harness as h
from test_agent import Run, settled_nodes, wait_two_drains

INTERVAL_S = 2
RATE_HZ = 997
PERIOD_NS = 1_000_000_000 // RATE_HZ
SECONDS = 6
PROGS = os.path.join(h.HERE, "agentprogs")
NODE = shutil.which("node")


def js_name(frame):
    """'alpha' for a V8 perf map name such as 'JS:*alpha /path/x.js:18:15'."""
    m = re.match(r"^(?:JS|LazyCompile|Function):[*^~]?(\w*) ", frame)
    return m.group(1) if m else None


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
@unittest.skipUnless(NODE, "node is not installed")
class AgentNodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = h.Ember(args=["--agent", f"--agent.interval={INTERVAL_S}s",
                                f"--agent.sample-rate={RATE_HZ}"])
        cls.srv.start()
        cls.tmp = tempfile.mkdtemp(prefix="ember-agent-node-")
        # cwd: V8 writes its isolate log there as well
        # --no-turbo-inlining: whether TurboFan inlines alpha/beta into their caller (then no
        # frame of theirs exists to name) depends on when it tiers up, i.e. on the machine's
        # load; the test is about naming JIT frames and their split, so it keeps them apart
        # (CI once saw spin's caller inlined away: alpha 0, beta 0)
        cls.node_run = Run([NODE, "--perf-basic-prof", "--no-turbo-inlining",
                            os.path.join(PROGS, "node_split.js"), str(SECONDS)], cwd=cls.tmp)
        cls.split_line = cls.node_run.proc.stdout.readline().decode()
        cls.node_run.finish(timeout=60)
        wait_two_drains(cls.srv, INTERVAL_S)

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        try:
            os.unlink(f"/tmp/perf-{cls.node_run.pid}.map")
        except OSError:
            pass


    def nodes(self):
        return settled_nodes(self.srv, self.node_run, "the Node profile")

    def test_split_and_paths(self):
        m = re.match(r"split ([\d.]+) ([\d.]+)", self.split_line)
        self.assertTrue(m, f"no split line from the program: {self.split_line!r}")
        want = float(m.group(1)) / (float(m.group(1)) + float(m.group(2)))
        nodes = self.nodes()
        spin = [n for n in nodes if js_name(n["name"]) == "spin"]
        self.assertTrue(spin, f"no JIT frame named spin: {[n['name'] for n in nodes][:30]}")
        by_caller = {"alpha": 0, "beta": 0}
        under_main = 0
        for n in spin:
            callers = [js_name(f) for f in n["path"]]
            if callers and callers[-1] in by_caller:
                by_caller[callers[-1]] += n["total"]
                under_main += n["total"] if "main" in callers else 0
        named = by_caller["alpha"] + by_caller["beta"]
        # main itself may still be interpreted for a while (a trampoline frame)
        self.assertGreaterEqual(under_main, 0.8 * named, "alpha/beta mostly not below main")
        total = sum(n["total"] for n in spin)
        self.assertGreaterEqual(named, 0.5 * total,
                                f"spin mostly without a named caller: {by_caller}, {total}")
        a_n, b_n = round(by_caller["alpha"] / PERIOD_NS), round(by_caller["beta"] / PERIOD_NS)
        self.assertGreater(a_n + b_n, 100, "too few samples to judge the split")
        share = a_n / (a_n + b_n)
        self.assertLess(abs(share - want) / want, 0.15,
                        f"alpha share {share:.3f}, the program measured {want:.3f}")
        self.assertIsNone(h.split_mismatch(a_n, a_n + b_n, want))
        print(f"node: alpha share {share:.3f} (program {want:.3f}), named {named / total:.2f}")


    def test_runtime_label(self):
        """The Node process's profile carries __runtime__="node" (as Python's
        and Java's carry theirs): the same samples found through it."""
        self.nodes()  # settled
        sel = f'{{pid="{self.node_run.pid}", __runtime__="node"}}'
        fg = self.srv.flamegraph("process_cpu:cpu:nanoseconds:cpu:nanoseconds", sel,
                                 self.node_run.started_ms - 60_000, h.now_ms() + 60_000)
        all_fg = self.srv.flamegraph("process_cpu:cpu:nanoseconds:cpu:nanoseconds",
                                     f'{{pid="{self.node_run.pid}"}}',
                                     self.node_run.started_ms - 60_000, h.now_ms() + 60_000)
        self.assertGreater(all_fg.total, 0)
        self.assertEqual(fg.total, all_fg.total)


if __name__ == "__main__":
    unittest.main()
