"""JFR -> pprof conversion throughput (MB/s of JFR, one core): ember's
converter (bench/jfr_bench, C) against an in-run reference on the same
recordings, with the per-type totals of both checked equal.

The reference is Grafana's Go converter github.com/grafana/jfr-parser at
v0.18.0 (the version Pyroscope pins; served by the Go module proxy at that
exact version), built from bench/jfr/go.mod into BUILD_DIR/bench/ once and
reused (bench/jfr/main.go), run with GOMAXPROCS=1 on the same core.

Recordings (FILE... replaces them): testdata/jfr/dump1 (async-profiler, cpu),
every recording of jfr-parser v0.18.0's own test data (in the Go module cache
once the reference is built: async-profiler, the JDK, the Pyroscope agent,
dd-trace-java) and the newest JDK recording the Java tests left
(/tmp/jdk-jfr-*/burn.jfr), if any.
Each side's figure is its median conversion (ms) of JFR_BENCH_ITERATIONS
(default 100); the ratio is jfr-parser's median over ember's. The last line
is the minimum ratio over the recordings. Exit 1 when any totals differ.
Usage: bench/jfr_bench.py BUILD_DIR [FILE...]
"""
import glob
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


def gomodcache():
    try:
        return subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.path.join(os.path.expanduser("~"), "go", "pkg", "mod")


def default_files():
    """dump1, jfr-parser's test recordings, the newest JDK recording left in /tmp."""
    files = [os.path.join(TESTDATA, "jfr", "dump1.jfr.gz")]
    parser_data = os.path.join(gomodcache(), "github.com", "grafana", "jfr-parser@v0.18.0",
                               "parser", "testdata")
    files += sorted(f for f in glob.glob(os.path.join(parser_data, "*.jfr.gz"))
                    if os.path.basename(f) != "dump1.jfr.gz")  # the same bytes as ours
    jdk = glob.glob("/tmp/jdk-jfr-*/burn.jfr")
    if jdk:
        files.append(max(jdk, key=os.path.getmtime))
    return files


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "build")
    reference = build_jfr_parser(build)  # first: it fills the module cache default_files reads
    files = sys.argv[2:] or default_files()
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
    ref = subprocess.run(["taskset", "-c", "0", reference, str(iters)] + plain,
                         env=dict(os.environ, GOMAXPROCS="1"), capture_output=True, text=True,
                         check=True).stdout
    ok = True
    ratios = []
    for a, b in zip(ours.splitlines(), ref.splitlines()):
        a, b = json.loads(a), json.loads(b)
        same = a["totals"] == b["totals"]
        ok &= same
        ratio = b["median_ms"] / a["median_ms"]
        ratios.append((ratio, os.path.basename(a["file"])))
        print(f"{os.path.basename(a['file'])}: {a['bytes']} B  ember {a['mb_per_s']:.1f} MB/s  "
              f"jfr-parser v0.18.0 {b['mb_per_s']:.1f} MB/s  ratio {ratio:.2f}x  "
              f"(median ms {a['median_ms']:.2f} vs {b['median_ms']:.2f}; "
              f"min {a['min_ms']:.2f} vs {b['min_ms']:.2f})  totals {'equal' if same else 'DIFFER'}")
        if not same:
            print("  ember:", a["totals"], "\n  jfr-parser:", b["totals"])
    if ratios:
        low = min(ratios)
        print(f"minimum ratio: {low[0]:.2f}x ({low[1]}) over {len(ratios)} recordings")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
