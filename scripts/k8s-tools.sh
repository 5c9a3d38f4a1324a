#!/usr/bin/env bash
# Builds the binaries the kubernetes integration tests run (kube-apiserver,
# pinned by hack/k8s-tools/go.mod) into a cache outside the repository, keyed
# by version, and prints their paths as shell assignments:
#
#   eval "$(scripts/k8s-tools.sh)"   # sets DNSD_KUBE_APISERVER
#   scripts/k8s-tools.sh --cached     # exit 0 if built already, 1 if a build is due
#
# A cold build takes about 12 minutes on 2 cores (0.7 GB of modules, ~4 GB
# of build cache); a warm one returns at once. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/../hack/k8s-tools"

version=$(GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' k8s.io/kubernetes)
if [ -z "$version" ]; then
	echo "k8s-tools.sh: no k8s.io/kubernetes version in hack/k8s-tools/go.mod" >&2
	exit 1
fi
dir="${DNSD_TOOLS_CACHE:-$HOME/.cache/dnsd}/k8s/$version"
bin="$dir/kube-apiserver"
if [ "${1:-}" = --cached ]; then
	[ -x "$bin" ] && exit 0
	exit 1
fi

if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "k8s-tools.sh: building kube-apiserver $version into $dir (cold: about 12 minutes on 2 cores)" >&2
	tmp="$bin.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	# GOFLAGS from the caller (e.g. -race) must not leak into this build.
	GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver
	mv "$tmp" "$bin"
	trap - EXIT
fi
printf 'DNSD_KUBE_APISERVER=%q\nexport DNSD_KUBE_APISERVER\n' "$bin"
