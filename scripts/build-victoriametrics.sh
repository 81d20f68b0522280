#!/usr/bin/env bash
# Builds VictoriaMetrics single-node (Apache-2.0) from the Go module proxy into
# a cache dir: the Prometheus remote-write receiver of the recording-rules test
# (issue 29), queried back with PromQL. Cached: skipped when present. Built
# inside a writable copy of the module (as build-seaweedfs.sh, for the same
# reason: the module's own go.mod must apply). Prints the binary's path.
set -euo pipefail

VERSION="${VICTORIAMETRICS_VERSION:-v1.151.0}"
MODULE=github.com/VictoriaMetrics/VictoriaMetrics
CACHE="${EMBER_CACHE:-$HOME/.cache/ember}"
OUT="$CACHE/victoria-metrics-$VERSION/victoria-metrics"

if [ -x "$OUT" ]; then
	echo "$OUT"
	exit 0
fi
command -v go >/dev/null || {
	echo "build-victoriametrics: go is not installed" >&2
	exit 1
}

DIR=$(go mod download -json "$MODULE@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
WORK=$(mktemp -d)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
cp -r "$DIR" "$WORK/src"
chmod -R u+w "$WORK/src"
mkdir -p "$(dirname "$OUT")"
(cd "$WORK/src/app/victoria-metrics" && GOFLAGS=-mod=mod nice go build -o "$OUT.tmp" .)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
