#!/usr/bin/env bash
# Builds the real Parca Agent (github.com/parca-dev/parca-agent) on this machine, whose Go
# module proxy refuses several modules the agent needs (issue 28). Run here on 2026-11-28:
# agent cb46a8ea (v0.49.0-3), 6.5 min cold on the shared 2 cores, about 1 min with Go's caches warm.
#
#  1. go.opentelemetry.io/ebpf-profiler is replaced in the agent's go.mod by Parca's fork,
#     github.com/parca-dev/opentelemetry-ebpf-profiler at a pseudo-version whose last 12 hex
#     digits are the fork's commit (6f4be42a31d1 for agent cb46a8ea). The fork is not on the
#     proxy at that version, so its tree is taken from a `fetch`ed mirror with `git archive`
#     and the replace directive points at that local tree.
#  2. buf.build/gen/go/parca-dev/parca/{protocolbuffers,grpc}/go (BSR commit 5fda07223114,
#     2026-02-25 10:28) answer 403 "This module version is not available" on the proxy.
#     They are generated here from Parca's own .proto files at git commit 40b4cd18414d
#     (2026-02-25 10:27:46 UTC, "profilestore: Add unimplemented WriteArrow RPC": the BSR
#     version's timestamp, 20260225102827, is that commit's) with protoc-gen-go v1.36.11 and protoc-gen-go-grpc
#     v1.6.1 (the versions the BSR module versions name). buf puts the gRPC stubs of package
#     X in a sub-package Xgrpc; protoc-gen-go-grpc has no option for that, so the stubs are
#     generated into X and then moved into Xgrpc with a dot import of X (the stubs name the
#     message types unqualified).
#     buf.build/gen/go/prometheus/... and buf.build/gen/go/gogo/... are served by the proxy.
#  3. github.com/gnurizen/sass-table v0.0.3 and github.com/parca-dev/usdt v0.0.2 (both needed
#     by the fork) answer 403 too (the proxy's @v/list is empty for sass-table). Both
#     repositories tag those versions; the tagged trees are taken from `fetch`ed mirrors and
#     replaced in. (First run failed in `go mod tidy` with 44 "403 Forbidden" lines naming them.)
#
# Mirror quirk: the `fetch` snapshot of parca-dev/parca lacks some blobs outside proto/
# (`git archive <commit> proto` printed "invalid object ... pkg/debuginfo/testdata/...");
# archiving the tree object <commit>:proto reads nothing else.
#
# The eBPF programs: the fork commits its compiled object (support/ebpf/tracer.ebpf.amd64, an
# eBPF ELF relocatable, 1.5 MB) and embeds it with go:embed, so the profiler needs no clang.
# The agent's own uprobe service (probes/) does not commit its object: the first build failed
# with "probes/probe_bpfel.go: pattern probe_bpfel.o: no matching files found". It is built
# the way the agent's Makefile does (`go generate ./probes/` runs cilium/ebpf's bpf2go, which
# calls clang; needs libbpf-dev and linux-libc-dev, and -I/usr/include/<multiarch> for asm/).
#
# Running it in this sandbox (see run-parca-agent-capture.sh): the agent must run as root and
# tracefs must be mounted (`mount -t tracefs nodev /sys/kernel/tracing`). The fork raises
# RLIMIT_MEMLOCK to infinity before loading BPF objects (rlimit.MaximizeMemlock) and gives up
# when that fails; here even root gets EPERM (no CAP_SYS_RESOURCE; `ulimit -l unlimited`
# fails too), and the unpatched agent exits with "failed to adjust rlimit: failed to set
# temporary rlimit: operation not permitted". Kernels since 5.11 charge BPF maps to the memory
# cgroup, not to memlock, so the raise is not needed there: with SANDBOX_MEMLOCK=1 (the
# default) this script patches that one function to log a warning and go on when the raise
# returns EPERM. Nothing else in the agent or the fork is changed; SANDBOX_MEMLOCK=0 builds
# them untouched.
#
# usage: build-parca-agent.sh OUT_BINARY [AGENT_GITDIR [FORK_GITDIR [PARCA_GITDIR]]]
#   (sass-table and usdt are read from SASS_GIT / USDT_GIT, default the /work/.mirror copies)
#   the git dirs default to the `fetch` tool's mirrors under /work/.mirror; AGENT_COMMIT
#   (default HEAD of the mirror) picks the agent commit.
# needs: go, git, protoc (Debian protobuf-compiler), pip, clang, libbpf-dev. Nothing is
# installed system-wide.
set -euo pipefail
OUT=$(realpath -m "$1")
AGENT_GIT=${2:-/work/.mirror/parca-dev+parca-agent/repo}
FORK_GIT=${3:-/work/.mirror/parca-dev+opentelemetry-ebpf-profiler/repo}
PARCA_GIT=${4:-/work/.mirror/parca-dev+parca/repo}
SASS_GIT=${SASS_GIT:-/work/.mirror/gnurizen+sass-table/repo}
USDT_GIT=${USDT_GIT:-/work/.mirror/parca-dev+usdt/repo}
AGENT_COMMIT=${AGENT_COMMIT:-HEAD}
PARCA_PROTO_COMMIT=${PARCA_PROTO_COMMIT:-40b4cd18414dfde59040349fda89c55a1948e020}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT

mkdir "$W/agent" "$W/fork" "$W/parca"
git --git-dir="$AGENT_GIT" archive "$AGENT_COMMIT" | tar -x -C "$W/agent"
# the fork's commit is the last field of the pseudo-version in the agent's replace directive
FORK_COMMIT=$(awk '$1=="replace" && $2=="go.opentelemetry.io/ebpf-profiler" {print $5}' \
  "$W/agent/go.mod" | sed 's/.*-//')
echo "agent $(git --git-dir="$AGENT_GIT" rev-parse "$AGENT_COMMIT"), fork $FORK_COMMIT"
git --git-dir="$FORK_GIT" archive "$FORK_COMMIT" | tar -x -C "$W/fork"
git --git-dir="$PARCA_GIT" archive --prefix=proto/ "$PARCA_PROTO_COMMIT:proto" | tar -x -C "$W/parca"
modversion() { awk -v m="$1" '$1==m {print $2; exit}' "$W/fork/go.mod"; }
SASS=github.com/gnurizen/sass-table; SASSV=$(modversion $SASS)
USDT=github.com/parca-dev/usdt; USDTV=$(modversion $USDT)
mkdir "$W/sass" "$W/usdt"
git --git-dir="$SASS_GIT" archive "$SASSV" | tar -x -C "$W/sass"
git --git-dir="$USDT_GIT" archive "$USDTV" | tar -x -C "$W/usdt"

if [[ ${SANDBOX_MEMLOCK:-1} == 1 ]]; then
  RL=$W/fork/rlimit/rlimit.go
  OLD='	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &tmpLimit, &oldLimit); err != nil {'
  grep -qxF "$OLD" "$RL" || { echo "rlimit.go changed upstream; patch not applied" >&2; exit 1; }
  python3 - "$RL" "$OLD" <<'PY'
import sys
path, old = sys.argv[1], sys.argv[2]
new = ("\terr := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &tmpLimit, &oldLimit)\n"
       "\tif err == unix.EPERM { // sandbox patch (ember build-parca-agent.sh)\n"
       "\t\tlog.Warnf(\"memlock rlimit left as is: %v\", err)\n"
       "\t\treturn func() {}, nil\n"
       "\t}\n"
       "\tif err != nil {")
text = open(path).read()
open(path, "w").write(text.replace(old, new, 1))
PY
fi

P=buf.build/gen/go/parca-dev/parca/protocolbuffers/go
G=buf.build/gen/go/parca-dev/parca/grpc/go
PBV=$(awk '$1=="google.golang.org/protobuf"{print $2}' "$W/agent/go.mod")
GRPCV=$(awk '$1=="google.golang.org/grpc"{print $2}' "$W/agent/go.mod")
GOBIN=$W/bin go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PBV"
GOBIN=$W/bin go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1"
pip install -q --target "$W/py" googleapis-common-protos grpcio-tools # google/api/*.proto + WKT
export PATH=$W/bin:$PATH

cd "$W/parca/proto"
FILES=$(find parca google -name '*.proto' | sort)
M=""
for f in $FILES; do # the Go package names buf's managed mode gives (profilestorev1alpha1, ...)
  d=$(dirname "$f"); pkg=$(sed -n 's/^package \(.*\);/\1/p' "$f")
  last=${pkg##*.}; rest=${pkg%.*}; prev=${rest##*.}
  if [[ $last =~ ^v[0-9] ]]; then name=$prev$last; else name=$last; fi
  M="$M,M$f=$P/$d;$name"
done
M=${M#,}
mkdir -p "$W/gen/pb" "$W/gen/grpc"
protoc -I . -I "$W/py" -I "$W/py/grpc_tools/_proto" \
  --go_out="$W/gen/pb" --go_opt="module=$P,$M" \
  --go-grpc_out="$W/gen/grpc" --go-grpc_opt="module=$P,$M" $FILES
# move each X/*_grpc.pb.go into X/<name>grpc with a dot import of X (see header)
cd "$W/gen/grpc"
for f in $(find . -name '*_grpc.pb.go'); do
  d=$(dirname "$f"); d=${d#./}; name=$(sed -n 's/^package \(.*\)$/\1/p' "$f")
  mkdir -p "$d/${name}grpc"
  sed -e "s/^package $name\$/package ${name}grpc/" \
      -e "0,/^import (/s||import (\n\t. \"$P/$d\"|" "$f" > "$d/${name}grpc/$(basename "$f")"
  rm "$f"
done
printf 'module %s\n\ngo 1.23\n\nrequire (\n\tgoogle.golang.org/genproto/googleapis/api v0.0.0-20260526163538-3dc84a4a5aaa\n\tgoogle.golang.org/protobuf %s\n)\n' \
  "$P" "$PBV" > "$W/gen/pb/go.mod"
printf 'module %s\n\ngo 1.23\n\nrequire (\n\t%s v0.0.0\n\tgoogle.golang.org/grpc %s\n\tgoogle.golang.org/protobuf %s\n)\n\nreplace %s => ../pb\n' \
  "$G" "$P" "$GRPCV" "$PBV" "$P" > "$W/gen/grpc/go.mod"

cd "$W/agent"
cp go.mod go.local.mod; cp go.sum go.local.sum
sed -i '/^replace go.opentelemetry.io\/ebpf-profiler =>/d' go.local.mod
printf '\nreplace go.opentelemetry.io/ebpf-profiler => %s\nreplace %s => %s\nreplace %s => %s\n' \
  "$W/fork" "$P" "$W/gen/pb" "$G" "$W/gen/grpc" >> go.local.mod
printf 'replace %s => %s\nreplace %s => %s\n' "$SASS" "$W/sass" "$USDT" "$W/usdt" >> go.local.mod
# not `go mod tidy`: it also resolves the tests' imports, and one of those
# (github.com/open-telemetry/sig-profiling/profcheck, a test-only import of the fork) is refused
# by the proxy too; -mod=mod resolves only what the binary imports.
MULTIARCH=$(gcc -print-multiarch 2>/dev/null || true)
BPF2GO_CC=clang BPF2GO_CFLAGS="-O2 -g -Wall -Werror ${MULTIARCH:+-I/usr/include/$MULTIARCH}" \
  GOFLAGS="-mod=mod -modfile=$W/agent/go.local.mod" go generate ./probes/
VERSION=$(git --git-dir="$AGENT_GIT" describe --tags --always "$AGENT_COMMIT" 2>/dev/null || echo unknown)
COMMIT=$(git --git-dir="$AGENT_GIT" rev-parse "$AGENT_COMMIT")
go build -mod=mod -modfile=go.local.mod -trimpath \
  -ldflags="-X main.version=$VERSION -X main.commit=$COMMIT" -o "$OUT" .
echo "built $OUT ($VERSION $COMMIT)"
