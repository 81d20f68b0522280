#!/usr/bin/env bash
# Builds SeaweedFS's `weed` (Apache-2.0) from the Go module proxy, cached, for
# the object-store tests (issue 27). Prints the path of the binary.
set -euo pipefail
exec "$(dirname "$0")/build-go-module.sh" github.com/seaweedfs/seaweedfs \
	"${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}" weed weed
