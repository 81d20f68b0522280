#!/usr/bin/env bash
# Installs every Debian package ember needs to build, test and benchmark.
# As root it runs apt-get; otherwise it prints the command to run.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libuv1-dev node-llhttp libprotobuf-c-dev protobuf-c-compiler liblmdb-dev lmdb-utils
  zlib1g-dev libdeflate-dev libpcre2-dev libyaml-dev libjansson-dev libzstd-dev
  libhiredis-dev libcurl4-openssl-dev libnghttp2-dev
  # the Arrow IPC reader (libcommon/arrow): LZ4_FRAME body compression
  liblz4-dev
  # the object store (libcommon/objstore): SHA-256 of every object from libcrypto
  libssl-dev
  # recording-rule series by Prometheus remote write (lc/remote_write.h): snappy blocks
  libsnappy-dev
  # HTTP/2 tests: the python h2 library and nghttp/h2load as independent clients
  python3-h2 nghttp2-client
  # tests and benchmarks: go tool pprof as the judge, a real redis-server,
  # protoc + python3-protobuf for independent encoding, clang for fuzzing
  golang-go protobuf-compiler python3 python3-protobuf redis-server
  # the zstd tool unpacks lean stream entries in the Redis tests (an independent decoder)
  zstd
  # ember-load's test parses its /metrics with the Prometheus client library
  python3-prometheus-client
  clang libclang-rt-14-dev curl jq
  # habits: scripts/check-tidy.sh and the .clang-format check
  clang-tidy clang-format
  # the eBPF agent: libbpf + libelf, bpftool (vmlinux.h, skeletons), llvm-strip;
  # linux-perf is the agent tests' independent oracle
  libbpf-dev libelf-dev bpftool llvm linux-perf
  # server-side symbols (issue 31): libdw (DWARF), libdebuginfod, and Debian's
  # debuginfod server and elfutils as the tests' independent parts
  libdw-dev libdebuginfod-dev debuginfod elfutils
  # C++ and Rust names demangled (libiberty.a, the demangler binutils uses)
  libiberty-dev
  # the web UI's browser tests and benchmark: headless Chromium driven by
  # playwright-core from npm (no browser download)
  chromium
  # the Kubernetes chart tests: a venv for kubernetes-validate, network namespaces
  # (ip netns, veth, bridge) for the simulated cluster
  python3-venv python3-yaml iproute2
  # the container image test: podman builds deploy/docker/Dockerfile from a
  # debootstrap'ed Debian 12 base (no registry is reachable)
  podman runc debootstrap fuse-overlayfs uidmap
  # make test-stress: holds both cores busy while the load-sensitive suites run
  stress-ng
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# SeaweedFS's weed for the object-store tests, built from the Go module proxy
# into ~/.cache/ember (skipped when cached; several minutes the first time).
build_weed() {
  if command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; then
    PATH="$PATH:/usr/local/go/bin" "$(dirname "$0")/build-seaweedfs.sh" >/dev/null ||
      echo "install-deps: building weed failed; test_objstore will skip (fail in CI)" >&2
  fi
}
# VictoriaMetrics, the remote-write receiver of test_recording_rules_export,
# built the same way (skipped when cached).
build_victoriametrics() {
  if command -v go >/dev/null || [ -x /usr/local/go/bin/go ]; then
    PATH="$PATH:/usr/local/go/bin" "$(dirname "$0")/build-victoriametrics.sh" >/dev/null ||
      echo "install-deps: building VictoriaMetrics failed; test_recording_rules_export will skip (fail in CI)" >&2
  fi
}

if [ ${#missing[@]} -ne 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ember needs these Debian packages; run as root:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PyPI, pinned: pyarrow is the independent Arrow IPC writer of
# tests/integration/test_arrow_ipc.py, in the venv that test uses (it installs
# the same pin itself when missing; PYARROW_VERSION there must match).
PYARROW_VERSION=26.0.1
venv="$HOME/.cache/ember-sdk/arrow-python/venv"
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$PYARROW_VERSION" ]; then
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "pyarrow==$PYARROW_VERSION" &&
    echo "$PYARROW_VERSION" > "$venv/.installed" ||
    echo "install-deps: pyarrow from PyPI failed; test_arrow_ipc will try again" >&2
fi
build_weed
build_victoriametrics
