#!/usr/bin/env bash
# Usage: scripts/check-tidy.sh BUILD_DIR
#
# Runs clang-tidy, with the checks in .clang-tidy (every one an error), over
# every project .c file listed in BUILD_DIR/compile_commands.json, in
# parallel (TIDY_JOBS, default nproc). Generated code (protobuf-c output,
# anything under BUILD_DIR), sources outside the repository (llhttp) and the
# BPF program (*.bpf.c, built by its own clang rule) are skipped; project
# headers are checked through the files that include them.
# Prints nothing and exits 0 when clean; otherwise prints the findings and
# exits 1. BUILD_DIR must be configured (cmake writes compile_commands.json);
# files generated at build time (proto-gen, vmlinux.h, skeletons) must exist,
# so build it first.
set -euo pipefail

if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
fi
root=$(git rev-parse --show-toplevel)
build=$(cd "$1" && pwd -P)
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
    echo "check-tidy: no $db (configure with cmake -S . -B $1 first)" >&2
    exit 2
fi
tidy=${CLANG_TIDY:-clang-tidy}
command -v "$tidy" >/dev/null || {
    echo "check-tidy: $tidy not found (scripts/install-deps.sh installs clang-tidy)" >&2
    exit 2
}

mapfile -t files < <(python3 - "$db" "$root" "$build" <<'EOF'
import json, os, sys
db, root, build = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
seen = set()
for e in json.load(open(db)):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if not f.startswith(root + os.sep) or f.startswith(build + os.sep):
        continue
    if f.endswith(".bpf.c") or f.endswith(".pb-c.c") or not f.endswith(".c"):
        continue
    if f not in seen:
        seen.add(f)
        print(f)
EOF
)
if [ ${#files[@]} -eq 0 ]; then
    echo "check-tidy: no project .c files in $db" >&2
    exit 2
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
jobs=${TIDY_JOBS:-$(nproc)}
# One log per file, so parallel output never interleaves; a file whose
# clang-tidy fails (a finding, or a file that does not parse) leaves a .bad mark.
# A finding in a header is printed once, not once per file that includes it.
printf '%s\0' "${files[@]}" | xargs -0 -P "$jobs" -I{} sh -c '
    log="$1/$(printf %s "$2" | tr / _)"
    "$3" -p "$4" --quiet --header-filter="^$5/(libcommon|services|tests|bench)/" "$2" \
        >"$log" 2>&1 || touch "$log.bad"' sh "$logs" {} "$tidy" "$build" "$root"

bad=$(find "$logs" -name '*.bad' | wc -l)
if [ "$bad" -ne 0 ]; then
    for m in "$logs"/*.bad; do
        cat "${m%.bad}"
    done | grep -Ev '^[0-9]+ (warnings?|errors?)( and [0-9]+ (warnings?|errors?))? generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Error while processing' |
        sed "s|^$root/||" |
        awk '/^[^ ]+:[0-9]+:[0-9]+: (warning|error):/ { skip = seen[$0]++ } !skip'
    echo "check-tidy: clang-tidy failed on $bad of ${#files[@]} files (checks in .clang-tidy)" >&2
    exit 1
fi
