"""JFR -> pprof conversion throughput (MB/s of JFR, one core): ember's
converter (bench/jfr_bench, C) against an in-run reference on the same
recordings, with the per-type totals of both checked equal.

The reference the issue asks for, Grafana's Go converter
(github.com/grafana/jfr-parser), cannot be built here: the Go module proxy
answers 403 for that module. The reference used instead is the JDK's own JFR
parser (jdk.jfr.consumer, bench/jfr/JfrTotals.java), which parses the same
files and sums the same totals by Pyroscope's rules; it does no pprof
building, so it is a parse-only floor rather than a full converter.

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
    ref = subprocess.run(["taskset", "-c", "0", "java", "-XX:ActiveProcessorCount=1",
                          os.path.join(HERE, "jfr", "JfrTotals.java"), str(iters)] + plain,
                         capture_output=True, text=True, check=True).stdout
    ok = True
    for a, b in zip(ours.splitlines(), ref.splitlines()):
        a, b = json.loads(a), json.loads(b)
        same = a["totals"] == b["totals"]
        ok &= same
        print(f"{os.path.basename(a['file'])}: {a['bytes']} B  ember {a['mb_per_s']:.1f} MB/s  "
              f"JDK jfr parser {b['mb_per_s']:.1f} MB/s  ratio {a['mb_per_s'] / b['mb_per_s']:.2f}x  "
              f"totals {'equal' if same else 'DIFFER'}")
        if not same:
            print("  ember:", a["totals"], "\n  jdk:  ", b["totals"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
