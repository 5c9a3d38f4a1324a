#!/usr/bin/env bash
# The benchmark: dnsd against the trivial fixed-answer miekg/dns server
# (bench/reference), in one run on this machine, server pinned to CPU 0 and
# load generator to CPU 1. Prints one line per target and the QPS ratios.
#   bench/run.sh [duration]      (default 10s)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s}
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

. bench/build.sh
build_release "$tmp/dnsd" .
build_release "$tmp/reference" ./bench/reference
go build -o "$tmp/loadgen" ./bench/loadgen

# taskset execs the command, so $! of "$pin 0 cmd &" is the server's pid.
pin=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then pin=(taskset -c); fi
on() { if [ ${#pin[@]} -gt 0 ]; then echo "${pin[@]}" "$1"; fi; }
port() { python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# One dnsd process per target, each on its own port.
hosts_port=$(port)
cat >"$tmp/hosts" <<H
10.0.0.10 db.example.internal
H
for i in $(seq 1 10000); do echo "10.1.$((i / 256)).$((i % 256)) host$i.example.internal"; done >>"$tmp/hosts"
cat >"$tmp/hosts.yaml" <<Y
listen: ["127.0.0.1:$hosts_port"]
log: {level: warn}
zones:
  example.internal:
    - hosts: {files: [$tmp/hosts]}
Y

ref_port=$(port)
results=()
measure() { # label port pid [loadgen args]
	local label=$1 p=$2 pid=$3
	shift 3
	sleep 0.5
	local line
	line=$($(on 1) "$tmp/loadgen" -addr "127.0.0.1:$p" -duration "$dur" -pid "$pid" -label "$label" "$@")
	echo "$line"
	results+=("$line")
}

$(on 0) "$tmp/reference" -addr "127.0.0.1:$ref_port" & pids+=($!)
measure reference "$ref_port" "${pids[-1]}"
kill "${pids[-1]}"

$(on 0) "$tmp/dnsd" -config "$tmp/hosts.yaml" & pids+=($!)
measure dnsd-hosts "$hosts_port" "${pids[-1]}" -name db.example.internal.
kill "${pids[-1]}"

# forward with a warm cache: the upstream is another reference server; after
# the warm-up every answer comes from dnsd's cache.
up_port=$(port)
fwd_port=$(port)
cat >"$tmp/forward.yaml" <<Y
listen: ["127.0.0.1:$fwd_port"]
log: {level: warn}
zones:
  .:
    - forward: {upstreams: ["127.0.0.1:$up_port"]}
Y
$(on 1) "$tmp/reference" -addr "127.0.0.1:$up_port" & pids+=($!)
$(on 0) "$tmp/dnsd" -config "$tmp/forward.yaml" & pids+=($!)
measure dnsd-forward "$fwd_port" "${pids[-1]}" -name www.example.com.
kill "${pids[-1]}" "${pids[-2]}"

ref_qps=$(printf '%s\n' "${results[@]}" | awk '/^reference /{sub("qps=","",$2); print $2}')
echo "--- ratio to reference (QPS; goals: in-memory >= 1.0, forward warm cache >= 0.9)"
printf '%s\n' "${results[@]}" | awk -v ref="$ref_qps" '{q=$2; sub("qps=","",q); printf "%-16s %.2f\n", $1, q/ref}'
