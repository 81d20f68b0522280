#!/usr/bin/env bash
# Builds Prometheus (Apache-2.0) from the Go module proxy, cached: the second
# remote-write receiver of the recording-rules test (issue 29), run with
# --web.enable-remote-write-receiver and queried back with PromQL. Its
# module versions are v0.<3-digit minor> for Prometheus 3.<minor>; v0.316.0
# is Prometheus 3.16. Prints the path of the binary.
set -euo pipefail
exec "$(dirname "$0")/build-go-module.sh" github.com/prometheus/prometheus \
	"${PROMETHEUS_VERSION:-v0.316.0}" cmd/prometheus prometheus
