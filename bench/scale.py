#!/usr/bin/python3
"""Scale benchmark: does a query's cost grow with the number of profiles?

Backfills --hours of --pods pods (one CPU profile per pod every --interval
seconds, --stacks stacks each, ending now) into a fresh ember, then prints
from that one run:
  - the flame graph (SelectMergeStacktraces, maxNodes 16384) time over the
    last hour, day and week, and over the day for one pod;
  - SelectSeries over the day and over the week, grouped by pod;
  - disk bytes per ingested sample (allocated bytes of the data directory);
  - resident memory split into anonymous and file-backed (smaps_rollup),
    after the week's query;
and the ratios against the targets: day <= 3x hour, week <= 2x day,
<= 3 bytes/sample, anonymous <= 200 MiB after the week's query.

The week's ratio is only meaningful with --hours 168 (a week of data); with
less, the week's range holds the same profiles as the day's.

Profiles are synthetic but shaped like a Go service's: a pool of stacks with
shared prefixes (depth 6-40), each profile taking --stacks of them with
skewed weights and random values; every pod has its own random variants.

--pyroscope BIN runs the same requests through a Grafana Pyroscope single
binary the user provides (filesystem storage, temporary directory) and prints
its figures beside ember's. Nothing here builds Pyroscope.

--keep DIR keeps ember's data dir and records the backfill beside it
(DIR.bench.json: its "now", arguments and total); a later run with the same
--keep DIR and data arguments skips the backfill and queries the same data as
of that "now", so builds or --ember-arg settings compare on identical blocks.

--shape random (issue 32) uses a second generator unlike the first so that the
disk figure is not tuned to one shape (RandomCorpus: random deep stacks over a
big pool of randomly named functions, long-tailed values, high-cardinality
labels); --shape both runs the two one after the other, side by side. After
the queries, the data dir's bytes are split by LMDB table (mdb_stat).

usage: bench/scale.py BUILD_DIR [--hours 24] [--pods 10] [--interval 15] [--stacks 500]
                      [--variants 32] [--shape tree|random|both] [--label-values 200]
                      [--repeat 3] [--conns 4] [--pyroscope BIN]
                      [--ember-arg ARG ...] [--keep DIR]
"""
import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from pyroscope_peer import Pyroscope, dir_bytes   # bench/, beside this script

HOUR_MS = 3600_000
PTYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
APP = "scale-app"
TARGETS = {"day/hour": 3.0, "week/day": 2.0, "bytes/sample": 3.0, "anon MiB": 200.0}


# ---------------------------------------------------------------- pprof encoding
def _varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _field(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _int_field(num, v):
    return _varint(num << 3) + _varint(v)


def _packed(num, values):
    return _field(num, b"".join(_varint(v) for v in values))


class Corpus:
    """Functions, locations (one per function) and a pool of stacks."""

    def __init__(self, rng, n_funcs=3000, n_stacks=4000):
        pkgs = [f"github.com/acme/shop/internal/pkg{i}" for i in range(60)]
        self.strings = ["", "cpu", "nanoseconds"]
        self.funcs = []
        for i in range(n_funcs):
            name = f"{rng.choice(pkgs)}.(*T{i % 97}).Method{i}"
            self.strings.append(name)
            self.strings.append(f"/src/shop/{name.rsplit('/', 1)[-1].split('.')[0]}/f{i % 211}.go")
            self.funcs.append((i + 1, len(self.strings) - 2, len(self.strings) - 1))
        stacks = [[1, 2, 3]]           # root side first: runtime.goexit, main, server
        while len(stacks) < n_stacks:  # grow from a random existing prefix: shared prefixes
            base = rng.choice(stacks)
            cut = rng.randint(min(3, len(base)), len(base))
            extra = rng.randint(1, 6)
            s = base[:cut] + [rng.randint(4, n_funcs) for _ in range(extra)]
            if len(s) <= 40:
                stacks.append(s)
        self.stacks = stacks
        self.weights = [1.0 / (i + 1) ** 0.8 for i in range(len(stacks))]
        self.header = Corpus.header_bytes()

    @staticmethod
    def header_bytes():
        return (_field(1, _int_field(1, 1) + _int_field(2, 2)) +  # sample_type {type, unit}
                _field(11, _int_field(1, 1) + _int_field(2, 2)) +  # period_type
                _int_field(12, 10_000_000) + _int_field(10, 15 * 10**9))  # period, duration

    def value(self, rng):
        return rng.randint(1, 50) * 10_000_000

    def symbols(self, used):
        """Functions and locations (id = function id) of `used`, and the string
        table: a profile carries only the symbols its samples reach."""
        strings = ["", "cpu", "nanoseconds"]
        out = []
        for fid in sorted(used):
            _, name, fname = self.funcs[fid - 1]
            n_id, f_id = len(strings), len(strings) + 1
            strings += [self.strings[name], self.strings[fname]]
            out.append(_field(5, _int_field(1, fid) + _int_field(2, n_id) + _int_field(4, f_id)))
            out.append(_field(4, _int_field(1, fid) + _int_field(3, 0x1000 + fid) +
                              _field(4, _int_field(1, fid) + _int_field(2, 10 + fid % 300))))
        out.extend(_field(6, x.encode()) for x in strings)
        return b"".join(out)

    def variant(self, rng, n_stacks):
        """A profile body without time_nanos: n_stacks stacks, random values."""
        picked = set()
        while len(picked) < min(n_stacks, len(self.stacks)):
            picked.update(rng.choices(range(len(self.stacks)), self.weights, k=n_stacks - len(picked)))
        samples, total, used = [], 0, set()
        for i in sorted(picked):
            used.update(self.stacks[i])
            leaf_first = list(reversed(self.stacks[i]))
            v = self.value(rng)
            total += v
            samples.append(_field(2, _packed(1, leaf_first) + _packed(2, [v])))
        return self.header + self.symbols(used) + b"".join(samples), total


class RandomCorpus(Corpus):
    """The held-out shape (issue 32), unlike Corpus on purpose: a big pool of
    functions with random names, a pool of stacks of 10-60 frames drawn
    independently from it (no shared prefixes beyond chance), several
    locations per function (distinct addresses and lines), and sample counts
    with a long tail instead of Corpus's uniform 1-50 periods."""

    def __init__(self, rng, n_funcs=6000, n_stacks=3000, locs_per_func=1):
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_"

        def word(lo, hi):
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))
        mods = [f"{word(3, 10)}.{rng.choice(['io', 'com', 'org', 'net'])}/{word(3, 12)}/{word(2, 10)}"
                for _ in range(100)]
        self.strings = ["", "cpu", "nanoseconds"]
        self.funcs = []
        for i in range(n_funcs):
            mod = rng.choice(mods)
            self.strings.append(f"{mod}.{word(4, 20)}")
            self.strings.append(f"/build/{mod}/{word(3, 12)}.go")
            self.funcs.append((i + 1, len(self.strings) - 2, len(self.strings) - 1))
        self.locs_per_func = locs_per_func
        n_locs = n_funcs * locs_per_func
        self.loc_lines = [rng.randint(1, 4000) for _ in range(n_locs)]
        self.stacks = [[rng.randint(1, n_locs) for _ in range(rng.randint(10, 60))]
                       for _ in range(n_stacks)]
        self.weights = [1.0] * n_stacks     # every stack equally likely
        self.loc_bytes = [_field(4, _int_field(1, lid) + _int_field(3, 0x400000 + 16 * lid) +
                                 _field(4, _int_field(1, (lid - 1) // locs_per_func + 1) +
                                        _int_field(2, self.loc_lines[lid - 1])))
                          for lid in range(1, n_locs + 1)]
        self.header = Corpus.header_bytes()

    def symbols(self, used):
        strings = ["", "cpu", "nanoseconds"]
        out, funcs = [], {}
        for lid in sorted(used):
            fid = (lid - 1) // self.locs_per_func + 1
            if fid not in funcs:
                _, name, fname = self.funcs[fid - 1]
                funcs[fid] = len(strings)
                strings += [self.strings[name], self.strings[fname]]
                out.append(_field(5, _int_field(1, fid) + _int_field(2, funcs[fid]) +
                                  _int_field(4, funcs[fid] + 1)))
            out.append(self.loc_bytes[lid - 1])
        out.extend(_field(6, x.encode()) for x in strings)
        return b"".join(out)

    def value(self, rng):
        return min(int(rng.expovariate(1 / 4.0)) + 1, 2000) * 10_000_000


def with_time(body, t_ns):
    return body + _int_field(9, t_ns)    # time_nanos (field 9), last one wins


# ---------------------------------------------------------------- load
def backfill(port, path_fn, jobs, conns):
    """Sends jobs [(pod, t_ms, body)] over `conns` keep-alive connections, each
    body with its time_nanos set to t_ms (made when sent: a week of 10 pods is
    hundreds of thousands of profiles, too many to hold as copies)."""
    errors = []
    lock = threading.Lock()
    it = iter(jobs)

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                job = next(it, None)
            if job is None:
                break
            path, body = path_fn(*job[:2]), with_time(job[2], job[1] * 10**6)
            for attempt in range(50):
                c.request("POST", path, body, {"Content-Type": "application/octet-stream"})
                r = c.getresponse()
                data = r.read()
                if r.status == 429 or r.status == 503:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                break
            if r.status != 200:
                with lock:
                    errors.append(f"{r.status} {data[:200]!r}")
        c.close()
    threads = [threading.Thread(target=worker) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def make_jobs(a, now_ms, shape):
    """[(labels, t_ms, body)] and the total value sent. `tree` is Corpus with
    the pod as the only label; `random` is RandomCorpus, each pod with a
    random uid and every profile with one of --label-values endpoints."""
    rng = random.Random(a.seed)
    corpus = (Corpus if shape == "tree" else RandomCorpus)(rng)
    variants = [[corpus.variant(rng, a.stacks) for _ in range(a.variants)] for _ in range(a.pods)]
    uids = ["%032x" % rng.getrandbits(128) for _ in range(a.pods)]
    endpoints = [f"/api/v{rng.randint(1, 3)}/{rng.getrandbits(40):010x}" for _ in range(a.label_values)]
    n = a.hours * 3600 // a.interval
    first_ms = now_ms - n * a.interval * 1000
    jobs, total = [], 0
    for k in range(n):
        t_ms = first_ms + (k + 1) * a.interval * 1000 - rng.randint(0, 999)
        for pod in range(a.pods):
            body, v = rng.choice(variants[pod])
            total += v
            labels = f"pod=pod-{pod}"
            if shape == "random":
                labels += f",pod_uid={uids[pod]},endpoint={rng.choice(endpoints)}"
            jobs.append((labels, t_ms, body))   # the variant's bytes, shared: timed when sent
    return jobs, total


def ingest_path(labels, t_ms):
    s = t_ms // 1000
    return (f"/ingest?name={APP}{urllib.parse.quote('{' + labels + '}', safe='')}&format=pprof"
            f"&from={s}&until={s + 15}&spyName=gospy")


# ---------------------------------------------------------------- queries
def connect_call(port, method, req_bytes, resp_cls):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/querier.v1.QuerierService/" + method, req_bytes,
              {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise AssertionError(f"{method}: {r.status} {body[:300]!r}")
    return resp_cls.FromString(body)


def timed(fn, repeat):
    """Median wall time (ms) of `repeat` runs after one warm-up; and the last result."""
    res = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2], res


def run_queries(h, port, now_ms, a, pid):
    p = h.pb()
    req_cls, resp_cls = h.rpc_classes("querier.v1.QuerierService/SelectMergeStacktraces")
    sreq_cls, sresp_cls = h.rpc_classes("querier.v1.QuerierService/SelectSeries")
    end = now_ms + 1000
    out = {}

    def flame(start, sel):
        req = req_cls(profile_typeID=PTYPE, label_selector=sel, start=start, end=end, max_nodes=16384)
        return connect_call(port, "SelectMergeStacktraces", req.SerializeToString(), resp_cls)

    for label, span in (("hour", HOUR_MS), ("day", 24 * HOUR_MS), ("week", 7 * 24 * HOUR_MS)):
        ms, r = timed(lambda: flame(end - span, f'{{service_name="{APP}"}}'), a.repeat)
        out[label] = (ms, r.flamegraph.total)
    ms, r = timed(lambda: flame(end - 24 * HOUR_MS, f'{{service_name="{APP}", pod="pod-0"}}'), a.repeat)
    out["day, one pod"] = (ms, r.flamegraph.total)
    if a.month:
        ms, r = timed(lambda: flame(end - 30 * 24 * HOUR_MS, f'{{service_name="{APP}"}}'), 1)
        out["30 days"] = (ms, r.flamegraph.total)

    def series(span):
        req = sreq_cls(profile_typeID=PTYPE, label_selector=f'{{service_name="{APP}"}}',
                       start=end - span, end=end, step=60.0, group_by=["pod"])
        return connect_call(port, "SelectSeries", req.SerializeToString(), sresp_cls)
    for key, span in (("series", 24 * HOUR_MS), ("series, week", 7 * 24 * HOUR_MS)):
        ms, r = timed(lambda: series(span), a.repeat)
        out[key] = (ms, int(sum(pt.value for s in r.series for pt in s.points)))
    del p
    out["mem"] = smaps(pid) if pid else None
    return out


def smaps(pid):
    """(rss, anonymous, file-backed) KiB from /proc/pid/smaps_rollup."""
    vals = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                vals[parts[0].rstrip(":")] = int(parts[1])
    rss, anon = vals.get("Rss", 0), vals.get("Anonymous", 0)
    return rss, anon, rss - anon - vals.get("Shmem", 0) if "Shmem" in vals else rss - anon




# ---------------------------------------------------------------- servers
def wait_summaries(h, port, timeout):
    """Waits until ember reports no block waiting for its summaries or its
    compaction (if it exposes the gauges); returns the seconds waited."""
    t0 = time.monotonic()
    time.sleep(8)   # ember summarises a closed block once writes paused 5 s (passes every 2 s)
    while time.monotonic() - t0 < timeout:
        r = h.http_request(port, "GET", "/metrics")
        pending = None
        for line in r.body.decode().splitlines():
            # then compaction (the disk figure is of compacted blocks)
            if line.startswith(("ember_store_blocks_unsummarized", "ember_store_blocks_uncompacted")):
                pending = (pending or 0) + float(line.split()[-1])
        if not pending:
            break
        time.sleep(0.2)
    return time.monotonic() - t0


def block_breakdown(data_dir):
    """Bytes per table summed over every block (and the rollups), from
    `mdb_stat -a -f -e`: pages of each named DB, LMDB's own (main DB,
    freelist and free pages), and the allocated bytes beyond the pages in use."""
    out = {}
    dirs = [os.path.join(data_dir, "rollups")]
    blocks = os.path.join(data_dir, "blocks")
    dirs += [os.path.join(blocks, d) for d in sorted(os.listdir(blocks)) if not d.startswith(".")]
    for d in dirs:
        if not os.path.exists(os.path.join(d, "data.mdb")):
            continue
        r = subprocess.run(["mdb_stat", "-a", "-f", "-e", d], capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError(f"mdb_stat {d}: {r.stderr}")
        prefix = "rollups: " if d.endswith("rollups") else ""
        name, psize, used = None, 4096, 0
        for line in r.stdout.splitlines():
            line = line.strip()
            if line.startswith("Page size:"):
                psize = int(line.split()[-1])
            elif line.startswith("Number of pages used:"):
                used = int(line.split()[-1])
            elif line == "Freelist Status":
                name = "(lmdb: freelist)"
            elif line.startswith("Status of "):
                name = prefix + line[len("Status of "):]
                name = "(lmdb: main DB)" if name.endswith("Main DB") else name
            elif line.startswith(("Branch pages:", "Leaf pages:", "Overflow pages:")) and name:
                out[name] = out.get(name, 0) + int(line.split()[-1]) * psize
            elif line.startswith("Free pages:"):
                out["(lmdb: free pages)"] = out.get("(lmdb: free pages)", 0) + int(line.split()[-1]) * psize
        in_pages = (used + 2) * psize     # + the two meta pages
        alloc = dir_bytes(d)
        out["(file beyond used pages, lock.mdb)"] = out.get("(file beyond used pages, lock.mdb)", 0) + alloc - in_pages
    return out


def run_ember(h, a, shape, tmp):
    """Backfills one generator's data into a fresh ember and measures it."""
    kept = kept_backfill(a)
    now_ms = kept["now_ms"] if kept else h.now_ms()
    t0 = time.monotonic()
    jobs, expected = make_jobs(a, now_ms, shape)
    samples = len(jobs) * a.stacks
    print(f"[{shape}] {a.hours} h x {a.pods} pods, one profile per pod every {a.interval} s, "
          f"{a.stacks} stacks each: {len(jobs):,} profiles, {samples:,} samples "
          f"(generated in {time.monotonic() - t0:.1f} s)", flush=True)
    data_dir = a.keep or os.path.join(tmp, f"ember-data-{shape}")
    srv = h.Ember(data_dir=data_dir, log_level="warn", args=a.ember_arg)
    srv.owns_dir = False
    srv.start()
    try:
        t0 = time.monotonic()
        if kept:
            print(f"  ember: reusing the backfill in {a.keep} (times below exclude it)")
        else:
            errs = backfill(srv.port, ingest_path, jobs, a.conns)
            if errs:
                print(f"  ember: {len(errs)} failed requests, first: {errs[0]}")
        total = wait_stored(h, srv, now_ms, expected)
        ingest_s = time.monotonic() - t0
        if a.keep and not kept and total == expected:
            with open(a.keep + ".bench.json", "w") as f:
                json.dump(dict(backfill_key(a), now_ms=now_ms), f)
        waited = wait_summaries(h, srv.port, 600)
        res = run_queries(h, srv.port, now_ms, a, srv.proc.pid)
        res["ingest"] = (ingest_s, waited, total)
        res["disk"] = dir_bytes(data_dir)
        res["tables"] = block_breakdown(data_dir)
        res["samples"] = samples
        return res, jobs, expected, now_ms
    finally:
        srv.cleanup()
        if not a.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--pods", type=int, default=10)
    ap.add_argument("--interval", type=int, default=15, help="seconds between a pod's profiles")
    ap.add_argument("--stacks", type=int, default=500)
    ap.add_argument("--variants", type=int, default=32, help="distinct random profiles per pod")
    ap.add_argument("--shape", choices=("tree", "random", "both"), default="tree",
                    help="tree: shared-prefix stacks (Corpus); random: the held-out generator "
                         "(RandomCorpus, high-cardinality labels); both: one after the other")
    ap.add_argument("--label-values", type=int, default=200,
                    help="random shape: distinct values of its per-profile `endpoint` label")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--month", action="store_true", help="also time a 30-day flame graph")
    ap.add_argument("--pyroscope", metavar="BIN")
    ap.add_argument("--ember-arg", action="append", default=[], metavar="ARG")
    ap.add_argument("--keep", metavar="DIR", help="use this data dir and keep it (one shape only)")
    a = ap.parse_args()
    shapes = ["tree", "random"] if a.shape == "both" else [a.shape]
    if a.keep and len(shapes) > 1:
        ap.error("--keep takes one --shape")
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
    import harness as h

    tmp = tempfile.mkdtemp(prefix="ember-bench-scale-")
    try:
        results = {}
        for shape in shapes:
            res, jobs, expected, now_ms = run_ember(h, a, shape, tmp)
            results[f"ember {shape}"] = res
        if a.pyroscope:   # the last shape's requests
            py = Pyroscope(a.pyroscope, h, tmp).start()
            try:
                t0 = time.monotonic()
                errs = backfill(py.port, ingest_path, jobs, a.conns)
                if errs:
                    print(f"  pyroscope: {len(errs)} failed requests, first: {errs[0]}")
                total = wait_stored(h, py, now_ms, expected)
                ingest_s = time.monotonic() - t0
                waited = py.wait_compacted()   # compaction settled: the blocks queries read
                res = run_queries(h, py.port, now_ms, a, py.proc.pid)
                res["ingest"] = (ingest_s, waited, total)
                res["disk"] = py.disk()
                res["live"] = py.live_disk()
                res["bucket"] = py.bucket_disk()
                res["metastore"] = py.metastore_disk()
                res["samples"] = len(jobs) * a.stacks
                results[f"pyroscope {shapes[-1]}"] = res
            finally:
                py.stop()
        report(results, a)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def backfill_key(a):
    return {k: getattr(a, k) for k in ("hours", "pods", "interval", "stacks", "variants", "seed",
                                       "shape", "label_values")}


def kept_backfill(a):
    """The record of a complete earlier backfill into --keep DIR with the same
    data arguments, or None."""
    if not a.keep or not os.path.isdir(a.keep):
        return None
    try:
        with open(a.keep + ".bench.json") as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    return rec if all(rec.get(k) == v for k, v in backfill_key(a).items()) else None


def wait_stored(h, srv, now_ms, expected):
    """Waits until SelectSeries sums every profile's value (the writer drained)."""
    deadline = time.monotonic() + 1800
    step = 3600 * 1000
    start = now_ms - 40 * 24 * HOUR_MS
    last, changed = None, time.monotonic()
    while time.monotonic() < deadline:
        m = srv.q("SelectSeries", profile_typeID=PTYPE, label_selector=f'{{service_name="{APP}"}}',
                  start=start, end=start + 42 * 24 * step, step=step / 1000.0)
        total = int(sum(pt.value for s in m.series for pt in s.points))
        if total != last:
            last, changed = total, time.monotonic()
        if last == expected or time.monotonic() - changed > 120:   # done, or stuck short
            break
        time.sleep(0.5)
    if last != expected:
        print(f"  WARNING: stored total {last} != sent {expected}")
    return last


def report(results, a):
    names = list(results)
    width = max(18, max(len(n) for n in names) + 2)
    print(f"{'':<36}" + "".join(f"{n:>{width}}" for n in names))

    def row(label, fn):
        print(f"{label:<36}" + "".join(f"{fn(results[n]):>{width}}" for n in names))
    row("backfill + drain (s)", lambda r: f"{r['ingest'][0]:.1f}")
    row("  then summaries, compaction (s)", lambda r: f"{r['ingest'][1]:.1f}")
    for k in ("hour", "day", "week", "day, one pod", "30 days"):
        if k in results[names[0]]:
            row(f"flame graph, {k} (ms)", lambda r, k=k: f"{r[k][0]:.1f}")
    row("SelectSeries, day, by pod, 60 s (ms)", lambda r: f"{r['series'][0]:.1f}")
    row("SelectSeries, week, by pod, 60 s (ms)", lambda r: f"{r['series, week'][0]:.1f}")
    row("disk bytes per sample", lambda r: f"{r['disk'] / r['samples']:.2f}")
    row("disk MiB", lambda r: f"{r['disk'] / 2**20:.1f}")
    if any(n.startswith("pyroscope") for n in names):
        row("  object store, bytes/sample", lambda r: f"{r['bucket'] / r['samples']:.2f}" if "bucket" in r else "-")
        row("  live blocks only, bytes/sample",
            lambda r: f"{r['live'][0] / r['samples']:.2f}" if r.get("live") else "-")
        row("  live blocks / objects on disk", lambda r: f"{r['live'][1]}/{r['live'][2]}" if r.get("live") else "-")
        row("  metastore MiB", lambda r: f"{r['metastore'] / 2**20:.1f}" if "metastore" in r else "-")
    row("RSS after queries (MiB)", lambda r: f"{r['mem'][0] / 1024:.0f}" if r["mem"] else "-")
    row("  anonymous (MiB)", lambda r: f"{r['mem'][1] / 1024:.0f}" if r["mem"] else "-")
    row("  file-backed (MiB)", lambda r: f"{r['mem'][2] / 1024:.0f}" if r["mem"] else "-")
    tables = sorted({t for r in results.values() for t in r.get("tables", {})})
    if tables:
        print("where ember's bytes go (bytes per ingested sample, mdb_stat over every block):")
        for t in sorted(tables, key=lambda t: -max(r.get("tables", {}).get(t, 0) / r["samples"]
                                                   for r in results.values())):
            row(f"  {t}", lambda r, t=t: f"{r['tables'].get(t, 0) / r['samples']:.3f}" if "tables" in r else "-")
    for n, r in results.items():
        print(f"  totals ({n}): stored {r['ingest'][2]:,}, hour {r['hour'][1]:,}, day {r['day'][1]:,}, "
              f"week {r['week'][1]:,}, series sum day {r['series'][1]:,}, week {r['series, week'][1]:,}")
    if any(n.startswith("pyroscope") for n in names):
        print("  pyroscope: v2 storage, filesystem bucket; 'disk' is its whole data dir measured once "
              "compaction settled (compacted sources stay until its fixed 15-min cleanup delay); "
              "'live blocks only' counts the objects of the blocks its metastore lists; the metastore's "
              "raft WAL is preallocated in 64 MiB segments")
    for n, e in results.items():
        if not n.startswith("ember"):
            continue
        ratios = {"day/hour": e["day"][0] / e["hour"][0], "week/day": e["week"][0] / e["day"][0],
                  "bytes/sample": e["disk"] / e["samples"], "anon MiB": e["mem"][1] / 1024}
        print(f"targets ({n}):")
        for k, v in ratios.items():
            ok = v <= TARGETS[k]
            print(f"  {k:<14} {v:8.2f}   target <= {TARGETS[k]:g}   {'ok' if ok else 'MISSED'}")
    if a.hours < 168:
        print(f"  note: {a.hours} h of data; week/day is meaningful with --hours 168")


if __name__ == "__main__":
    sys.exit(main())
