#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, LC_FUZZ=ON: every project library is
# instrumented with coverage + ASan + UBSan) and runs each for a set time.
#
#   scripts/fuzz.sh [--seconds N] [--merge] [target ...]
#
# --seconds N  fuzzing time per target (default 20)
# --merge      fold what was found into tests/fuzz/corpus/<target>, minimized
#              with -merge=1 (what `make fuzz` does; commit the result)
# --build-only build the targets and stop (scripts/test.sh builds them while
#              other tests run)
# Targets run JOBS at a time (default nproc): each still gets N seconds.
# Without --merge the committed corpora are only read (what `make test`
# does: a short instrumented burst per target, so a parser regression that
# crashes is caught in CI). Crashes leave their input in build-fuzz/artifacts
# and make the script fail. Prints per target: edges, corpus, executions.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=20
MERGE=0
BUILD_ONLY=0
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_PER_TARGET=$2; shift 2 ;;
    --merge) MERGE=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${JOBS:-$(nproc)}

CC=clang cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLC_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target fuzz_all >/dev/null
[ "$BUILD_ONLY" = 1 ] && exit 0

if [ ${#TARGETS[@]} -eq 0 ]; then
  for src in tests/fuzz/fuzz_*.c; do
    TARGETS+=("$(basename "$src" .c | sed 's/^fuzz_//')")
  done
fi

ARTIFACTS="$BUILD/artifacts"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$ARTIFACTS"
# One target: fuzz it, maybe merge, and leave its table row in $WORK/$t.row
# or its failure report in $WORK/$t.fail (run in the background, JOBS at once).
fuzz_one() {
  local t=$1
  local bin="$BUILD/tests/fuzz_$t" corpus="tests/fuzz/corpus/$t" new="$WORK/$t"
  mkdir -p "$new" "$corpus"
  local dict=() d
  for d in "tests/fuzz/fuzz_$t.dict" "tests/fuzz/$t.dict"; do
    [ -f "$d" ] && dict=(-dict="$d")
  done
  local log="$WORK/$t.log"
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
       "$bin" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$ARTIFACTS/${t}-" "${dict[@]}" \
       "$new" "$corpus" >"$log" 2>&1; then
    { echo "fuzz_$t FAILED (input in $ARTIFACTS):"
      grep -E "ERROR|SUMMARY|runtime error" "$log" | head -20 || tail -30 "$log"; } >"$WORK/$t.fail"
    return 0
  fi
  if [ "$MERGE" = 1 ]; then
    # In place: the named seeds stay, and only the new units that add
    # coverage (minimized by libFuzzer's merge) join them.
    "$bin" -merge=1 "${dict[@]}" "$corpus" "$new" >>"$log" 2>&1
  fi
  local edges execs units bytes
  edges=$(grep -E '^#[0-9]+.*DONE' "$log" | tail -1 | sed -E 's/.*cov: ([0-9]+).*/\1/')
  execs=$(grep -E 'stat::number_of_executed_units' "$log" | tail -1 | awk '{print $2}')
  units=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  printf '%-16s %8s %8s %10s %12s\n' "$t" "${edges:-?}" "$units" "$bytes" "${execs:-?}" >"$WORK/$t.row"
}

for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
    wait -n || true
  done
  fuzz_one "$t" &
done
wait

status=0
passed=0
failed=0
printf '%-16s %8s %8s %10s %12s\n' target edges units bytes executions
for t in "${TARGETS[@]}"; do
  if [ -f "$WORK/$t.row" ]; then
    cat "$WORK/$t.row"
    passed=$((passed + 1))
  else
    cat "$WORK/$t.fail" 2>/dev/null || echo "fuzz_$t: no result"
    status=1
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
exit $status
