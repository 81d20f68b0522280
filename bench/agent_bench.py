#!/usr/bin/python3
"""Agent overhead benchmark: what profiling every process costs, for
ember-agent at 19 Hz and 100 Hz beside `perf record -a -g` at the same rates,
on the same load in the same run.

Load: N processes (default: one per CPU) each spinning in a known function
(tests/integration/agentprogs/cpu_mix.c `spin`) for --seconds, counting loop
rounds, so the work done per second measures the slowdown every profiler
causes, including what it costs inside the kernel (sampling, stack walking,
BPF program) on the profiled tasks' own time.

Per configuration it prints:
  profiler CPU   user+sys of the profiler process (all threads, from
                 /proc/PID/task/*/schedstat) per wall second, in ms/s and as
                 a share of one CPU;
  BPF            in-kernel run time of the agent's sampler program
                 (kernel.bpf_stats_enabled, bpftool's run_time_ns) per second;
  RSS            resident memory at the end of the window and its peak;
  load work     loop rounds per CPU-second of the load (rusage), and its
                 slowdown against the runs without a profiler, measured before
                 and after: their spread is this machine's noise floor. Per
                 CPU-second, because on a shared host the share of CPU the
                 load gets varies; sampling's cost inside the profiled tasks
                 (interrupt, stack walk, BPF program) stays in the figure.
ember-agent publishes to a redis-server of our own (what a deployment's agent
pays); the agents' interval is --interval so several drains fall inside the
window. References: perf-anchors.md §3 (OTel eBPF profiler: 1% CPU and 250 MB
are its upper limits; Parca: < 1% CPU, < 200 MB).

A second case (--nofp-procs, default 50) runs that many processes of a
program built -O2 -fomit-frame-pointer (agentprogs/unwind_tree.c, a five-deep
call tree: the agent unwinds it with .eh_frame tables in BPF) and prints,
for ember-agent at 19 Hz and `perf record -a --call-graph dwarf` at 19 Hz on
the same load: CPU (user+sys, plus the BPF program's run time for the
agent), memory (RSS, plus the agent's BPF maps: bytes_memlock of every map
its sampler uses), and the unwinder's own figures (rows loaded, walks by
result). Targets (issue 17): at most 1% of one core and 128 MiB.

A third case (--mixed-procs, default 50; issue 30) mixes runtimes: native
(unwind_tree), CPython (agentprogs/py_split.py under every 3.10-3.13 found:
Debian's 3.11, pyenv's; Python frames read in BPF), Java (agentprogs/java/Split.java: perf map asked of the JVM) and Node
(agentprogs/node_split.js --perf-basic-prof), in shares 2:2:1:1 (runtimes
that are missing are left out), at 19 Hz: agent CPU, memory, and the Python
and JVM counters. Target: agent CPU <= 1% of one core.

usage: bench/agent_bench.py BUILD_DIR [--seconds 20] [--procs N] [--interval 5s]
                                      [--nofp-procs 50] [--mixed-procs 50]
                                      [--only nofp|mixed]
Needs root. Use a RelWithDebInfo build (ASan inflates everything).
"""
import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, ".."))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def task_cpu_ns(pid):
    """CPU time of every thread of pid (ns), from schedstat."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass    # a thread that just exited
    return total


def rss_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1])
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def bpf_prog_stats(name):
    """(run_time_ns, run_cnt) summed over loaded programs called name."""
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    t = c = 0
    for p in json.loads(r.stdout or "[]"):
        if p.get("name") == name:
            t += p.get("run_time_ns", 0)
            c += p.get("run_cnt", 0)
    return t, c


def run_load(cpu_mix, procs, seconds):
    """Runs the spinning processes to the end; returns (loop rounds, their CPU
    seconds as the kernel accounted them: rusage)."""
    ps = [subprocess.Popen([cpu_mix, "spin", str(seconds)], stdout=subprocess.PIPE, text=True)
          for _ in range(procs)]
    rounds, cpu_s = 0, 0.0
    for p in ps:
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        m = re.search(r"rounds (\d+)", out)
        if not m:
            raise SystemExit(f"load process printed {out!r}")
        rounds += int(m.group(1))
        cpu_s += ru.ru_utime + ru.ru_stime
    return rounds, cpu_s


def measure(name, profiler_pid, cpu_mix, procs, seconds, bpf_name=None):
    """One window of load with the profiler (pid) running; returns a row."""
    cpu0 = task_cpu_ns(profiler_pid) if profiler_pid else 0
    bpf0 = bpf_prog_stats(bpf_name) if bpf_name else None
    t0 = time.monotonic()
    rounds, load_cpu_s = run_load(cpu_mix, procs, seconds)
    wall = time.monotonic() - t0
    # Per CPU second of the load: what the other tenants of a shared host take
    # away cancels out; what sampling costs inside the profiled tasks stays.
    row = {"name": name, "rounds_s": rounds / seconds, "rounds_cpu_s": rounds / load_cpu_s}
    if profiler_pid:
        row["cpu_ms_s"] = (task_cpu_ns(profiler_pid) - cpu0) / 1e6 / wall
        row["rss_kib"], row["hwm_kib"] = rss_kib(profiler_pid)
    if bpf0:
        bpf1 = bpf_prog_stats(bpf_name)
        row["bpf_ms_s"] = (bpf1[0] - bpf0[0]) / 1e6 / wall
        row["bpf_runs"] = bpf1[1] - bpf0[1]
        row["bpf_ns_run"] = (bpf1[0] - bpf0[0]) / max(1, bpf1[1] - bpf0[1])
    return row


def rss_parts_kib(pid):
    """RssAnon, RssFile and BpfMmap (the resident part of the agent's mmap of
    its BPF rows array, inside RssFile: those pages are the map's memory,
    counted under BPF maps, not twice)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                out[line.split(":")[0]] = int(line.split()[1])
    bpf, in_bpf = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                in_bpf = "bpf-map" in line
            elif in_bpf and line.startswith("Rss:"):
                bpf += int(line.split()[1])
    out["BpfMmap"] = bpf
    return out


def bpf_maps_bytes(prog_name):
    """bytes_memlock of every map the named program uses (bpftool)."""
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    ids = set()
    for p in json.loads(r.stdout or "[]"):
        if p.get("name") == prog_name:
            ids.update(p.get("map_ids", []))
    total = 0
    for i in ids:
        m = subprocess.run(["bpftool", "-j", "map", "show", "id", str(i)], capture_output=True,
                           text=True)
        if m.returncode == 0:
            total += json.loads(m.stdout).get("bytes_memlock", 0)
    return total


def nofp_window(name, profiler_pid, exe, a, bpf_name=None):
    """--nofp-procs processes of the frame-pointer-less program for
    --seconds while the profiler runs; returns a row."""
    return load_window(name, profiler_pid, [[exe, "busy", str(a.seconds)]] * a.nofp_procs,
                       bpf_name)


def load_window(name, profiler_pid, argvs, bpf_name=None, cwd=None):
    """One process per argv (in cwd) while the profiler runs; returns a row."""
    cpu0 = task_cpu_ns(profiler_pid)
    bpf0 = bpf_prog_stats(bpf_name) if bpf_name else None
    t0 = time.monotonic()
    ps = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=cwd)
          for argv in argvs]
    peak, parts = 0, {}
    while any(p.poll() is None for p in ps):
        now = rss_parts_kib(profiler_pid)
        own = now.get("RssAnon", 0) + now.get("RssFile", 0) - now.get("BpfMmap", 0)
        if own >= peak:
            peak, parts = own, now
        time.sleep(0.5)
    wall = time.monotonic() - t0
    row = {"name": name, "cpu_ms_s": (task_cpu_ns(profiler_pid) - cpu0) / 1e6 / wall}
    row["rss_kib"], row["parts"] = peak, parts
    if bpf0:
        bpf1 = bpf_prog_stats(bpf_name)
        row["bpf_ms_s"] = (bpf1[0] - bpf0[0]) / 1e6 / wall
        row["bpf_ns_run"] = (bpf1[0] - bpf0[0]) / max(1, bpf1[1] - bpf0[1])
        row["bpf_map_bytes"] = bpf_maps_bytes(bpf_name)
    return row


def bench_nofp_agent(dh, build, exe, a):
    with running_agent(dh, build, 19, a) as agent:
        row = nofp_window("ember-agent 19 Hz", agent.proc.pid, exe, a, bpf_name="agt_on_sample")
        time.sleep(a.interval_s + 1)  # one more drain: the window's walks are counted
        m = agent.metrics()
        row["walks"] = {dict(k[1]).get("result"): v for k, v in m.items()
                        if k[0] == "ember_agent_unwind_total"}
        row["rows"] = m.get(("ember_agent_unwind_rows", frozenset()), 0)
        row["objects"] = m.get(("ember_agent_unwind_objects", frozenset()), 0)
        row["unwind_procs"] = m.get(("ember_agent_unwind_processes", frozenset()), 0)
    return row


def bench_nofp_perf(exe, a, tmp):
    data = os.path.join(tmp, "perf-dwarf.data")
    perf = subprocess.Popen(["perf", "record", "-a", "--call-graph", "dwarf", "-F", "19", "-q",
                             "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        row = nofp_window("perf record dwarf 19 Hz", perf.pid, exe, a)
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait(120)
    row["data_mib"] = os.path.getsize(data) / 2**20 if os.path.exists(data) else 0
    return row


def run_nofp_case(dh, build, a, tmp):
    exe = os.path.join(tmp, "unwind_tree")
    subprocess.run(["cc", "-O2", "-fomit-frame-pointer", "-fno-ipa-icf",
                    "-fno-inline-functions-called-once",
                    os.path.join(SRC, "tests", "integration", "agentprogs", "unwind_tree.c"),
                    "-o", exe, "-lz", "-ldl"], check=True)
    rows = [bench_nofp_agent(dh, build, exe, a)]
    if shutil.which("perf"):
        rows.append(bench_nofp_perf(exe, a, tmp))
    print(f"\nno frame pointers: {a.nofp_procs} processes of unwind_tree (-O2 "
          f"-fomit-frame-pointer) on {os.cpu_count()} CPUs, {a.seconds:.0f} s")
    print(f"{'configuration':<24}  {'CPU user+sys':>12}  {'BPF':>8}  {'CPU total (1 core)':>18}  "
          f"{'RSS peak':>9}  {'BPF maps':>9}  {'memory total':>12}")
    for r in rows:
        bpf = r.get("bpf_ms_s", 0.0)
        total = r["cpu_ms_s"] + bpf
        maps = r.get("bpf_map_bytes", 0) / 2**20
        rss = r["rss_kib"] / 1024
        print(f"{r['name']:<24}  {r['cpu_ms_s']:7.2f} ms/s  {bpf:5.2f} ms/s  "
              f"{total:8.2f} ms/s {total / 10:5.2f}%  {rss:6.1f} MiB  {maps:6.1f} MiB  "
              f"{rss + maps:8.1f} MiB")
    for r in rows:
        if "walks" in r:
            print(f"{r['name']}: BPF {r['bpf_ns_run']:.0f} ns per sample; unwind tables: "
                  f"{r['rows']:.0f} rows of {r['objects']:.0f} objects for "
                  f"{r['unwind_procs']:.0f} processes; walks by result {r['walks']}")
        p = r.get("parts", {})
        print(f"{r['name']}: RSS peak = anon {p.get('RssAnon', 0) / 1024:.1f} MiB + file "
              f"{p.get('RssFile', 0) / 1024:.1f} MiB - the resident part of the mmap'd BPF "
              f"rows array ({p.get('BpfMmap', 0) / 1024:.1f} MiB, counted under BPF maps)")
        if "data_mib" in r:
            print(f"{r['name']}: wrote {r['data_mib']:.1f} MiB of perf.data (user stacks "
                  f"copied per sample, unwound later by perf report)")
    print("targets (issue 17): agent CPU <= 1% of one core (10 ms/s), memory <= 128 MiB")


def mixed_argvs(exe, a, tmp):
    """--mixed-procs command lines: native, Python, Java, Node in shares 2:2:1:1."""
    progs = os.path.join(SRC, "tests", "integration", "agentprogs")
    secs = str(a.seconds)
    kinds = [("native", [exe, "busy", secs]), ("native", [exe, "busy", secs])]
    if os.path.exists("/usr/bin/python3.11"):
        kinds += [("python", ["/usr/bin/python3.11", os.path.join(progs, "py_split.py"), secs])] * 2
    if shutil.which("javac") and shutil.which("java"):
        subprocess.run(["javac", "-d", tmp, os.path.join(progs, "java", "Split.java")], check=True)
        kinds.append(("java", ["java", "-XX:+PreserveFramePointer", "-cp", tmp, "Split", secs]))
    if shutil.which("node"):
        kinds.append(("node", ["node", "--perf-basic-prof", os.path.join(progs, "node_split.js"),
                               secs]))
    picked = [kinds[i % len(kinds)] for i in range(a.mixed_procs)]
    # the Python share takes turns over every CPython the agent reads that is
    # here (Debian's 3.11; pyenv's 3.10-3.13)
    pythons = ["/usr/bin/python3.11"] + sorted(
        glob.glob("/root/.pyenv/versions/3.1[0-3].*/bin/python3.1[0-3]"))
    slots = [i for i, (k, _) in enumerate(picked) if k == "python"]
    for n, i in enumerate(slots):
        py = pythons[n % len(pythons)]
        version = re.search(r"python(3\.\d+)$", py).group(1)
        picked[i] = (f"python{version}", [py] + picked[i][1][1:])
    counts = {}
    for k, _ in picked:
        counts[k] = counts.get(k, 0) + 1
    return [argv for _, argv in picked], counts


def run_mixed_case(dh, build, a, tmp):
    exe = os.path.join(tmp, "unwind_tree")
    subprocess.run(["cc", "-O2", "-fomit-frame-pointer",
                    os.path.join(SRC, "tests", "integration", "agentprogs", "unwind_tree.c"),
                    "-o", exe, "-lz", "-ldl"], check=True)
    argvs, counts = mixed_argvs(exe, a, tmp)
    with running_agent(dh, build, 19, a) as agent:
        # in tmp: node --perf-basic-prof writes an isolate log into its cwd
        r = load_window("ember-agent 19 Hz", agent.proc.pid, argvs, bpf_name="agt_on_sample",
                        cwd=tmp)
        time.sleep(a.interval_s + 1)  # one more drain: the window's walks are counted
        m = agent.metrics()
    bpf = r.get("bpf_ms_s", 0.0)
    total = r["cpu_ms_s"] + bpf
    maps = r.get("bpf_map_bytes", 0) / 2**20
    rss = r["rss_kib"] / 1024
    print(f"\nmixed runtimes: {counts} on {os.cpu_count()} CPUs, {a.seconds:.0f} s, 19 Hz")
    print(f"ember-agent: CPU {r['cpu_ms_s']:.2f} ms/s + BPF {bpf:.2f} ms/s = {total:.2f} ms/s "
          f"({total / 10:.2f}% of one core); RSS peak {rss:.1f} MiB + BPF maps {maps:.1f} MiB; "
          f"BPF {r.get('bpf_ns_run', 0):.0f} ns per sample")

    def metric(name):
        return {dict(k[1]).get("result", ""): v for k, v in m.items() if k[0] == name}
    by_version = "ember_agent_python_interpreters_by_version_total"
    print(f"python walks {metric('ember_agent_python_walks_total')}, interpreters "
          f"{metric('ember_agent_python_interpreters_total')}, by version "
          f"{ {dict(k[1])['version']: v for k, v in m.items() if k[0] == by_version} }, code cache "
          f"{m.get(('ember_agent_python_code_bytes', frozenset()), 0) / 1024:.0f} KiB; "
          f"JVM perf map requests {metric('ember_agent_jvm_perfmap_requests_total')}")
    print("target (issue 30): agent CPU <= 1% of one core (10 ms/s), memory reported")
    for pid in {p for p in os.listdir("/tmp") if re.match(r"^perf-\d+\.map$", p)}:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join("/tmp", pid))  # the Java and Node programs' perf maps


def phase_cpu(m):
    return {dict(labels).get("phase"): v for (name, labels), v in m.items()
            if name == "ember_agent_cpu_seconds_total"}


@contextlib.contextmanager
def running_agent(dh, build, rate, a):
    """ember-agent publishing to a redis-server of our own, in steady state
    (past the first drain: kallsyms is read once, then every 10 min);
    stopped cleanly on leaving."""
    redis = dh.Redis(aof=False).start()
    agent = dh.Role(os.path.join(build, "services", "agent", "ember-agent"), False,
                    args=[f"--redis.url={redis.url}", f"--agent.sample-rate={rate}",
                          f"--agent.interval={a.interval}"], log_level="warn")
    try:
        agent.start()
        time.sleep(a.interval_s + 1.5)
        yield agent
        if agent.stop() != 0:
            raise SystemExit("ember-agent did not stop cleanly")
    finally:
        agent.cleanup()
        redis.cleanup()


def bench_agent(dh, build, cpu_mix, rate, a):
    with running_agent(dh, build, rate, a) as agent:
        before = phase_cpu(agent.metrics())
        row = measure(f"ember-agent {rate} Hz", agent.proc.pid, cpu_mix, a.procs, a.seconds,
                      bpf_name="agt_on_sample")
        m = agent.metrics()
        after = phase_cpu(m)
        row["phases_ms_s"] = {k: (after.get(k, 0) - before.get(k, 0)) * 1e3 / a.seconds
                              for k in after}
        row["published"] = m.get(("ember_agent_profiles_published_total", frozenset()), 0)
        row["lost"] = sum(v for (k, _), v in m.items() if k == "ember_agent_samples_lost_total")
    return row


def bench_perf(cpu_mix, rate, a, tmp):
    data = os.path.join(tmp, f"perf-{rate}.data")
    perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", str(rate), "-q", "-o", data],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        row = measure(f"perf record -a -g {rate} Hz", perf.pid, cpu_mix, a.procs, a.seconds)
    finally:
        perf.send_signal(signal.SIGINT)     # our own child: perf writes its header and exits
        perf.wait(60)
    row["data_mib"] = os.path.getsize(data) / 2**20 if os.path.exists(data) else 0
    return row


def fmt(row, base):
    cpu = row.get("cpu_ms_s")
    cells = [f"{row['name']:<24}"]
    cells.append(f"{cpu:7.2f} ms/s {cpu / 10:5.2f}%" if cpu is not None else f"{'-':>19}")
    bpf = row.get("bpf_ms_s")
    cells.append(f"{bpf:6.2f} ms/s ({row['bpf_ns_run']:.0f} ns/run)" if bpf is not None
                 else f"{'-':>26}")
    if "rss_kib" in row:
        cells.append(f"{row['rss_kib'] / 1024:6.1f} MiB ({row['hwm_kib'] / 1024:.1f})")
    else:
        cells.append(f"{'-':>18}")
    slow = (1 - row["rounds_cpu_s"] / base) * 100 if base else 0
    cells.append(f"{row['rounds_cpu_s']:8.0f} /cpu-s {slow:+6.2f}%  ({row['rounds_s']:.0f} /s)")
    return "  ".join(cells)


def h_duration_s(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text)
    if not m:
        raise SystemExit(f"--interval {text!r}: want e.g. 5s")
    return float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, None: 1}[m.group(2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    ap.add_argument("--interval", default="5s")
    ap.add_argument("--nofp-procs", type=int, default=50)
    ap.add_argument("--mixed-procs", type=int, default=50)
    ap.add_argument("--only", choices=["nofp", "mixed"], help="run only that case")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the agent benchmark needs root (eBPF, perf -a)")
    build = os.path.abspath(a.build_dir)
    os.environ["EMBER_BIN_DIR"] = build
    sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
    import distributed_harness as dh
    a.interval_s = h_duration_s(a.interval)

    tmp = tempfile.mkdtemp(prefix="ember-bench-agent-")
    cpu_mix = os.path.join(tmp, "cpu_mix")
    subprocess.run(["cc", "-O2", "-fno-omit-frame-pointer", "-pthread",
                    os.path.join(SRC, "tests", "integration", "agentprogs", "cpu_mix.c"),
                    "-o", cpu_mix], check=True)
    stats_path = "/proc/sys/kernel/bpf_stats_enabled"
    with open(stats_path) as f:
        stats_before = f.read().strip()
    with open(stats_path, "w") as f:
        f.write("1")
    rows = []
    if a.only:
        try:
            (run_nofp_case if a.only == "nofp" else run_mixed_case)(dh, build, a, tmp)
        finally:
            with open(stats_path, "w") as f:
                f.write(stats_before)
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    try:
        rows.append(dict(measure("no profiler", None, cpu_mix, a.procs, a.seconds), base=True))
        for rate in (19, 100):
            rows.append(bench_agent(dh, build, cpu_mix, rate, a))
            if shutil.which("perf"):
                rows.append(bench_perf(cpu_mix, rate, a, tmp))
        rows.append(dict(measure("no profiler (again)", None, cpu_mix, a.procs, a.seconds),
                         base=True))
        if a.nofp_procs:
            run_nofp_case(dh, build, a, tmp)
        if a.mixed_procs:
            run_mixed_case(dh, build, a, tmp)
    finally:
        with open(stats_path, "w") as f:
            f.write(stats_before)
        shutil.rmtree(tmp, ignore_errors=True)

    bases = [r["rounds_cpu_s"] for r in rows if r.get("base")]
    base = sum(bases) / len(bases)
    noise = abs(bases[0] - bases[-1]) / base * 100
    print(f"agent overhead: {a.procs} busy processes on {os.cpu_count()} CPUs, "
          f"{a.seconds:.0f} s per configuration, agent interval {a.interval}")
    print(f"{'configuration':<24}  {'profiler CPU (1 CPU=100%)':>19}  "
          f"{'BPF in kernel':>26}  {'RSS (peak)':>18}  {'load work per CPU-second, slowdown':>36}")
    for r in rows:
        print(fmt(r, base))
    print(f"noise floor: the two runs without a profiler differ by {noise:.2f}%")
    for r in rows:
        if "phases_ms_s" in r:
            phases = ", ".join(f"{k} {v:.2f} ms/s" for k, v in sorted(r["phases_ms_s"].items()))
            print(f"{r['name']}: agent work by phase: {phases}; "
                  f"{r['published']:.0f} profiles published, {r['lost']:.0f} samples lost")
        if "data_mib" in r:
            print(f"{r['name']}: wrote {r['data_mib']:.1f} MiB of perf.data")
    print("perf record only copies raw samples to perf.data (symbolization waits for perf "
          "report); the agent symbolizes, reads every new process' /proc/PID/maps while it "
          "lives, and publishes pprof: its 'processes' phase grows with process churn")
    print("reference (perf-anchors.md §3): OTel eBPF profiler upper limits 1% CPU, 250 MB; "
          "Parca agent < 1% CPU, < 200 MB")
    bad = [r for r in rows if r.get("lost")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
