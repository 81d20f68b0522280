#!/usr/bin/env bash
# Fails when a tracked C source differs from what clang-format (.clang-format)
# makes of it; prints the files. Fix with: scripts/check-format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' | grep -v -e '^services/agent/bpf/vmlinux.h$')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=$(clang-format --dry-run "${files[@]}" 2>&1 | grep -E '^[^ :]+:[0-9]+:[0-9]+: (warning|error)' |
      cut -d: -f1 | sort -u || true)
if [ -n "$bad" ]; then
  echo "$bad"
  echo "check-format: $(echo "$bad" | wc -l) file(s) differ from clang-format; run scripts/check-format.sh --fix"
  exit 1
fi
