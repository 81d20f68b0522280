#!/usr/bin/python3
"""Ingest benchmark: profiles/s and samples/s through POST /ingest.

A mix of real profiles from testdata (each re-timed into V variants so every
(series, time) is distinct) is sent by bench/ingest_load (C, N keep-alive
connections, exact request count) first to bench/http_sink — a server that
only reads the body: the floor for HTTP on this machine — and then to a fresh
ember. For ember two figures are printed: acknowledged (HTTP 200) and stored
(every acknowledged profile visible to SelectSeries, i.e. including the time
the writer needed to drain its queue). Same run, same machine, same requests.

Because the machine may be shared, ember's own CPU time (user+sys of the
process, all threads, from the first measured request until everything is
stored) is printed too: CPU ms per profile does not depend on what else runs.
--perf-stat additionally attaches `perf stat -e task-clock` to ember for the
same window; --callgrind OUT runs ember under valgrind's callgrind and counts
its instructions for that window only (deterministic, but about 50x slower:
use it with --requests 300 --conns 4).

Last, bench/ingest_stages times each receiver stage alone (gunzip, decode,
validate, check) on the same files, one core: the floors beside
bench/perf_stages.py's table of where ember's CPU went.

--only K sends only the K-th profile of the mix (0 = B1, the small Go CPU
profile of perf-anchors §7.2).

--pyroscope BIN sends the same warm-up and measured requests to a Grafana
Pyroscope single binary the user provides (bench/pyroscope_peer.py: free ports
on 127.0.0.1, filesystem storage in a temporary directory) and prints its
figures beside ember's: acknowledged and stored rates, latency, CPU per profile,
peak RSS and disk. Nothing here builds Pyroscope.

usage: bench/ingest_bench.py BUILD_DIR [--conns 16] [--requests 4000] [--variants 20] [--pods 100]
                             [--perf-stat] [--callgrind OUT] [--only K] [--pyroscope BIN]
"""
import argparse
import atexit
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from pyroscope_peer import Pyroscope, dir_bytes   # bench/, beside this script

MIX = ("pprof/pyroscope-go.cpu.labels.pprof",      # B1: small Go CPU, 480 samples, pprof labels
       "pprof/pyroscope-cpu_go_truncated_1.pb.gz",  # B2: medium Go CPU, 647 samples, 1.9k locations
       "pprof/pyroscope-heap",                      # B3: heavy Go heap, 12k samples
       "pprof/pyroscope-profile_java",              # Java CPU, 2.6k samples
       "ingest/nodejs-wall.pb.gz")                  # Node wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--pods", type=int, default=100)
    ap.add_argument("--perf-stat", action="store_true",
                    help="also attach `perf stat -e task-clock` to ember while measuring")
    ap.add_argument("--callgrind", metavar="OUT",
                    help="run ember under callgrind, counting instructions while measuring")
    ap.add_argument("--only", type=int, metavar="K", help="send only profile K of the mix")
    ap.add_argument("--pyroscope", metavar="BIN",
                    help="also send the same requests to this Grafana Pyroscope single binary")
    a = ap.parse_args()
    mix = MIX if a.only is None else (MIX[a.only],)
    tmp = tempfile.mkdtemp(prefix="ember-bench-ingest-")
    atexit.register(shutil.rmtree, tmp, True)  # profiles and data dirs: many MB
    bin_dir = os.path.abspath(a.build_dir)
    if a.callgrind:
        bin_dir = callgrind_bin_dir(bin_dir, os.path.abspath(a.callgrind), tmp)
    os.environ["EMBER_BIN_DIR"] = bin_dir
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
    import harness as h

    load_bin = os.path.join(a.build_dir, "bench", "ingest_load")
    sink_bin = os.path.join(a.build_dir, "bench", "http_sink")
    man = h.manifest()
    base_ns = time.time_ns() - 30 * 60 * 10**9
    bodies = []
    for v in range(a.variants):
        for k, rel in enumerate(mix):
            raw = h.set_time_nanos(h.read_testdata(rel), base_ns + (v * len(mix) + k) * 10**9)
            p = os.path.join(tmp, f"v{v}-{k}.pb.gz")
            with open(p, "wb") as f:
                f.write(gzip.compress(raw, compresslevel=1))   # Go's pprof writer uses BestSpeed
            bodies.append(p)
    if a.requests > len(bodies) * a.pods:
        sys.exit(f"--requests must be <= variants*{len(mix)}*pods = {len(bodies) * a.pods} (distinct series,time)")
    # request i carries body i % len(bodies), i.e. file i % len(mix)
    per_file = [a.requests // len(mix) + (k < a.requests % len(mix)) for k in range(len(mix))]
    samples = sum(n * man[rel]["samples"] for n, rel in zip(per_file, mix))
    raw_bytes = sum(n * len(h.gunzip_if(h.read_testdata(rel))) for n, rel in zip(per_file, mix))

    def run_load(port, app, n=a.requests):
        r = subprocess.run([load_bin, str(port), str(a.conns), str(n), str(len(mix)), str(a.pods), app, *bodies],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout)

    # ---- floor: the sink
    sink = subprocess.Popen([sink_bin, "0"], stdout=subprocess.PIPE, text=True)
    try:
        sink_port = int(sink.stdout.readline())
        run_load(sink_port, "warmup", 200)
        floor = run_load(sink_port, "bench-app")
    finally:
        sink.terminate()
        sink.wait()

    # ---- ember
    srv = h.Ember(log_level="warn")
    srv.start(timeout=120 if a.callgrind else 20)
    try:
        perf = []

        def instrument():
            perf.append(start_perf_stat(srv.proc.pid) if a.perf_stat else None)
            if a.callgrind:
                callgrind_control(srv.proc.pid, "--instr=on")
        res, last, drain, cpu = measure(h, srv, run_load, man, mix, base_ns, instrument)
        if a.callgrind:
            callgrind_control(srv.proc.pid, "--instr=off")
        perf_out = stop_perf_stat(perf[0])
        peak = srv.rss_peak_kib()
        ember_disk = dir_bytes(srv.data_dir)
    finally:
        srv.cleanup()

    peer = run_pyroscope(a, h, tmp, man, mix, base_ns, run_load) if a.pyroscope else None

    def row(label, r, secs=None):
        secs = secs or r["seconds"]
        return (f"{label:<34}{r['ok'] / secs:>12,.0f}{samples * r['ok'] / a.requests / secs:>14,.0f}"
                f"{r['body_bytes'] / secs / 1e6:>10,.1f}{raw_bytes / secs / 1e6:>10,.1f}"
                f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")

    print(f"ingest benchmark: {a.requests} requests over {a.conns} keep-alive connections, "
          f"mix of {len(mix)} real profiles x {a.variants} variants, {a.pods} pods")
    print(f"  mix: {', '.join(os.path.basename(m) for m in mix)}; "
          f"avg {samples / a.requests:,.0f} samples, {res['body_bytes'] / a.requests / 1024:,.1f} KiB gz per request")
    print(f"{'':<34}{'profiles/s':>12}{'samples/s':>14}{'MB/s gz':>10}{'MB/s raw':>10}{'p50 ms':>9}{'p99 ms':>9}")
    print(row("http_sink (floor, reads body only)", floor))
    print(row("ember, acknowledged (HTTP 200)", res))
    ok = last == res["group_ok"]
    print(row("ember, stored (queryable)", res, res["seconds"] + drain) +
          ("" if ok else f"   INCOMPLETE: stored {last} != acked {res['group_ok']}"))
    for label, r in (("sink", floor), ("ember", res)):
        if r["non_2xx"] or r["errors"]:
            print(f"  WARNING {label}: {r['non_2xx']} non-2xx, {r['errors']} transport errors")
    print(f"  ember/floor (acknowledged): {floor['seconds'] / res['seconds']:.3f}; "
          f"writer drain after the last ack: {drain * 1000:.0f} ms; ember peak RSS {peak / 1024:.0f} MiB")
    print(f"  ember CPU (user+sys, all threads) from the first request until stored: {cpu:.2f} s = "
          f"{cpu * 1000 / res['ok']:.2f} ms per profile, i.e. {res['ok'] / cpu:,.0f} profiles "
          f"per CPU-second")
    if peer:
        print_peer(peer, res, row, drain, cpu, peak, ember_disk, samples)
    if perf_out:
        print("  perf stat on ember for the same window:\n    " + "\n    ".join(perf_out))
    if a.callgrind:
        ir = callgrind_total(a.callgrind)
        print(f"  callgrind: {ir:,} instructions in ember for the same window = "
              f"{ir / res['ok']:,.0f} per profile ({a.callgrind})")
    stages = receiver_stages(a.build_dir, h, mix)
    if stages:
        print("  floors, each receiver stage alone (bench/ingest_stages: one core, caches warm, the "
              "same files), CPU ms per profile: " +
              ", ".join(f"{k} {v:.3f}" for k, v in stages.items()) +
              f"; together {sum(stages.values()):.3f}")
    print("  reference (perf-anchors.md §7.3, 2 cores, end to end): B1 target >= 1,000 profiles/s; "
          "Pyroscope v2 ~550 profiles/s on 2 cores; >= 250k samples/s per core")
    return 0 if ok and not res["non_2xx"] and not res["errors"] else 1


def receiver_stages(build_dir, h, mix, iterations=50):
    """bench/ingest_stages on the mix's files: {stage: CPU ms per profile},
    or None when it was not built."""
    exe = os.path.join(build_dir, "bench", "ingest_stages")
    if not os.access(exe, os.X_OK):
        return None
    files = [os.path.join(h.TESTDATA, rel) for rel in mix]
    r = subprocess.run([exe, str(iterations), *files], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def wait_stored(h, srv, man, mix, window, expected, t_end, timeout=300):
    """Polls SelectSeries until every acknowledged profile is counted (per file of
    the mix); returns (counts last seen, seconds since t_end)."""
    def stored():
        out = []
        for k, rel in enumerate(mix):
            e = man[rel]
            name = h.ingest_metric_name([st["type"] for st in e["sample_types"]])
            st = e["sample_types"][-1]
            pid = h.profile_type_id(name, st["type"], st["unit"], e)
            s = srv.series_sum(pid, f'{{service_name="bench-app", file="{k}"}}', *window)
            out.append(round(s / st["total"]))
        return out
    last = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = stored()
        if last == expected:
            break
        time.sleep(0.1)
    return last, time.monotonic() - t_end


def measure(h, srv, run_load, man, mix, base_ns, on_start=None):
    """Warm-up, then the measured requests until stored: (load result, stored
    counts, drain seconds after the last ack, server CPU seconds from the first
    measured request until stored). on_start runs just before the measured load."""
    run_load(srv.port, "warmup", 200)
    if on_start:
        on_start()
    cpu0 = cpu_seconds(srv.proc.pid)
    res = run_load(srv.port, "bench-app")
    t_end = time.monotonic()
    window = (base_ns // 10**6 - 60_000, h.now_ms() + 60_000)
    last, drain = wait_stored(h, srv, man, mix, window, res["group_ok"], t_end)
    return res, last, drain, cpu_seconds(srv.proc.pid) - cpu0


def run_pyroscope(a, h, tmp, man, mix, base_ns, run_load):
    """The same warm-up and measured requests against a Pyroscope single binary
    (bench/pyroscope_peer.py): acknowledged and stored figures, its CPU time,
    peak RSS, and disk once its compaction settled."""
    py = Pyroscope(a.pyroscope, h, tmp).start()
    try:
        res, last, drain, cpu = measure(h, py, run_load, man, mix, base_ns)
        settle = py.wait_compacted()
        out = {"res": res, "last": last, "drain": drain, "cpu": cpu, "settle": settle,
               "peak": h.Ember.rss_peak_kib(py), "disk": py.disk(), "live": py.live_disk(),
               "bucket": py.bucket_disk(), "metastore": py.metastore_disk()}
    finally:
        py.stop()
    return out


def print_peer(peer, res, row, drain, cpu, peak, ember_disk, samples):
    r = peer["res"]
    print(row("pyroscope, acknowledged (HTTP 200)", r))
    ok = peer["last"] == r["group_ok"]
    print(row("pyroscope, stored (queryable)", r, r["seconds"] + peer["drain"]) +
          ("" if ok else f"   INCOMPLETE: stored {peer['last']} != acked {r['group_ok']}"))
    if r["non_2xx"] or r["errors"]:
        print(f"  WARNING pyroscope: {r['non_2xx']} non-2xx, {r['errors']} transport errors")
    print("  pyroscope (v2 storage, filesystem bucket, one node) beside ember, same requests:")
    print(f"    {'':<44}{'ember':>14}{'pyroscope':>14}")
    print(f"    {'acknowledged profiles/s':<44}{res['ok'] / res['seconds']:>14,.0f}{r['ok'] / r['seconds']:>14,.0f}")
    print(f"    {'stored profiles/s':<44}{res['ok'] / (res['seconds'] + drain):>14,.0f}"
          f"{r['ok'] / (r['seconds'] + peer['drain']):>14,.0f}")
    print(f"    {'p50 / p99 ms':<44}{res['p50_ms']:>7.1f} /{res['p99_ms']:>5.0f}"
          f"{r['p50_ms']:>7.1f} /{r['p99_ms']:>5.0f}")
    print(f"    {'drain after the last ack (ms)':<44}{drain * 1000:>14,.0f}{peer['drain'] * 1000:>14,.0f}")
    print(f"    {'CPU per profile, first request to stored (ms)':<44}{cpu * 1000 / res['ok']:>14.2f}"
          f"{peer['cpu'] * 1000 / r['ok']:>14.2f}")
    print(f"    {'peak RSS (MiB)':<44}{peak / 1024:>14,.0f}{peer['peak'] / 1024:>14,.0f}")
    n = samples + 200 * samples / res["ok"]     # the warm-up's 200 requests are stored too
    print(f"    {'disk, whole data dir (MiB)':<44}{ember_disk / 2**20:>14,.1f}{peer['disk'] / 2**20:>14,.1f}")
    print(f"    {'disk bytes per sample (incl. warm-up)':<44}{ember_disk / n:>14.2f}{peer['disk'] / n:>14.2f}")
    print(f"    {'  pyroscope object store, bytes/sample':<44}{'':>14}{peer['bucket'] / n:>14.2f}")
    if peer["live"]:
        live, nlive, nobj = peer["live"]
        print(f"    {'  pyroscope live blocks only, bytes/sample':<44}{'':>14}{live / n:>14.2f}"
              f"   ({nlive} live blocks, {nobj} objects on disk)")
    print(f"    {'  pyroscope metastore (MiB)':<44}{'':>14}{peer['metastore'] / 2**20:>14.1f}"
          "   (raft WAL preallocated in 64 MiB segments)")
    print(f"    ember's disk measured once stored; pyroscope's once its compaction settled "
          f"({peer['settle']:.0f} s after stored; sources of compactions stay until its fixed "
          f"15-min cleanup delay, 'live blocks only' leaves them out)")


def cpu_seconds(pid):
    """user+sys CPU time of a process (all its threads) so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def callgrind_bin_dir(build_dir, out, tmp):
    """A bin dir whose ember is the real one under callgrind, collecting nothing
    until callgrind_control switches instrumentation on."""
    d = os.path.join(tmp, "callgrind-bin", "services", "ember")
    os.makedirs(d)
    script = os.path.join(d, "ember")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no "
                f"--callgrind-out-file={out} {build_dir}/services/ember/ember \"$@\"\n")
    os.chmod(script, 0o755)
    return os.path.join(tmp, "callgrind-bin")


def callgrind_control(pid, *args):
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, stdout=subprocess.DEVNULL)


def callgrind_total(path):
    """Instructions counted in a callgrind output (written when ember exits)."""
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):     # "summary:" stays 0 with --instr-atstart=no
                return int(line.split()[1])
    raise AssertionError(f"no totals in {path}")


def start_perf_stat(pid):
    return subprocess.Popen(["perf", "stat", "-e", "task-clock", "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_perf_stat(perf):
    """Stops our own perf child (SIGINT makes it print) and returns its report lines."""
    if perf is None:
        return None
    perf.send_signal(signal.SIGINT)
    _, err = perf.communicate(timeout=30)
    return [line.strip() for line in err.splitlines() if "task-clock" in line or "elapsed" in line]


if __name__ == "__main__":
    sys.exit(main())
