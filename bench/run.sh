#!/bin/sh
# Runs ember's benchmarks against an existing build (builds nothing).
# usage: bench/run.sh [BUILD_DIR] [ingest|merge|redis|ui|jfr|query|parca|h2|auth|bucket|agent|all]
# Each benchmark prints its figure beside a reference measured in the same run.
set -eu
BUILD=$(cd "${1:-build}" && pwd)
WHAT=${2:-all}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3          # Debian's python: python3-protobuf lives there
for b in "$BUILD/services/ember/ember" "$BUILD/bench/ingest_load" "$BUILD/bench/http_sink"; do
  [ -x "$b" ] || { echo "missing $b: build first (cmake --build $BUILD)" >&2; exit 2; }
done
export EMBER_BIN_DIR="$BUILD"
rc=0
case "$WHAT" in ingest|all) "$PY" "$HERE/ingest_bench.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in merge|all) "$PY" "$HERE/merge_bench.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in redis|all) "$PY" "$HERE/redis_ingest.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in ui|all) "$PY" "$HERE/ui_bench.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in jfr|all) "$PY" "$HERE/jfr_bench.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in query|all) "$PY" "$HERE/query_load.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in parca|all) "$PY" "$HERE/parca_load.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in h2|all) "$PY" "$HERE/h2_bench.py" "$BUILD" || rc=1; echo ;; esac
case "$WHAT" in auth|all) "$BUILD/bench/auth_bench" || rc=1; echo ;; esac
case "$WHAT" in bucket|all) "$PY" "$HERE/bucket_restore.py" "$BUILD" || rc=1; echo; "$PY" "$HERE/bucket_query.py" "$BUILD" || rc=1; echo ;; esac
# The agent benchmark loads eBPF: root only.
case "$WHAT" in agent|all) "$PY" "$HERE/agent_bench.py" "$BUILD" || rc=1 ;; esac
exit $rc
