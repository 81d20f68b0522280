#!/usr/bin/env bash
# Pyroscope's own command-line client, `profilecli`, against ember (issue 29): a manual
# check, not a CI test, because profilecli cannot be built from the Go module proxy alone
# (scripts/build-profilecli.sh says why and builds it from git mirrors).
#
# For each protocol (connect, grpc-web, grpc; over http://, so Go's transport speaks
# HTTP/1.1) it runs:
#  1. `canary-exporter --query-probe-set=all`: Pyroscope's end-to-end probe of a server
#     (every ingest path, then every query probe); one round is read from its log and every
#     "probe failed" line is a failure;
#  2. `upload` of a real pprof (shared testdata, gopprof-large.cpu) with a unique label, then
#     `query merge` of that label into a pprof file, whose cpu total `go tool pprof` reads
#     and compares with the MANIFEST.jsonl oracle (240290000000 ns);
#  3. `query exemplars profile` of the same label: a profile id must come back, and
#     `query merge --profile-id` of it must give the same total;
#  4. `recording-rules create` from a YAML file, then `get` of the id it printed (the metric
#     name must come back), `list` (the id must be listed), `delete`, and `get` again
#     (must fail: not_found).
# Prints one PASS/FAIL line per step and exits non-zero when any failed.
#
# usage: profilecli_check.sh PROFILECLI EMBER_BINARY OUT_DIR
# Servers bind 127.0.0.1 on free ports; only the processes started here are stopped, by pid.
set -uo pipefail
CLI=$(realpath "$1"); EMBER=$(realpath "$2"); OUT=$(realpath -m "$3")
TESTDATA=${TESTDATA:-/work/shared/testdata}
PPROF="$TESTDATA/pprof/gopprof-large.cpu"
WANT_CPU_NS=240290000000 # MANIFEST.jsonl: sample type cpu/nanoseconds of that file
mkdir -p "$OUT"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
FAILED=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAILED=1; }

PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
"$EMBER" --http.address="127.0.0.1:$PORT" --data.dir="$OUT/data" >"$OUT/ember.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "$URL/ready" >/dev/null && break; sleep 0.1; done

cpu_total() { # a pprof file's cpu total in ns, as go tool pprof reads it
    go tool pprof -sample_index=cpu -unit=ns -top "$1" 2>/dev/null |
        sed -n 's/.* of \([0-9]*\)ns total.*/\1/p' | head -1
}

canary() { # PROTOCOL: one round of every probe
    local proto=$1 log="$OUT/canary-$1.log" port
    # Its exemplar probe wants exactly one profile in [now - 5 s step, now + 5 s] (Pyroscope's
    # query frontend starts a series one step before `start`): the previous round's profile,
    # same series, must be older than that, as with the exporter's own 15 s period.
    sleep 6
    port=$(free_port)
    "$CLI" canary-exporter --url="$URL" --protocol="$proto" --query-probe-set=all \
        --listen-address="127.0.0.1:$port" --test-frequency=1h --test-delay=2s >"$log" 2>&1 &
    local pid=$!
    PIDS+=($pid)
    # the exporter runs its first round, then starts serving: its port answering ends the round
    for _ in $(seq 1200); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null
    local ok bad
    ok=$(grep -c 'msg="probe successful"' "$log")
    bad=$(grep -c 'msg="probe failed"' "$log")
    if [ "$bad" -eq 0 ] && [ "$ok" -gt 0 ]; then
        pass "canary-exporter $proto: $ok probes successful"
    else
        fail "canary-exporter $proto: $ok successful, $bad failed:"
        grep 'msg="probe failed"' "$log" | sed 's/^/    /'
    fi
}

upload_merge() { # PROTOCOL
    local proto=$1 run="check-$1-$RANDOM"
    "$CLI" upload --url="$URL" --protocol="$proto" --override-timestamp \
        --extra-labels=service_name="$run" "$PPROF" >"$OUT/upload-$proto.log" 2>&1 ||
        { fail "upload $proto: $(tail -1 "$OUT/upload-$proto.log")"; return; }
    "$CLI" query merge --url="$URL" --protocol="$proto" --query="{service_name=\"$run\"}" \
        --from=now-10m --to=now --output="pprof=$OUT/merge-$proto.pprof" --force \
        >"$OUT/merge-$proto.log" 2>&1 ||
        { fail "query merge $proto: $(tail -1 "$OUT/merge-$proto.log")"; return; }
    local got
    got=$(cpu_total "$OUT/merge-$proto.pprof")
    [ "$got" = "$WANT_CPU_NS" ] && pass "upload+merge $proto: cpu total $got ns" ||
        fail "upload+merge $proto: cpu total '$got', want $WANT_CPU_NS"
    exemplars "$proto" "$run"
}

exemplars() { # PROTOCOL SERVICE
    local proto=$1 run=$2 id got
    "$CLI" query exemplars profile --url="$URL" --protocol="$proto" --query="{service_name=\"$run\"}" \
        --from=now-10m --to=now --output=json >"$OUT/exemplars-$proto.json" 2>"$OUT/exemplars-$proto.log" ||
        { fail "query exemplars profile $proto: $(tail -1 "$OUT/exemplars-$proto.log")"; return; }
    id=$(grep -Eo '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}' "$OUT/exemplars-$proto.json" | head -1)
    [ -n "$id" ] || { fail "query exemplars profile $proto: no profile id"; return; }
    "$CLI" query merge --url="$URL" --protocol="$proto" --query="{service_name=\"$run\"}" \
        --from=now-10m --to=now --profile-id="$id" --output="pprof=$OUT/byid-$proto.pprof" --force \
        >"$OUT/byid-$proto.log" 2>&1 ||
        { fail "query merge --profile-id $proto: $(tail -1 "$OUT/byid-$proto.log")"; return; }
    got=$(cpu_total "$OUT/byid-$proto.pprof")
    [ "$got" = "$WANT_CPU_NS" ] && pass "exemplars+merge by id $proto: $id, cpu total $got ns" ||
        fail "exemplars+merge by id $proto: cpu total '$got', want $WANT_CPU_NS"
}

# Step 4: a recording rule's life through the CLI.
recording_rules() {
    local proto=$1 log="$OUT/rules-$1.log" id
    cat >"$OUT/rule.yaml" <<'YAML'
matchers:
  - '{ __profile_type__="process_cpu:cpu:nanoseconds:cpu:nanoseconds", region="emea"}'
metric_name: profiles_recorded_cpu_usage_function_total_gc_nanoseconds
group_by:
  - service_name
function_name: runtime.gcBgMarkWorker
YAML
    local rr=("$CLI" recording-rules)
    local at=(--url="$URL" --protocol="$proto")
    id=$("${rr[@]}" create "${at[@]}" -f "$OUT/rule.yaml" 2>"$log" | sed -n 's/.*created with id: //p')
    if [ -z "$id" ]; then fail "recording-rules $proto: create printed no id ($(tail -1 "$log"))"; return; fi
    if ! "${rr[@]}" get "${at[@]}" "$id" 2>>"$log" | grep -q profiles_recorded_cpu_usage_function_total_gc_nanoseconds; then
        fail "recording-rules $proto: get $id"; return
    fi
    if ! "${rr[@]}" list "${at[@]}" 2>>"$log" | grep -q "Rule with Id $id"; then
        fail "recording-rules $proto: list lacks $id"; return
    fi
    "${rr[@]}" delete "${at[@]}" "$id" >>"$log" 2>&1 || { fail "recording-rules $proto: delete $id"; return; }
    if "${rr[@]}" get "${at[@]}" "$id" >>"$log" 2>&1; then fail "recording-rules $proto: $id still there after delete"; return; fi
    pass "recording-rules $proto: create, get, list, delete of $id"
}

for proto in connect grpc-web grpc; do
    canary "$proto"
    upload_merge "$proto"
    recording_rules "$proto"
done
exit $FAILED
