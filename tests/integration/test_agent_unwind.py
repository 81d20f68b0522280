"""ember --agent: user stacks of code without frame pointers (.eh_frame unwinding in BPF).

Oracles outside the agent: programs whose call trees and CPU split are known
by construction (agentprogs/unwind_tree.c: four levels of callers above a
3:1 split, the frameless-leaf program of issue 17, libz and libc frames, a
library dlopen'ed after start, PIE and non-PIE, a binary visible only inside
another mount namespace), and `perf record --call-graph dwarf` (perf copies
user stacks and unwinds them after the fact with libdw) on a python3 running
a busy script in the same run. Frame-pointer unwinding fails every one of
these checks: the paths from main are cut where a frame has no frame
pointer. Needs root and a kernel with BTF.
"""
import collections
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import harness as h
from test_agent import Run, flame_nodes, totals_by_name

INTERVAL_S = 2
RATE_HZ = 997  # many samples per CPU-second: the machine may be shared
PERIOD_NS = 1_000_000_000 // RATE_HZ  # what one sample weighs in the CPU type
SECONDS = 6
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PROGS = os.path.join(h.HERE, "agentprogs")
# libz's internal functions are static (not in .dynsym): the agent names them
# "libz.so.1.2.13+0x<offset>" (an unsymbolized frame, issue 31), where perf says
# "[unknown]" without debug symbols.
LIBZ_LEAF = r"deflate|longest_match|crc32|adler32|_tr_|^libz\.so[^+]*\+0x"
UNSYMBOLIZED = re.compile(r"\+0x[0-9a-f]+$")
# A PLT stub: perf synthesizes "<name>@plt" from the relocations, or a bare
# "@plt" when it cannot tell which (IBT's .plt.sec); the agent leaves a stub
# unnamed (object+offset: no symbol covers it). Neither is the function the
# stub jumps to, so a stub leaf is not compared.
PLT_STUB = re.compile(r"@plt$")

PY_BUSY = r"""
import os, sys, time
print("pid", os.getpid(), flush=True)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def words(n):
    d = {}
    for i in range(n):
        k = "w%d" % (i % 977)
        d[k] = d.get(k, 0) + len(k)
    return sorted(d.items())
def floats(n):
    s = 0.0
    for i in range(1, n):
        s += (i ** 0.5) / i
    return s
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    fib(18); words(20000); floats(20000)
"""
# the agent names a Python function module.qualname; the script is busy.py
PY_BUSY_FUNCS = {f"busy.{f}" for f in ("fib", "words", "floats", "<module>")}


def as_perf_sees_python(stack):
    """The agent names the Python frames one eval-loop call ran in that
    call's place (test_agent_python.py); perf sees the one native frame. A
    run of Python frames becomes that frame again (the script's eval calls
    never nest: no Python code is called back from C)."""
    out = []
    for name in stack:
        name = "_PyEval_EvalFrameDefault" if name in PY_BUSY_FUNCS else name
        if not (out and out[-1] == name == "_PyEval_EvalFrameDefault"):
            out.append(name)
    return out


def build(out_dir, name, flags):
    exe = os.path.join(out_dir, name)
    subprocess.run(["cc", *flags, "-fno-ipa-icf", "-fno-inline-functions-called-once",
                    os.path.join(PROGS, "unwind_tree.c"), "-o", exe, "-lz", "-ldl"], check=True)
    return exe


def strip_offset(sym):
    return re.sub(r"\+0x[0-9a-f]+$", "", sym)


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
class AgentUnwindTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ember-agent-unw-")
        nofp = ["-O2", "-g", "-fomit-frame-pointer"]
        cls.pie = build(cls.tmp, "tree_pie", nofp + ["-fPIE", "-pie"])
        cls.nopie = build(cls.tmp, "tree_nopie", nofp + ["-fno-PIE", "-no-pie"])
        cls.leaf = build(cls.tmp, "tree_leaf", ["-O1", "-g", "-fno-omit-frame-pointer"])
        cls.srv = h.Ember(args=["--agent", f"--agent.interval={INTERVAL_S}s",
                                f"--agent.sample-rate={RATE_HZ}"])
        cls.srv.start()
        # All workloads at once: their splits are in each thread's own CPU
        # time, so sharing the CPUs does not change them (on a busy host the
        # ticks land on them at random, hence the high rate: enough samples).
        nice = []
        cls.runs = {
            "pie": Run(nice + [cls.pie, "tree", str(SECONDS)]),
            "nopie": Run(nice + [cls.nopie, "tree", str(SECONDS)]),
            "leaf": Run(nice + [cls.leaf, "leaf", str(SECONDS)]),
            "zlib": Run([cls.pie, "zlib", str(SECONDS)]),
            "qsort": Run([cls.nopie, "qsort", str(SECONDS)]),
            "dlopen": Run([cls.pie, "dlopen", str(SECONDS)]),
            "mntns": cls.start_in_mount_namespace(nice),
        }
        for r in cls.runs.values():
            r.finish(timeout=60)
        target = cls.intervals() + 2
        h.wait_for(lambda: cls.intervals() >= target, timeout=4 * INTERVAL_S + 30,
                   interval=0.2, what="two drains")

    @classmethod
    def start_in_mount_namespace(cls, prefix):
        """The binary exists only on a tmpfs mounted inside a new mount
        namespace: the agent must reach it through /proc/PID/map_files."""
        private = os.path.join(cls.tmp, "private")
        os.makedirs(private, exist_ok=True)
        script = (f"mount -t tmpfs tmpfs {private} && cp {cls.pie} {private}/hidden_tree && "
                  f"exec {private}/hidden_tree tree {SECONDS}")
        return Run(prefix + ["unshare", "-m", "--propagation", "private", "sh", "-c", script])

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def intervals(cls):
        return cls.srv.metrics().get(("ember_agent_intervals_total", frozenset()), 0)

    def nodes_of(self, run):
        seen = []

        def stable():
            fg = self.srv.flamegraph(CPU, f'{{pid="{run.pid}"}}', run.started_ms - 60_000,
                                     h.now_ms() + 60_000)
            nodes = flame_nodes(fg)
            seen.append(sum(n["total"] for n in nodes if not n["path"]))
            done = len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3] and seen[-1] > 0
            return nodes if done else None

        return h.wait_for(stable, timeout=20, interval=0.5, what=f"profile of pid {run.pid}")

    def assert_split_and_paths(self, key, a, b, chain):
        nodes = self.nodes_of(self.runs[key])
        totals = totals_by_name(nodes)
        self.assertGreater(totals.get(b, 0), 0, f"{key}: no {b} in {sorted(totals)[:40]}")
        a_n, b_n = round(totals.get(a, 0) / PERIOD_NS), round(totals[b] / PERIOD_NS)
        stacks = sorted(((n["self"], ";".join(n["path"][1:] + [n["name"]])) for n in nodes
                         if n["self"]), reverse=True)[:12]
        self.assertGreater(a_n + b_n, 100, f"{key}: too few samples to judge the split")
        why = h.split_mismatch(a_n, a_n + b_n, 0.75)
        self.assertIsNone(why, f"{key}: {a} share of {a}+{b} samples: {why}; top stacks {stacks}")
        for n in nodes:
            if n["name"] in (a, b):
                it = iter(n["path"])  # the chain, in order, from the root side
                self.assertTrue(all(c in it for c in chain),
                                f"{key}: {n['name']} not below {chain}: {n['path']}")
        spin = [n for n in nodes if n["name"] == "spin"]
        self.assertTrue(spin, f"{key}: no spin frames")
        good = sum(n["total"] for n in spin if n["path"] and n["path"][-1] in (a, b)
                   and "main" in n["path"])
        self.assertGreaterEqual(good, 0.9 * sum(n["total"] for n in spin),
                                f"{key}: spin not under {a}/{b} and main: "
                                f"{[(n['path'], n['total']) for n in spin][:8]}")

    # -- tests
    def test_tree_pie(self):
        self.assert_split_and_paths("pie", "alpha_phase", "beta_phase",
                                    ["main", "run_tree", "level_one", "level_two"])

    def test_tree_non_pie(self):
        self.assert_split_and_paths("nopie", "alpha_phase", "beta_phase",
                                    ["main", "run_tree", "level_one", "level_two"])

    def test_frameless_leaf_keeps_its_caller(self):
        self.assert_split_and_paths("leaf", "hot", "cold", ["main"])

    def test_other_mount_namespace(self):
        self.assert_split_and_paths("mntns", "alpha_phase", "beta_phase",
                                    ["main", "run_tree", "level_one", "level_two"])

    def assert_library_under(self, key, lib_leaf_re, chain):
        nodes = self.nodes_of(self.runs[key])
        selfs = [n for n in nodes if n["self"] > 0 and re.search(lib_leaf_re, n["name"])]
        total = sum(n["self"] for n in selfs)
        self.assertGreater(total, 0, f"{key}: no leaf matching {lib_leaf_re}: "
                           f"{sorted(totals_by_name(nodes, 'self'))[:40]}")
        good = 0
        for n in selfs:
            it = iter(n["path"])
            if all(c in it for c in chain):
                good += n["self"]
        self.assertGreaterEqual(good, 0.9 * total,
                                f"{key}: library frames not under {chain}: "
                                f"{[(n['name'], n['path'], n['self']) for n in selfs][:8]}")

    def test_libz_frames_run_down_to_main(self):
        self.assert_library_under("zlib", LIBZ_LEAF, ["main", "zlib_work", "compress2"])

    def test_dlopened_library(self):
        self.assert_library_under("dlopen", LIBZ_LEAF, ["main", "zlib_work", "compress2"])

    def test_libc_calls_back_into_the_program(self):
        # qsort (libc, no frame pointers) calls by_value: the comparator's
        # samples sit under qsort's own frames, sort_work and main.
        self.assert_library_under("qsort", r"^by_value$", ["main", "sort_work"])
        nodes = self.nodes_of(self.runs["qsort"])
        paths = [n["path"] for n in nodes if n["name"] == "by_value"]
        self.assertTrue(any(any("sort" in f and f != "sort_work" for f in p) for p in paths),
                        f"no libc sort frame between sort_work and by_value: {paths[:5]}")

    def test_unwind_metrics(self):
        m = self.srv.metrics()
        ends = {dict(k[1]).get("result"): v for k, v in m.items()
                if k[0] == "ember_agent_unwind_total"}
        for reason in ("end", "depth", "read_error", "unsupported_rule", "no_rbp", "no_progress",
                       "fp_end"):
            self.assertIn(reason, ends)
        self.assertGreater(ends["end"], 0, ends)
        self.assertGreater(m.get(("ember_agent_unwind_rows", frozenset()), 0), 0)
        self.assertGreater(m.get(("ember_agent_unwind_map_bytes", frozenset()), 0), 0)
        self.assertGreater(m.get(("ember_agent_unwind_objects_loaded_total", frozenset()), 0), 0)
        # The counters cover every process on the host (JIT code without
        # frame pointers ends in read_error/no_progress), so no ratio here;
        # the stacks of our programs are checked above.
        print("unwind walks by result:", ends)


@unittest.skipUnless(os.geteuid() == 0, "the eBPF agent needs root")
@unittest.skipUnless(shutil.which("perf"), "perf is not installed")
class AgentVersusPerfDwarfTest(unittest.TestCase):
    """Debian's python3 (no frame pointers) running a busy script, sampled by
    the agent and by `perf record --call-graph dwarf` at once: the top leaf
    functions and their callers agree."""

    def test_python_top_stacks_match_perf(self):
        tmp = tempfile.mkdtemp(prefix="ember-agent-perf-")
        srv = h.Ember(args=["--agent", f"--agent.interval={INTERVAL_S}s",
                            f"--agent.sample-rate={RATE_HZ}"])
        try:
            srv.start()
            script = os.path.join(tmp, "busy.py")
            with open(script, "w") as f:
                f.write(PY_BUSY)
            run = Run(["/usr/bin/python3", script, "8"])
            data = os.path.join(tmp, "perf.data")
            time.sleep(1)  # the agent has read the process by now
            r = subprocess.run(["perf", "record", "-q", "-F", str(RATE_HZ), "--call-graph",
                                "dwarf,16384", "-o", data, "-p", str(run.pid), "--", "sleep",
                                "5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.assertIn(r.returncode, (0, -signal.SIGTERM), "perf record failed")
            run.finish()
            perf_pairs = self.perf_leaf_callers(data)
            target = srv.metrics().get(("ember_agent_intervals_total", frozenset()), 0) + 2
            h.wait_for(lambda: srv.metrics().get(("ember_agent_intervals_total", frozenset()),
                                                 0) >= target, timeout=30, what="two drains")
            time.sleep(2)
            fg = srv.flamegraph(CPU, f'{{pid="{run.pid}"}}', run.started_ms - 60_000,
                                h.now_ms() + 60_000)
            agent_pairs = collections.Counter()
            for n in flame_nodes(fg):
                if n["self"] > 0:
                    stack = as_perf_sees_python(n["path"] + [n["name"]])
                    agent_pairs[(stack[-1], stack[-2] if len(stack) > 1 else "")] += n["self"]
            self.compare(perf_pairs, agent_pairs)
        finally:
            srv.cleanup()
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def perf_leaf_callers(data):
        out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"],
                             capture_output=True, text=True, check=True).stdout
        pairs = collections.Counter()
        for block in out.split("\n\n"):
            frames = []
            for line in block.splitlines():
                parts = line.split(None, 1)
                # perf adds the inlined functions it finds in DWARF as frames of
                # their own ("(inlined)"); the agent names the function they
                # were inlined into, which is the next frame perf prints.
                if (len(parts) == 2 and re.match(r"^[0-9a-f]+$", parts[0])
                        and not parts[1].strip().endswith("(inlined)")):
                    frames.append(strip_offset(parts[1].strip()))
            if frames:
                pairs[(frames[0], frames[1] if len(frames) > 1 else "")] += 1
        return pairs

    def compare(self, perf_pairs, agent_pairs):
        def leaves(pairs):
            c = collections.Counter()
            for (leaf, _), v in pairs.items():
                if "unknown" not in leaf and not UNSYMBOLIZED.search(leaf) and \
                        not PLT_STUB.search(leaf):
                    c[leaf] += v
            return c

        pl, al = leaves(perf_pairs), leaves(agent_pairs)
        top_perf = [k for k, _ in pl.most_common(10)]
        report = (f"perf top leaves {pl.most_common(10)}\nagent top leaves {al.most_common(10)}")
        print(report)
        self.assertGreaterEqual(len(top_perf), 5, report)
        # Ranks of leaves with a handful of samples are noise (perf and the
        # agent sample different windows, and a loaded machine adds kernel
        # leaves of preemption), so no rank is compared: every leaf perf saw
        # 20 times or more must hold at least a third of its perf share in the
        # agent's profile (a leaf the agent misses or names wrong holds none;
        # docs/testing.md).
        solid = [k for k, v in pl.most_common(10) if v >= 20]
        self.assertGreaterEqual(len(solid), 3, f"too few samples to compare\n{report}")
        perf_total, agent_total = sum(pl.values()), sum(al.values())
        missing = {k for k in solid
                   if al[k] * perf_total * 3 < pl[k] * agent_total}
        self.assertFalse(missing, f"perf's leaves {sorted(missing)} hardly in the agent's\n{report}")
        for leaf in top_perf[:5]:
            pc = collections.Counter({c: v for (l, c), v in perf_pairs.items() if l == leaf})
            ac = collections.Counter({c: v for (l, c), v in agent_pairs.items() if l == leaf})
            self.assertTrue(ac, f"{leaf}: no samples in the agent\n{report}")
            want = pc.most_common(1)[0][0]
            known = {c: v for c, v in ac.items() if "unknown" not in c}
            # The agent's most frequent named callers, ties included: an
            # unwind cut short ([unknown]) says nothing about which caller.
            best = {c for c, v in known.items() if v == max(known.values())} if known else set()
            print(f"{leaf}: caller perf {want!r} agent {sorted(best)!r}")
            if "unknown" in want:
                continue  # perf's own unwind (or symbols) failed here: nothing to compare
            if sum(pc.values()) < 20:
                continue  # a handful of samples cannot rank callers (docs/testing.md)
            self.assertIn(want, best,
                          f"{leaf}: callers perf {pc.most_common(3)} agent {ac.most_common(3)}")


if __name__ == "__main__":
    unittest.main()
