#!/usr/bin/env bash
# Builds VictoriaMetrics single-node (Apache-2.0) from the Go module proxy,
# cached: the Prometheus remote-write receiver of the recording-rules test
# (issue 29), queried back with PromQL. Prints the path of the binary.
set -euo pipefail
exec "$(dirname "$0")/build-go-module.sh" github.com/VictoriaMetrics/VictoriaMetrics \
	"${VICTORIAMETRICS_VERSION:-v1.151.0}" app/victoria-metrics victoria-metrics
