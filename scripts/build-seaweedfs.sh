#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0) from the Go module proxy into a cache
# dir, for the object-store tests (issue 27). Cached: skipped when present.
# The module's go.mod carries replace directives that only apply when building
# inside the module, so `go install mod@ver` is wrong; we copy the downloaded
# (read-only) module dir somewhere writable and `go build` inside it.
# Prints the path of the binary on success.
set -euo pipefail

VERSION="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
MODULE=github.com/seaweedfs/seaweedfs
CACHE="${EMBER_CACHE:-$HOME/.cache/ember}"
OUT="$CACHE/weed-$VERSION/weed"

if [ -x "$OUT" ]; then
	echo "$OUT"
	exit 0
fi
command -v go >/dev/null || {
	echo "build-seaweedfs: go is not installed" >&2
	exit 1
}

DIR=$(go mod download -json "$MODULE@$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
WORK=$(mktemp -d)
trap 'chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
cp -r "$DIR" "$WORK/src"
chmod -R u+w "$WORK/src"
mkdir -p "$(dirname "$OUT")"
(cd "$WORK/src/weed" && GOFLAGS=-mod=mod nice go build -o "$OUT.tmp" .)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
