#!/usr/bin/env bash
# Builds ember and runs every test: unit, fuzz-corpus regression and
# integration tests (real clients, go tool pprof) on a RelWithDebInfo build,
# then the unit and fuzz-regression tests again under ASan+UBSan, then a
# short libFuzzer burst per fuzz target (clang, instrumented libraries).
# On two cores the CPU-bound side work (clang-tidy, the ASan build and its
# tests, the fuzz build) runs niced beside the integration tests, which spend
# much of their time waiting; the log ends with the wall time of each phase
# and the ten slowest tests. CTEST_TIMEOUT caps a test that sets no TIMEOUT.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
CTEST_TIMEOUT=${CTEST_TIMEOUT:-1500}

# Per-phase wall times in the log: run this script again through the filter
# (Debian's python: it starts at once, so the first phases are timed right).
if [ -z "${EMBER_TEST_TIMED:-}" ]; then
    set +e
    EMBER_TEST_TIMED=1 "$0" "$@" 2>&1 | /usr/bin/python3 scripts/phase-times.py
    exit "${PIPESTATUS[0]}"
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

status=0
echo "== habits: layering, unique static names, banned functions, clang-format"
python3 scripts/check-layers.py || status=1
python3 scripts/check-static-names.py || status=1
./scripts/check-banned.sh || status=1
./scripts/check-format.sh || status=1

# Network and Go builds (helm): they overlap the C build. Cached under ~/.cache.
./scripts/install-test-tools.sh >"$logs/tools.log" 2>&1 &
tools=$!

echo "== build (RelWithDebInfo, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLC_WERROR=ON >/dev/null
cmake --build build -j "$JOBS"
python3 scripts/check-circles.py build || status=1  # habits: no circle between the files of a room

# The side work, niced so the integration tests get the CPU when they want
# it. Its log is printed once it is done.
side_work() {
    renice -n 10 -p "$BASHPID" >/dev/null
    local rc=0 t0=$SECONDS
    ./scripts/check-tidy.sh build || rc=1
    echo "-- clang-tidy: $((SECONDS - t0)) s" && t0=$SECONDS
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLC_SANITIZE='address;undefined' \
          -DLC_WERROR=ON >/dev/null
    cmake --build build-asan -j "$JOBS" >"$logs/asan-build.log" 2>&1 ||
        { tail -50 "$logs/asan-build.log"; return 1; }
    echo "-- ASan+UBSan build: $((SECONDS - t0)) s" && t0=$SECONDS
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure --timeout "$CTEST_TIMEOUT" -j "$JOBS" -L 'unit|fuzz-regression') || rc=1
    echo "-- unit + fuzz-regression tests under ASan+UBSan: $((SECONDS - t0)) s" && t0=$SECONDS
    JOBS=$JOBS ./scripts/fuzz.sh --build-only || rc=1
    echo "-- fuzz build: $((SECONDS - t0)) s"
    return $rc
}
echo "== side work started: clang-tidy, ASan+UBSan build and tests, fuzz build (niced)"
side_work >"$logs/side.log" 2>&1 &
side=$!

echo "== test tools (helm, kubernetes-validate) for the Kubernetes chart tests"
wait $tools || status=1     # the k8s tests then fail; the others still run
cat "$logs/tools.log"

echo "== all tests (unit, fuzz-regression, integration)"
(cd build && ctest --output-on-failure --timeout "$CTEST_TIMEOUT" -j "$JOBS") || status=1

echo "== side work: habits: clang-tidy (.clang-tidy); ASan+UBSan unit + fuzz-regression tests"
wait $side || status=1
cat "$logs/side.log"

echo "== fuzz burst (${FUZZ_BURST_SECONDS:-10} s per target, $JOBS at a time, libFuzzer + ASan + UBSan)"
JOBS=$JOBS ./scripts/fuzz.sh --seconds "${FUZZ_BURST_SECONDS:-10}" || status=1

echo "== the ten slowest tests (seconds, from ctest's timings)"
sort -k3 -g -r build/Testing/Temporary/CTestCostData.txt 2>/dev/null | grep -v '^---' | head -10 |
    awk '{printf "%8.1f  %s\n", $3, $1}' || true
exit $status
