#!/usr/bin/env bash
# Installs what bench/peers.sh compares dnsd with, and prints the paths as
# shell assignments:
#
#   eval "$(scripts/bench-deps.sh)"   # sets DNSD_COREDNS, DNSD_UNBOUND, ...
#
# - Debian packages unbound, dnsperf and dnsmasq-base (apt-get, needs root)
#   when their commands are missing;
# - CoreDNS, pinned by hack/coredns/go.mod, built from the Go module proxy
#   into a cache outside the repository keyed by version (a minute or two
#   cold, at once when warm);
# - with --k8s also the kube-apiserver of scripts/k8s-tools.sh (minutes cold;
#   sets DNSD_KUBE_APISERVER).
#
# Not part of scripts/test.sh: the benchmark's peers are not test
# dependencies. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

need=()
command -v unbound >/dev/null || [ -x /usr/sbin/unbound ] || need+=(unbound)
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v dnsmasq >/dev/null || [ -x /usr/sbin/dnsmasq ] || need+=(dnsmasq-base)
command -v taskset >/dev/null || need+=(util-linux)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
	echo "bench-deps.sh: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

cd "$root/hack/coredns"
version=$(GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' github.com/coredns/coredns)
if [ -z "$version" ]; then
	echo "bench-deps.sh: no github.com/coredns/coredns version in hack/coredns/go.mod" >&2
	exit 1
fi
# Keyed by the version and by this module's files (the plugin list).
key=$(cat go.mod go.sum main.go | sha256sum | cut -c1-12)
dir="${DNSD_TOOLS_CACHE:-$HOME/.cache/dnsd}/coredns/$version-$key"
bin="$dir/coredns"
if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "bench-deps.sh: building CoreDNS $version into $dir" >&2
	tmp="$bin.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	# GOFLAGS from the caller (e.g. -race) must not leak into this build.
	# CoreDNS's own release builds are CGO_ENABLED=0 and -s -w.
	GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$tmp" .
	mv "$tmp" "$bin"
	trap - EXIT
fi
cd "$root"

path_of() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || true; }
printf 'DNSD_COREDNS=%q\n' "$bin"
printf 'DNSD_UNBOUND=%q\n' "$(path_of unbound)"
printf 'DNSD_DNSMASQ=%q\n' "$(path_of dnsmasq)"
printf 'DNSD_DNSPERF=%q\n' "$(path_of dnsperf)"
if [ "${1:-}" = --k8s ]; then
	scripts/k8s-tools.sh
fi
echo 'export DNSD_COREDNS DNSD_UNBOUND DNSD_DNSMASQ DNSD_DNSPERF'
