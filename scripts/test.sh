#!/usr/bin/env bash
# Builds ember and runs every test: unit, fuzz-corpus regression and
# integration tests (real clients, go tool pprof) on a RelWithDebInfo build,
# then the unit and fuzz-regression tests again under ASan+UBSan, then a
# short libFuzzer burst per fuzz target (clang, instrumented libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

status=0
echo "== habits: layering, unique static names, banned functions, clang-format"
python3 scripts/check-layers.py || status=1
python3 scripts/check-static-names.py || status=1
./scripts/check-banned.sh || status=1
./scripts/check-format.sh || status=1

echo "== build (RelWithDebInfo, -Werror)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLC_WERROR=ON >/dev/null
cmake --build build -j "$JOBS"
python3 scripts/check-circles.py build || status=1  # habits: no circle between the files of a room

echo "== habits: clang-tidy (.clang-tidy)"
./scripts/check-tidy.sh build || status=1

echo "== build (ASan+UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLC_SANITIZE='address;undefined' \
      -DLC_WERROR=ON >/dev/null
cmake --build build-asan -j "$JOBS"

echo "== test tools (helm, kubernetes-validate) for the Kubernetes chart tests"
./scripts/install-test-tools.sh || status=1     # the k8s tests then fail; the others still run

echo "== unit + fuzz-regression tests under ASan+UBSan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$JOBS" -L 'unit|fuzz-regression') || status=1

echo "== all tests (unit, fuzz-regression, integration)"
(cd build && ctest --output-on-failure -j "$JOBS") || status=1
echo "== fuzz burst (${FUZZ_BURST_SECONDS:-10} s per target, libFuzzer + ASan + UBSan)"
JOBS=$JOBS ./scripts/fuzz.sh --seconds "${FUZZ_BURST_SECONDS:-10}" || status=1
exit $status
