#!/usr/bin/env bash
# dnsd side by side with unbound, CoreDNS, dnsmasq and the trivial reference
# server, all on the same data in one run, each server pinned to CPU 0 and
# the load generators (dnsperf and bench/loadgen) to CPU 1; prints one
# Markdown table of ratios to the reference (see bench/peers/main.go and
# docs/performance.md).
#
#   bench/peers.sh [duration] [runs] [-k8s] [flags for bench/peers...]
#       duration: each measurement's length (default 5s); runs: default 3.
#       -k8s: add the kubernetes scenario (a real kube-apiserver with 10,000
#       services; scripts/k8s-tools.sh builds it, minutes when cold).
#       e.g. bench/peers.sh 5s 3 -scenarios hosts,nxdomain -servers dnsd,unbound
#
# scripts/bench-deps.sh installs the peers first (apt-get, needs root) and
# builds CoreDNS (cached in ~/.cache/dnsd). Progress goes to stderr; the
# table to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-5s}
runs=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
args=()
k8s=false
for a in "$@"; do
	if [ "$a" = -k8s ]; then k8s=true; else args+=("$a"); fi
done

tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

eval "$(scripts/bench-deps.sh)"
if $k8s; then
	eval "$(scripts/k8s-tools.sh)"
	args=(-kube-apiserver "$DNSD_KUBE_APISERVER" "${args[@]}")
fi
. bench/build.sh
build_release "$tmp/dnsd" .
build_release "$tmp/reference" ./bench/reference
go build -o "$tmp/loadgen" ./bench/loadgen
go build -o "$tmp/peers" ./bench/peers

# The orchestrator itself waits on CPU 1, beside the load generators.
pin=()
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then pin=(taskset -c 1); fi
"${pin[@]}" "$tmp/peers" -bin "$tmp" -duration "$dur" -runs "$runs" \
	-coredns "$DNSD_COREDNS" -unbound "$DNSD_UNBOUND" -dnsmasq "$DNSD_DNSMASQ" -dnsperf "$DNSD_DNSPERF" \
	"${args[@]}" &
pid=$!
wait "$pid"
