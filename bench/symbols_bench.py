#!/usr/bin/python3
"""Symbolization benchmark (issue 31): a 16k-node flame graph of frames
stored without functions, named at query time from an uploaded debug file,
cold (the symbolizer's answer cache empty: the first query after the upload)
versus warm (the same query again), beside the same query with no debug file
(module+0xoffset names, the floor) in the same run.

The program: 2048 C functions compiled here with -g; the profile (python
protobuf): one stack per (function, one of 8 addresses in it) under main,
16,384 leaves, no function records. Correctness checks: every leaf named by
the debug file is the function binutils' `nm` puts at that address (ignoring
inlining: the functions are noinline), and the totals agree.

usage: bench/symbols_bench.py BUILD_DIR [--repeat 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

N_FUNCS = 2048
PER_FUNC = 8
BASE = 0x555555554000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(args.build_dir)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "integration"))
    import harness as h

    d = h.temp_dir("ember-symbench-")
    src = os.path.join(d, "many.c")
    with open(src, "w") as f:
        f.write("static volatile unsigned long sink;\n")
        for i in range(N_FUNCS):
            f.write(f"__attribute__((noinline)) void fn_{i}(unsigned long n) "
                    f"{{ for (unsigned long i = 0; i < n; i++) sink += i * {i + 3}u ^ (i >> 2); }}\n")
        f.write("int main(int c, char **v) { (void)v;\n")
        for i in range(N_FUNCS):
            f.write(f"  fn_{i}(c);\n")
        f.write("  return 0; }\n")
    full = os.path.join(d, "many")
    subprocess.run(["gcc", "-g", "-O1", "-Wl,--build-id", "-o", full, src], check=True)
    debug = full + ".debug"
    subprocess.run(["objcopy", "--only-keep-debug", full, debug], check=True)
    out = subprocess.run(["readelf", "-n", full], capture_output=True, text=True).stdout
    build_id = out.split("Build ID: ")[1].split()[0]
    syms = {}
    for line in subprocess.run(["nm", "-S", "--defined-only", full], capture_output=True,
                               text=True).stdout.splitlines():
        p = line.split()
        if len(p) == 4 and p[3].startswith("fn_"):
            syms[p[3]] = (int(p[0], 16), int(p[1], 16))

    pb = h.pb().profile
    prof = pb.Profile()
    strings = ["", "cpu", "nanoseconds", "/opt/many", build_id]
    prof.sample_type.add(type=1, unit=2)
    prof.period_type.type, prof.period_type.unit, prof.period = 1, 2, 10_000_000
    now_ns = time.time_ns() - 60_000_000_000
    prof.time_nanos, prof.duration_nanos = now_ns, 10_000_000_000
    prof.mapping.add(id=1, memory_start=BASE, memory_limit=BASE + 0x1000000, file_offset=0,
                     filename=3, build_id=4)
    main_addr = int(subprocess.run(["nm", full], capture_output=True, text=True).stdout
                    .split(" T main")[0].split("\n")[-1], 16)
    prof.location.add(id=1, mapping_id=1, address=BASE + main_addr + 1)
    want = {}
    lid = 1
    for name, (start, size) in sorted(syms.items()):
        for k in range(PER_FUNC):
            lid += 1
            addr = start + (k * size) // PER_FUNC
            prof.location.add(id=lid, mapping_id=1, address=BASE + addr)
            prof.sample.add(location_id=[lid, 1], value=[10_000_000])
            want[lid] = name
    prof.string_table.extend(strings)
    raw = prof.SerializeToString()
    total = 10_000_000 * len(want)

    srv = h.Ember(args=["--symbolizer.debuginfod-urls=none"]).start()
    try:
        r = srv.push([({"__name__": "process_cpu", "service_name": "many"}, [raw])])
        assert r.status == 200, r.describe()
        window = (now_ns // 1_000_000 - 60_000, now_ns // 1_000_000 + 60_000)
        ptype = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"

        def query():
            t0 = time.perf_counter()
            fg = srv.flamegraph(ptype, '{service_name="many"}', *window, max_nodes=65536)
            return time.perf_counter() - t0, fg

        h.wait_for(lambda: query()[1].total == total, timeout=30, what="the profile stored")
        floor = [query()[0] for _ in range(args.repeat)]
        r = srv.request("POST", f"/debuginfo.v1alpha1.DebuginfoService/Upload/{build_id}",
                        open(debug, "rb").read())
        assert r.status == 200, r.describe()
        cold, fg = query()
        warm = [query()[0] for _ in range(args.repeat)]
        names = set(fg.names)
        assert fg.total == total, (fg.total, total)
        missing = set(want.values()) - names
        assert not missing, f"{len(missing)} functions not named, e.g. {sorted(missing)[:3]}"
        nodes = sum(len(l.values) // 4 for l in fg.levels)
        print(f"symbols: {len(want)} unsymbolized leaves, {nodes} flame graph nodes, "
              f"{len(names) - 1} names")
        print(f"  module+0xoffset (no debug file): median {statistics.median(floor) * 1000:.1f} ms")
        print(f"  symbolized, cold cache:          {cold * 1000:.1f} ms")
        print(f"  symbolized, warm cache:          median {statistics.median(warm) * 1000:.1f} ms")
    finally:
        srv.stop()
        srv.cleanup()


if __name__ == "__main__":
    main()
