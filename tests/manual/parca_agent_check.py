#!/usr/bin/python3
"""Checks what the real Parca Agent pushed into ember (run-parca-agent-ember.sh, issue 28):
every WriteArrow acknowledged (the agent's own parca_agent_write_requests_total), and the
burner's two functions 3:1 within 15% through Pyroscope's querier (SelectMergeStacktraces)
and Parca's QueryService (a merged pprof). A burner frame the server could not symbolize
("burner+0x<addr>", or a pprof location's address) is named from the burner's symbol table
(`nm`); with DEBUGINFO=1 the agent uploads the burner's debug file and the flame graph names
the functions itself ("named by the server" counts those samples).
Prints JSON; exits 1 when a check fails.

usage: parca_agent_check.py --port P --burner ELF --start-ms MS --agent-metrics FILE"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness as h  # noqa: E402
import test_parca_agent_write as t  # noqa: E402

FUNCS = ("burn_three_quarters", "burn_one_quarter")


def nm_ranges(elf):
    out = {}
    for line in subprocess.run(["nm", "--defined-only", "-S", elf], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] in FUNCS + ("main",):
            lo = int(parts[0], 16)
            out[parts[3]] = (lo, lo + int(parts[1], 16))
    return out


def write_counts(path):
    counts = {}
    with open(path) as f:
        for line in f:
            m = re.match(r'parca_agent_write_requests_total\{code="([^"]+)"\} (\S+)', line)
            if m:
                counts[m.group(1)] = float(m.group(2))
    return counts


def pyroscope(srv, symbols, start, end):
    fg = srv.flamegraph(t.PTYPE, '{service_name="burner"}', start, end)
    stacks = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
    per = collections.Counter()
    for path, v in stacks.items():
        # a frame the server symbolized (from the agent's debuginfo upload) carries the
        # function's own name; one it could not shows as burner+0x<address>
        inner = [n for n in (f if f in symbols else t.burner_function(f, symbols) for f in path) if n]
        per[inner[-1] if inner else "other"] += v
        if inner and inner[-1] in path:
            per["named by the server"] += v
    return fg.total, dict(per)


def parca(srv, symbols, start, end):
    merge = (t.pb_bytes(1, f'{t.PTYPE}:delta{{comm="burner"}}'.encode()) +
             t.pb_bytes(2, t.ts(start)) + t.pb_bytes(3, t.ts(end)))
    r = srv.request("POST", f"{t.QS}/Query", t.pb_int(1, 2) + t.pb_bytes(3, merge) + t.pb_int(5, 1),
                    {"content-type": "application/proto"})
    assert r.status == 200, r.describe()
    raw = t.query_response_pprof(r.body)
    p = h.pb().profile.Profile()
    p.ParseFromString(h.gunzip_if(raw))
    strings, maps, locs = list(p.string_table), {m.id: m for m in p.mapping}, {l.id: l for l in p.location}
    per = collections.Counter()
    for s in p.sample:
        fn = "other"
        for lid in s.location_id:
            loc = locs[lid]
            if strings[maps[loc.mapping_id].filename] == "burner":
                fn = t.burner_function(f"burner+0x{loc.address:x}", symbols) or "other"
                break
        per[fn] += s.value[0]
    return sum(per.values()), dict(per)


def ratio(per):
    return per.get(FUNCS[0], 0) / max(per.get(FUNCS[1], 0), 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--burner", required=True)
    ap.add_argument("--start-ms", type=int, required=True)
    ap.add_argument("--agent-metrics", required=True)
    ap.add_argument("--agent-log")
    a = ap.parse_args()
    srv = h.Ember.__new__(h.Ember)
    srv.port = a.port
    symbols = nm_ranges(a.burner)
    end = int(time.time() * 1000) + 60_000
    out = {"agent_write_requests": write_counts(a.agent_metrics), "burner_symbols": symbols}
    if a.agent_log:
        with open(a.agent_log, errors="replace") as f:
            log = f.readlines()
        out["agent_log_errors"] = [l.strip()[:300] for l in log if "level=error" in l.lower()][:10]
        # the ones about pushing (the profiler's own, e.g. a process it cannot read, are not)
        out["agent_push_errors"] = [l for l in out["agent_log_errors"]
                                    if re.search(r"rpc error|Write|[Ss]end|report", l)]
        out["agent_rows_sent"] = sum(int(m.group(1)) for l in log
                                     for m in [re.search(r"Sent (?:v2 )?profile with (\d+) samples", l)] if m)
    out["pyroscope_total"], out["pyroscope"] = pyroscope(srv, symbols, a.start_ms - 60_000, end)
    out["parca_total"], out["parca"] = parca(srv, symbols, a.start_ms - 60_000, end)
    # every row the agent logged as sent (the agent sends value 1 per row) is stored
    out["stored_total_all_processes"] = srv.flamegraph(t.PTYPE, "{}", a.start_ms - 60_000, end).total
    out["pyroscope_ratio"], out["parca_ratio"] = ratio(out["pyroscope"]), ratio(out["parca"])
    counts = out["agent_write_requests"]
    # v2 counts its pushes; v1 (Write) does not: there no error may be logged
    # and every row sent must be stored
    pushes_ok = (counts.get("OK", 0) > 0 and all(v == 0 for k, v in counts.items() if k != "OK")
                 if counts else not out.get("agent_push_errors", [None]) and
                 out.get("agent_rows_sent") == out["stored_total_all_processes"] > 0)
    ok = (pushes_ok and
          all(abs(r / 3 - 1) <= 0.15 for r in (out["pyroscope_ratio"], out["parca_ratio"])))
    out["ok"] = ok
    print(json.dumps(out, indent=1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
