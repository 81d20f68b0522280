#!/usr/bin/python3
"""HTTP/2 and OTLP ingest benchmark, every figure beside its reference from the
same run, on one ember (all-in-one) started here.

1. Push over h2c vs HTTP/1.1 keep-alive: h2load (nghttp2-client, one load
   generator for both, so the client costs the same) posts the same
   PushRequest (a CPU profile of --stacks stacks) --requests times:
     h2c:   --conns connections x --streams concurrent streams each;
     h1.1:  --conns x --streams keep-alive connections, one request at a time
            each (the same number of requests in flight).
   Prints requests/s, MB/s and the latency spread h2load reports. Every
   measurement runs on a fresh ember with an empty store: the store's write
   cost grows with what it holds, so a second run on the same data directory
   would be measured against a bigger database.
2. OTLP vs pprof ingest of the same profiles: the eBPF-profiler fixture
   (../shared/testdata/otlp/otel-ebpf-profile.pb.bin, 30 profiles) posted to
   /v1development/profiles, beside a PushRequest holding the same samples as
   pprof: one pprof per series ember stored from the OTLP request (read back
   once), so both sides store the same series (ember splits a profile by its
   string sample labels, and the profiler's thread labels make many).
   Prints requests/s and profiles/s (OTLP profiles or pprofs) for each.

usage: bench/h2_bench.py BUILD_DIR [--requests 20000] [--conns 4] [--streams 32]
Needs h2load (scripts/install-deps.sh installs nghttp2-client). Use a
RelWithDebInfo build.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

PUSH = "/push.v1.PusherService/Push"
OTLP = "/v1development/profiles"
CONNECT = ["content-type: application/proto", "connect-protocol-version: 1"]


def h2load(url, body_path, headers, n, conns, streams, h1):
    cmd = ["h2load", "-n", str(n), "-c", str(conns), "-m", str(1 if h1 else streams), "-d", body_path]
    if h1:
        cmd = ["h2load", "--h1", "-n", str(n), "-c", str(conns * streams), "-d", body_path]
    for hd in headers:
        cmd += ["-H", hd]
    r = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=900)
    out = r.stdout
    m = re.search(r"finished in ([\d.]+)(m?s), ([\d.]+) req/s, ([\d.]+)([KMG]?B)/s", out)
    ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed", out)
    st = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    lat = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", out)
    if not m or not ok:
        raise SystemExit(f"h2load failed:\n{out}\n{r.stderr}")
    return {"rps": float(m.group(3)), "ok": int(ok.group(1)), "failed": int(ok.group(2)),
            "2xx": int(st.group(1)) if st else 0, "non2xx": sum(int(st.group(i)) for i in (2, 3, 4)) if st else 0,
            "lat": lat.groups() if lat else ("?",) * 4}


def show(name, res, body_len, per_req=1):
    mbps = res["rps"] * body_len / 1e6
    print(f"  {name:<34} {res['rps']:>9.0f} req/s {res['rps'] * per_req:>10.0f} profiles/s {mbps:>7.1f} MB/s"
          f"  2xx={res['2xx']} other={res['non2xx']} failed={res['failed']}"
          f"  latency min/max/mean/sd {'/'.join(res['lat'])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--streams", type=int, default=32)
    ap.add_argument("--stacks", type=int, default=200)
    a = ap.parse_args()
    if not shutil.which("h2load"):
        raise SystemExit("h2load not found: apt-get install nghttp2-client")
    os.environ["EMBER_BIN_DIR"] = os.path.abspath(a.build_dir)
    os.environ.setdefault("EMBER_SRC_DIR", os.path.join(HERE, ".."))
    import harness as h
    from test_connect_rpcs import cpu_profile
    work = tempfile.mkdtemp(prefix="ember-h2-bench-")
    servers = []

    def fresh():
        srv = h.Ember(args=["--ingest.max-backlog-bytes=1GiB"])
        srv.start()
        servers.append(srv)
        return srv, f"http://127.0.0.1:{srv.port}"

    try:
        srv, base = fresh()
        p = h.pb()
        req = p.push.PushRequest()
        s = req.series.add()
        s.labels.add(name="service_name", value="h2-bench")
        s.labels.add(name="__name__", value="process_cpu")
        stacks = {f"main;f{i % 17};g{i};h{i * 7 % 101}": 1 + i % 5 for i in range(a.stacks)}
        s.samples.add(raw_profile=cpu_profile(stacks, h.now_ms() * 1_000_000), ID=str(uuid.uuid4()))
        push_path = os.path.join(work, "push.bin")
        with open(push_path, "wb") as f:
            f.write(req.SerializeToString())
        size = os.path.getsize(push_path)
        print(f"Push over h2c vs HTTP/1.1 keep-alive: {a.requests} requests of {size} bytes, "
              f"{a.conns * a.streams} in flight")
        h1 = h2load(fresh()[1] + PUSH, push_path, CONNECT, a.requests, a.conns, a.streams, h1=True)
        h2 = h2load(fresh()[1] + PUSH, push_path, CONNECT, a.requests, a.conns, a.streams, h1=False)
        show(f"HTTP/1.1 ({a.conns * a.streams} connections)", h1, size)
        show(f"h2c ({a.conns} conns x {a.streams} streams)", h2, size)
        print(f"  h2c / HTTP/1.1 = {h2['rps'] / h1['rps']:.2f}")

        # OTLP vs the same profiles as pprof
        otlp = h.read_testdata(os.path.join("otlp", "otel-ebpf-profile.pb.bin"))
        otlp_path = os.path.join(work, "otlp.bin")
        with open(otlp_path, "wb") as f:
            f.write(otlp)
        r = srv.request("POST", OTLP, otlp, {"Content-Type": "application/x-protobuf"})
        assert r.status == 200, r.describe()
        start, end = 1774910000000, 1774911000000
        same = p.push.PushRequest()
        n_profiles = 0
        for ptype, name in (("process_cpu:cpu:nanoseconds:cpu:nanoseconds", "process_cpu"),
                            ("off_cpu:off_cpu:nanoseconds::", "off_cpu")):
            # one pprof per stored series, so both sides store the same series
            for labels in srv.series_labels([f'{{__profile_type__="{ptype}"}}'], start=start, end=end):
                pairs = [(k, v) for k, v in labels if not k.startswith("__")]
                sel = "{" + ",".join(f"{k}={json.dumps(v)}" for k, v in pairs) + "}"
                raw = srv.merge_profile(ptype, sel, start, end)
                if not p.profile.Profile.FromString(raw).sample:
                    continue
                ser = same.series.add()
                for k, v in pairs:
                    ser.labels.add(name=k, value=v)
                ser.labels.add(name="__name__", value=name)
                ser.samples.add(raw_profile=raw)
                n_profiles += 1
        same_path = os.path.join(work, "same.bin")
        with open(same_path, "wb") as f:
            f.write(same.SerializeToString())
        n = max(200, a.requests // 20)
        print(f"OTLP vs pprof ingest of the same profiles ({n} requests each, "
              f"OTLP {len(otlp)} bytes = 30 OTLP profiles; Push {os.path.getsize(same_path)} bytes = "
              f"{n_profiles} pprofs), h2c {a.conns}x{a.streams}")
        ro = h2load(fresh()[1] + OTLP, otlp_path, ["content-type: application/x-protobuf"], n, a.conns, a.streams,
                    False)
        rp = h2load(fresh()[1] + PUSH, same_path, CONNECT, n, a.conns, a.streams, False)
        show("OTLP /v1development/profiles", ro, len(otlp), 30)
        show("Push (pprof)", rp, os.path.getsize(same_path), n_profiles)
        print(f"  OTLP / pprof = {ro['rps'] / rp['rps']:.2f}")
        print("ember peak RSS per run (MiB): " + " ".join(f"{x.rss_peak_kib() / 1024:.0f}" for x in servers))
    finally:
        for x in servers:
            x.cleanup()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
