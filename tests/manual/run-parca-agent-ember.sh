#!/usr/bin/env bash
# Runs the real Parca Agent (built by build-parca-agent.sh) against a running ember while
# parca_burner burns CPU 3:1 in burn_three_quarters / burn_one_quarter, then checks through
# both query APIs (parca_agent_check.py) that every push succeeded and that the two functions
# come back 3:1 within 15% (issue 28).
#
# usage: run-parca-agent-ember.sh AGENT_BINARY EMBER_BINARY OUT_DIR [SECONDS] [extra agent args]
#   SECONDS (default 60): the agent needs ~10 s to load its BPF programs, then pushes every ~5 s.
#   DEBUGINFO=1 leaves the agent's debuginfo uploads on: it uploads the burner's debug file
#   through Parca's DebuginfoService and ember names the burner's frames at query time.
# The agent sends native frames unsymbolized (it leaves symbolization to the server and its
# debuginfo uploads, disabled here with --debuginfo-upload-disable), so the checker names the
# burner's frames "burner+0x<address>" by the burner's own symbol table (`nm`).
#
# The checker runs under Debian's /usr/bin/python3 (python3-h2, as the integration tests).
# Needs root. In this sandbox (see run-parca-agent-capture.sh): tracefs is mounted here when
# missing, and the agent must be built with build-parca-agent.sh's SANDBOX_MEMLOCK=1 patch
# (its memlock rlimit raise gets EPERM). Nothing in the agent's logic is changed.
# Servers bind 127.0.0.1 on free ports; only the processes started here are stopped, by pid.
set -euo pipefail
AGENT=$(realpath "$1"); EMBER=$(realpath "$2"); OUT=$(realpath -m "$3"); SECS=${4:-60}
shift $(( $# < 4 ? $# : 4 ))
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/parca-agent-env.sh"
EMBER_PORT=$(free_port); HTTP_PORT=$(free_port)

"$EMBER" --http.address="127.0.0.1:$EMBER_PORT" --data.dir="$OUT/data" > "$OUT/ember.log" 2>&1 &
PIDS+=($!)
"$OUT/burner" & PIDS+=($!)
STARTED_MS=$(date +%s%3N)
DEBUGINFO_ARGS=(--debuginfo-upload-disable)
[[ ${DEBUGINFO:-0} == 1 ]] && DEBUGINFO_ARGS=()
"$AGENT" --remote-store-address="127.0.0.1:$EMBER_PORT" --remote-store-insecure \
  "${DEBUGINFO_ARGS[@]}" --http-address="127.0.0.1:$HTTP_PORT" --node=ember-check \
  --profiling-cpu-sampling-frequency=97 --log-level=debug --analytics-opt-out "$@" \
  > "$OUT/agent.log" 2>&1 & AGENT_PID=$!; PIDS+=($AGENT_PID)
sleep "$SECS"
curl -s "http://127.0.0.1:$HTTP_PORT/metrics" > "$OUT/agent-metrics.txt" || true
kill "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true
/usr/bin/python3 "$HERE/parca_agent_check.py" --port "$EMBER_PORT" --burner "$OUT/burner" \
  --start-ms "$STARTED_MS" --agent-metrics "$OUT/agent-metrics.txt" --agent-log "$OUT/agent.log" \
  | tee "$OUT/check.json"
