#!/usr/bin/env bash
# Runs the real Parca Agent (built by build-parca-agent.sh) against parca_capture_proxy.py
# while parca_burner burns CPU 3:1 in two functions, and keeps what the agent pushed (issue 28).
#
# usage: run-parca-agent-capture.sh AGENT_BINARY OUT_DIR [v2|v1] [SECONDS]
#   v2 (default): the agent's default path, unary ProfileStoreService/WriteArrow.
#   v1: --remote-store-use-v2-schema=false, the bidirectional Write stream.
#   SECONDS (default 30): the agent needs about 10 s on this loaded machine to load its BPF
#   programs before its first push (a 12 s run captured nothing); pushes then come every ~5 s.
# OUT_DIR gets the proxy's capture (calls.jsonl, *.bin), agent.log (debug level: it logs
# "Sent v2 profile with N samples" per push), agent-metrics.txt (its /metrics at the end),
# burner (the binary that ran; its symbols are the oracle's function names) and run.json.
#
# Needs root. In this sandbox (a Firecracker VM, kernel 6.18):
#  - tracefs is not mounted by default; the agent needs it, so this script mounts it at
#    /sys/kernel/tracing when it is missing.
#  - raising RLIMIT_MEMLOCK fails with EPERM even for root; build-parca-agent.sh's default
#    SANDBOX_MEMLOCK=1 patch lets the agent go on (see there). Nothing else is changed.
# Servers bind 127.0.0.1 on free ports; only the processes started here are stopped, by pid.
set -euo pipefail
AGENT=$(realpath "$1"); OUT=$(realpath -m "$2"); MODE=${3:-v2}; SECONDS_TO_RUN=${4:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/parca-agent-env.sh"
STORE_PORT=$(free_port); HTTP_PORT=$(free_port)

python3 "$HERE/parca_capture_proxy.py" --listen "127.0.0.1:$STORE_PORT" --out "$OUT" \
  > "$OUT/proxy.log" 2>&1 &
PIDS+=($!)
"$OUT/burner" & BURNER_PID=$!; PIDS+=($BURNER_PID)
ARGS=(--remote-store-address="127.0.0.1:$STORE_PORT" --remote-store-insecure
      --debuginfo-upload-disable --http-address="127.0.0.1:$HTTP_PORT" --node=capture
      --profiling-cpu-sampling-frequency=97 --log-level=debug --analytics-opt-out)
[[ $MODE == v1 ]] && ARGS+=(--remote-store-use-v2-schema=false)
"$AGENT" "${ARGS[@]}" > "$OUT/agent.log" 2>&1 & AGENT_PID=$!; PIDS+=($AGENT_PID)
STARTED=$(date -u +%FT%TZ)
sleep "$SECONDS_TO_RUN"
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" > "$OUT/agent-metrics.txt" || true
kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
python3 - "$OUT/run.json" "$AGENT" "$MODE" "$SECONDS_TO_RUN" "$BURNER_PID" "$STARTED" \
  "$("$AGENT" --version 2>/dev/null | grep -a '^parca-agent' || true)" "${ARGS[@]}" <<'PY'
import json, sys
out, agent, mode, secs, pid, started, version, *args = sys.argv[1:]
json.dump({"agent_binary": agent, "agent_version": version, "mode": mode,
           "seconds": int(secs), "started": started, "burner_pid": int(pid),
           "burner": "tests/manual/parca_burner.c, cc -g -O1",
           "agent_args": args}, open(out, "w"), indent=1)
PY
echo "captured into $OUT: $(ls "$OUT" | grep -c '\.bin$') messages"
