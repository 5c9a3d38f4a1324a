#!/usr/bin/env bash
# Load with faults: dnsd (non-race build) under a steady query rate while it
# is reloaded 100 times, its hosts file rotated, etcd killed and restarted
# and the upstream black-holed. Prints answered / failed / wrong (goal: 0
# failed, 0 wrong); exits 1 otherwise.
#   bench/faults.sh [duration] [qps]      (default 60s 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-60s}
qps=${2:-5000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/dnsd" .
go build -o "$tmp/faults" ./bench/faults
"$tmp/faults" -dnsd "$tmp/dnsd" -duration "$dur" -qps "$qps" -reloads 100
