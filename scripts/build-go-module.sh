#!/usr/bin/env bash
# Builds one command of a Go module fetched from the Go module proxy into a
# cache dir, for the test servers built that way (build-seaweedfs.sh,
# build-victoriametrics.sh). Cached: skipped when present. A module's go.mod
# may carry replace directives that only apply when building inside the
# module, so `go install mod@ver` is wrong; the downloaded (read-only) module
# dir is copied somewhere writable and `go build` runs inside it.
#   build-go-module.sh MODULE VERSION PACKAGE_DIR BINARY_NAME
# Prints the path of the binary on success.
set -euo pipefail

MODULE=$1 VERSION=$2 PKG=$3 NAME=$4
CACHE="${EMBER_CACHE:-$HOME/.cache/ember}"
OUT="$CACHE/$NAME-$VERSION/$NAME"

if [ -x "$OUT" ]; then
	echo "$OUT"
	exit 0
fi
command -v go >/dev/null || {
	echo "build-go-module: go is not installed (building $NAME)" >&2
	exit 1
}

DIR=$(go mod download -json "$MODULE@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
WORK=$(mktemp -d)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
cp -r "$DIR" "$WORK/src"
chmod -R u+w "$WORK/src"
mkdir -p "$(dirname "$OUT")"
# GOWORK=off: a module that carries a go.work (Prometheus) would otherwise
# refuse -mod=mod; the module alone is what gets built.
(cd "$WORK/src/$PKG" && GOWORK=off GOFLAGS=-mod=mod nice go build -o "$OUT.tmp" .)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
