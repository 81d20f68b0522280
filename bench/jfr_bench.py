"""JFR -> pprof conversion throughput (MB/s of JFR, one core): ember's
converter (bench/jfr_bench, C) against an in-run reference on the same
recordings, with the per-type totals of both checked equal.

The reference is Grafana's Go converter github.com/grafana/jfr-parser at
v0.18.0 (the version Pyroscope pins; served by the Go module proxy at that
exact version), built from bench/jfr/go.mod into BUILD_DIR/bench/ once and
reused (bench/jfr/main.go), run with GOMAXPROCS=1 on the same core.

Recordings: testdata/jfr/dump1 (async-profiler, cpu) and, when the Java SDK
test has left them, nothing else; pass more .jfr/.jfr.gz files as arguments.
Usage: bench/jfr_bench.py BUILD_DIR [FILE...]
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.environ.get("EMBER_TESTDATA") or os.path.join(HERE, "..", "..", "shared", "testdata")


def build_jfr_parser(build):
    """Builds the Go reference once per build dir; rebuilt when main.go/go.mod change."""
    out = os.path.join(build, "bench", "jfrparser_bench")
    srcs = [os.path.join(HERE, "jfr", n) for n in ("main.go", "go.mod", "go.sum")]
    if not os.path.exists(out) or os.path.getmtime(out) < max(map(os.path.getmtime, srcs)):
        env = dict(os.environ, GOFLAGS="-mod=mod")
        subprocess.run(["go", "build", "-o", os.path.abspath(out), "."], cwd=os.path.join(HERE, "jfr"),
                       env=env, check=True)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build")
    files = sys.argv[2:] or [os.path.join(TESTDATA, "jfr", "dump1.jfr.gz")]
    tmp = tempfile.mkdtemp(prefix="jfr-bench-")
    plain = []
    for f in files:
        data = open(f, "rb").read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        p = os.path.join(tmp, os.path.basename(f).replace(".gz", ""))
        open(p, "wb").write(data)
        plain.append(p)
    iters = int(os.environ.get("JFR_BENCH_ITERATIONS", "100"))
    ours = subprocess.run(["taskset", "-c", "0", os.path.join(build, "bench", "jfr_bench"), str(iters)]
                          + plain, capture_output=True, text=True, check=True).stdout
    ref = subprocess.run(["taskset", "-c", "0", build_jfr_parser(build), str(iters)] + plain,
                         env=dict(os.environ, GOMAXPROCS="1"), capture_output=True, text=True,
                         check=True).stdout
    ok = True
    for a, b in zip(ours.splitlines(), ref.splitlines()):
        a, b = json.loads(a), json.loads(b)
        same = a["totals"] == b["totals"]
        ok &= same
        print(f"{os.path.basename(a['file'])}: {a['bytes']} B  ember {a['mb_per_s']:.1f} MB/s  "
              f"jfr-parser v0.18.0 {b['mb_per_s']:.1f} MB/s  ratio {a['mb_per_s'] / b['mb_per_s']:.2f}x  "
              f"(median ms {a['bytes'] / 1e3 / a['mb_per_s']:.2f} vs {b['median_ms']:.2f})  "
              f"totals {'equal' if same else 'DIFFER'}")
        if not same:
            print("  ember:", a["totals"], "\n  jfr-parser:", b["totals"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
