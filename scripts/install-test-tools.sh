#!/usr/bin/env bash
# Installs the tools the Kubernetes chart tests need (tests/integration/test_k8s_*.py):
#   helm v3 built from the Go module proxy (go install), and kubernetes-validate
#   from PyPI in a venv. Idempotent, and quick when both are there. Both land under
#   ${EMBER_TOOLS_DIR:-$HOME/.cache/ember-test-tools}: bin/helm, venv/bin/kubernetes-validate.
set -euo pipefail

HELM_VERSION=v3.22.0
KV_VERSION=1.37.0
TOOLS=${EMBER_TOOLS_DIR:-$HOME/.cache/ember-test-tools}
mkdir -p "$TOOLS/bin"

# The newest Go on the machine: Debian's golang-go (1.19) is too old for helm 3.22.
newest_go() {
  local g v best="" best_v=""
  for g in /usr/local/go/bin/go $(which -a go 2>/dev/null); do
    [ -x "$g" ] || continue
    v=$("$g" env GOVERSION 2>/dev/null) || continue
    v=${v#go}
    if [ -z "$best_v" ] || [ "$(printf '%s\n%s\n' "$best_v" "$v" | sort -V | tail -n1)" != "$best_v" ]; then
      best=$g best_v=$v
    fi
  done
  echo "$best"
}

GO=$(newest_go)
helm_ok() {
  [ -x "$TOOLS/bin/helm" ] && [ -n "$GO" ] &&
    "$GO" version -m "$TOOLS/bin/helm" 2>/dev/null | grep -q "helm.sh/helm/v3[[:space:]]*$HELM_VERSION"
}
if ! helm_ok; then
  if [ -z "$GO" ]; then
    echo "install-test-tools: no Go toolchain found (helm is built with go install)" >&2
    exit 1
  fi
  echo "install-test-tools: helm $HELM_VERSION with $("$GO" version)"
  GOBIN="$TOOLS/bin" GOTOOLCHAIN=local CGO_ENABLED=0 "$GO" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
fi

kv_ok() {
  [ -x "$TOOLS/venv/bin/python" ] &&
    [ "$("$TOOLS/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("kubernetes-validate"))' 2>/dev/null)" = "$KV_VERSION" ]
}
if ! kv_ok; then
  echo "install-test-tools: kubernetes-validate $KV_VERSION"
  rm -rf "$TOOLS/venv"
  /usr/bin/python3 -m venv "$TOOLS/venv"
  "$TOOLS/venv/bin/python" -m pip install -q --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi
