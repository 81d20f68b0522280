#!/usr/bin/python3
"""Where ember's ingest CPU goes, by stage, from a `perf record` of ember.

usage: bench/perf_stages.py PERF_DATA MS_PER_PROFILE [PERF_DATA MS_PER_PROFILE ...]

Each sample is given to the stage of the function it was taken in (self time,
`perf report --no-children --sort dso,symbol`): ember's binary is built without
frame pointers, so call chains are not trusted. A libc helper (memcpy, strlen,
qsort, ...) therefore counts as "libc" rather than for its caller. Printed per
stage: its share of the run's samples and that share of the run's CPU per
profile (the bench's own figure, given on the command line), one column per
run, so two runs (before, after) read side by side.

Record a run with, e.g.:
  bench/ingest_bench.py BUILD &   # then, once ember is up:
  perf record -F 999 -g -p $(pgrep -f BUILD/services/ember/ember) -o out.data -- sleep 7
"""
import re
import subprocess
import sys

# (stage, dso pattern or None, symbol pattern); the first match wins.
STAGES = (
    ("inflate", r"libdeflate|libz\.", None),
    ("LMDB", r"liblmdb", None),
    ("HTTP, libuv", r"libuv|libllhttp|libnghttp2", None),
    ("kernel (syscalls, faults, wakeups)", r"kernel", None),
    ("libc (memcpy, strlen, sort, malloc)", r"libc\.so", None),
    ("decode", None, r"^lc_pprof__decode|^lc_pprof_decode|^pd_|^lc_gunzip"),
    ("validate and check", None,
     r"^lc_pprof_validate|^check_|^lc_store_check|^lc_utf8|^lc_pprof_index|^table_get|^id_set"
     r"|^ing_spy|^spy_|^locations_dense|^label_text|^lc_labels"),
    ("split into series", None, r"^ing_split|^sp_|^ing_series|^series_|^ing_labelset|^ing_ingest_labels"),
    ("symbol lookups", None,
     r"symtab|^lc_store__hash|^location_|^function_|^mapping_|^string_|^symbol_put|^warm_"
     r"|resolver|^memo_|idmap"),
    ("stack tree and cache", None, r"resolve_stacks|stackcache|nodetab|^lane_|^stacks_|^stack_"),
    ("samples (sort, merge, encode) and write", None,
     r"^lc_store_write|^radix|^samples_|^write_|^wr_|^lc_store__|^mdb_"),
    ("publish, transport, writer loop", None, r"^job_|^ing_job|^direct_|^lc_transport|^ing_writer|^ing_handover"),
    ("HTTP, libuv", None, r"^lc_http|^httpd|^h1_|^conn_|^uv_"),
    ("arena, allocator", None, r"^lc_arena|^lc_x|^pool_|^lc_buf"),
)


def samples(path):
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--sort", "dso,symbol",
                          "--stdio", "-g", "none", "--percent-limit", "0"],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[[.k]\]\s+(\S+)", line)
        if m:
            yield float(m.group(1)), m.group(2), m.group(3)


def stage_of(dso, sym):
    for name, dso_re, sym_re in STAGES:
        if dso_re and re.search(dso_re, dso):
            return name
        if sym_re and dso.startswith("ember") and re.search(sym_re, sym):
            return name
    return "other"


def main():
    args = sys.argv[1:]
    if len(args) < 2 or len(args) % 2:
        sys.exit(__doc__)
    runs = []
    for path, ms in zip(args[::2], args[1::2]):
        shares = {}
        for pct, dso, sym in samples(path):
            st = stage_of(dso, sym)
            shares[st] = shares.get(st, 0.0) + pct
        runs.append((path, float(ms), shares))
    names = [s[0] for s in STAGES] + ["other"]
    names = list(dict.fromkeys(n for n in names if any(n in r[2] for r in runs)))
    print("| stage | " + " | ".join(f"{p} ({ms:.2f} ms)" for p, ms, _ in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for n in names:
        cells = [f"{r[2].get(n, 0.0):.1f}% = {r[2].get(n, 0.0) * r[1] / 100:.2f} ms" for r in runs]
        print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
