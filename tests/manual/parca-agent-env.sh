# Sourced by run-parca-agent-capture.sh and run-parca-agent-ember.sh (issue 28): what both
# need before the agent starts. Expects OUT and HERE set; defines free_port, PIDS and an EXIT
# trap that stops only the processes listed in PIDS, by pid; builds OUT/burner.
# Needs root (the agent loads eBPF programs). In this sandbox (a Firecracker VM, kernel 6.18)
# tracefs is not mounted by default and the agent needs it: it is mounted here when missing.
[[ $(id -u) == 0 ]] || { echo "must run as root (the agent loads eBPF programs)" >&2; exit 1; }
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
mkdir -p "$OUT"
cc -g -O1 -o "$OUT/burner" "$HERE/parca_burner.c"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
