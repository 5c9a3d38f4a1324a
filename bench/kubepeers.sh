#!/usr/bin/env bash
# dnsd's kubernetes source side by side with CoreDNS's kubernetes plugin on
# one real kube-apiserver (see bench/kubepeers/main.go and the "Kubernetes
# memory" section of docs/performance.md): first answer after start, RSS
# settled and at its peak, RSS under load.
#
#   bench/kubepeers.sh [flags for bench/kubepeers...]
#       e.g. bench/kubepeers.sh -runs 3                      # 10,000 services
#            bench/kubepeers.sh -endpoints 10 -zones "cluster.local 10.in-addr.arpa"
#
# scripts/bench-deps.sh builds CoreDNS and scripts/k8s-tools.sh the
# kube-apiserver (cached in ~/.cache/dnsd). Progress goes to stderr, the
# table to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eval "$(scripts/bench-deps.sh)"
eval "$(scripts/k8s-tools.sh)"
. bench/build.sh
build_release "$tmp/dnsd" .
go build -o "$tmp/loadgen" ./bench/loadgen
go build -o "$tmp/kubepeers" ./bench/kubepeers
# This process holds the API server's etcd: on CPU 1, beside the load.
taskset -c 1 "$tmp/kubepeers" -dnsd "$tmp/dnsd" -coredns "$DNSD_COREDNS" -kube-apiserver "$DNSD_KUBE_APISERVER" \
	-loadgen "$tmp/loadgen" "$@"
