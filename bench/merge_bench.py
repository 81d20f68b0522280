#!/usr/bin/python3
"""Merge benchmark: SelectMergeProfile over N stored profiles versus
`go tool pprof -proto` merging the same N files, in the same run.

For each corpus file and N, N re-timed copies (10 s apart) are written to disk
and ingested into a fresh ember, in two shapes: "shared" (the copies have the
same stacks, as consecutive profiles of one process mostly do) and "distinct"
(every copy gets its own root frame, so no stack is shared: the worst case
for ember's stack tree, N times the nodes). Then:
  ember: wall time of SelectMergeProfile (application/proto, keep-alive,
         body fully read) over those N profiles — median of --repeat runs;
  go:    wall time of Go's pprof tool (called directly, not through the `go`
         wrapper) `pprof -proto -output=OUT file1 … fileN` — median of
         --go-repeat runs. Go's time includes its process start (printed on
         its own as "go floor") and merges every sample type of the files,
         ember merges the one requested.
Both outputs are checked with `go tool pprof -raw`: ember's total must be
N x the MANIFEST total of the requested sample type.

usage: bench/merge_bench.py BUILD_DIR [--n 10,100] [--repeat 7] [--go-repeat 3]
"""
import argparse
import atexit
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CORPUS = (("pprof/gopprof-sample.cpu", "cpu"),
          ("pprof/pyroscope-heap", "inuse_space"),
          ("pprof/gopprof-large.cpu", "cpu"))


def distinct_copy(h, raw, i):
    """The profile with one extra root frame `variant-i` under every stack."""
    p = h.pb().profile.Profile.FromString(h.gunzip_if(raw))
    p.string_table.append(f"variant-{i}")
    fid = max([f.id for f in p.function] + [0]) + 1
    lid = max([loc.id for loc in p.location] + [0]) + 1
    p.function.add(id=fid, name=len(p.string_table) - 1, system_name=len(p.string_table) - 1)
    loc = p.location.add(id=lid)
    loc.line.add(function_id=fid)
    for s in p.sample:
        s.location_id.append(lid)          # location_id[0] is the leaf: append = new root
    return p.SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--n", default="10,100")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--go-repeat", type=int, default=3)
    a = ap.parse_args()
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
    import harness as h

    ns = [int(x) for x in a.n.split(",")]
    man = h.manifest()
    tool = h.pprof_tool()
    tmp = tempfile.mkdtemp(prefix="ember-bench-merge-")
    atexit.register(shutil.rmtree, tmp, True)  # profiles and data dirs: many MB
    base_ns = time.time_ns() - 50 * 60 * 10**9
    out_go = os.path.join(tmp, "go-merged.pb.gz")

    def go_time(files, repeat):
        times = []
        for _ in range(repeat):
            if times and sum(times) > 20:      # very slow sets: fewer repeats keep the run short
                break
            t0 = time.perf_counter()
            subprocess.run([tool, "-proto", "-symbolize=none", f"-output={out_go}", *files],
                           check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    srv = h.Ember(log_level="warn")
    srv.start()
    rows, failures = [], []
    try:
        conn = srv.connection(timeout=600)
        go_floor = go_time([os.path.join(h.TESTDATA, CORPUS[0][0])], 5)
        for rel, stype in CORPUS:
            e = man[rel]
            st = next(s for s in e["sample_types"] if s["type"] == stype)
            name = h.ingest_metric_name([s["type"] for s in e["sample_types"]])
            pid = h.profile_type_id(name, st["type"], st["unit"], e)
            raw = h.read_testdata(rel)
            for n, shape in ((n, shape) for shape in ("shared", "distinct") for n in ns):
                svc = f"merge-{os.path.basename(rel)}-{shape}-{n}"
                files = []
                for i in range(n):
                    p = os.path.join(tmp, f"{svc}-{i}.pb.gz")
                    prof = raw if shape == "shared" else distinct_copy(h, raw, i)
                    with open(p, "wb") as f:
                        f.write(gzip.compress(h.set_time_nanos(prof, base_ns + i * 10 * 10**9), compresslevel=1))
                    files.append(p)
                    with open(p, "rb") as f:
                        r = srv.ingest(svc, f.read(), {"format": "pprof"}, content_type="application/octet-stream")
                    if r.status != 200:
                        raise SystemExit(f"ingest of {rel} failed: {r.describe()}")
                window = (base_ns // 10**6 - 60_000, (base_ns + n * 10 * 10**9) // 10**6 + 60_000)
                sel = f'{{service_name="{svc}"}}'
                want = n * st["total"]
                got = h.eventually(lambda: round(srv.series_sum(pid, sel, *window)), want, timeout=120)
                if got != want:
                    failures.append(f"{svc}: stored total {got} != {want}")
                body = h.pb().querier.SelectMergeProfileRequest(profile_typeID=pid, label_selector=sel,
                                                                 start=window[0], end=window[1]).SerializeToString()
                times, merged = [], None
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    conn.request("POST", f"/{h.QUERIER}/SelectMergeProfile", body,
                                 {"Content-Type": "application/proto"})
                    resp = conn.getresponse()
                    merged = resp.read()
                    times.append(time.perf_counter() - t0)
                    if resp.status != 200:
                        raise SystemExit(f"SelectMergeProfile {svc}: HTTP {resp.status} {merged[:300]!r}")
                t_ember = statistics.median(times)
                mp = os.path.join(tmp, f"{svc}-ember.pb")
                with open(mp, "wb") as f:
                    f.write(merged)
                tot = h.pprof_raw(mp)["totals"].get((st["type"], st["unit"]))
                if tot != want:
                    failures.append(f"{svc}: SelectMergeProfile total {tot} != {want}")
                t_go = go_time(files, a.go_repeat)
                go_tot = h.pprof_raw(out_go)["totals"].get((st["type"], st["unit"]))
                if go_tot != want:
                    failures.append(f"{svc}: go pprof merged total {go_tot} != {want}")
                rows.append((os.path.basename(rel), pid.split(":")[1], shape, n, e["samples"], t_ember, t_go,
                             len(merged), os.path.getsize(out_go)))
                print(f"  done: {svc}", file=sys.stderr, flush=True)
        conn.close()
    finally:
        srv.cleanup()

    print("merge benchmark: SelectMergeProfile (ember) vs `go tool pprof -proto` (same N files, same run)")
    print(f"{'profile':<22}{'type':<12}{'stacks':<9}{'N':>5}{'samples/prof':>13}{'ember ms':>10}{'go ms':>10}"
          f"{'go/ember':>10}{'out KiB e/go':>15}")
    for f, t, shape, n, s, te, tg, be, bg in rows:
        print(f"{f:<22}{t:<12}{shape:<9}{n:>5}{s:>13,}{te * 1e3:>10.1f}{tg * 1e3:>10.1f}{tg / te:>9.1f}x"
              f"{be / 1024:>8.0f}/{bg / 1024:.0f}")
    print(f"  go floor (process start + 1 small profile): {go_floor * 1e3:.1f} ms; ember times are one "
          f"HTTP round trip over keep-alive, uncompressed response")
    for fl in failures:
        print(f"  CHECK FAILED: {fl}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
