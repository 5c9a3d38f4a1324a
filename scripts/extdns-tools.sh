#!/usr/bin/env bash
# Builds what the external-dns end-to-end test runs (pinned by
# hack/extdns/go.mod): extdns-once, external-dns's rfc2136 provider, TXT
# registry and plan driven once against a cluster. external-dns v0.23.0
# needs Go 1.27, so it is built with that toolchain, which the go command
# fetches from the module proxy. The binary goes into a cache outside the
# repository, keyed by version; its path is printed as a shell assignment:
#
#   eval "$(scripts/extdns-tools.sh)"   # sets DNSD_EXTDNS
#
# About a minute when cold (the toolchain and the modules), at once when
# warm. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/../hack/extdns"

export GOTOOLCHAIN=go1.27.2 GOFLAGS=-mod=readonly # the caller's GOFLAGS (e.g. -race) must not leak in
version=$(go list -m -f '{{.Version}}' sigs.k8s.io/external-dns)
if [ -z "$version" ]; then
	echo "extdns-tools.sh: no sigs.k8s.io/external-dns version in hack/extdns/go.mod" >&2
	exit 1
fi
dir="${DNSD_TOOLS_CACHE:-$HOME/.cache/dnsd}/extdns/$version-$(sha256sum main.go go.sum | sha256sum | cut -c1-12)"
if [ ! -x "$dir/extdns-once" ]; then
	mkdir -p "$dir"
	echo "extdns-tools.sh: building extdns-once (external-dns $version, $GOTOOLCHAIN) into $dir" >&2
	CGO_ENABLED=0 go build -trimpath -o "$dir/extdns-once.tmp.$$" .
	mv "$dir/extdns-once.tmp.$$" "$dir/extdns-once"
fi
printf 'DNSD_EXTDNS=%q\nexport DNSD_EXTDNS\n' "$dir/extdns-once"
