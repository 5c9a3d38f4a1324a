#!/usr/bin/env bash
# Builds what the ACME end-to-end test runs (pinned by hack/acme/go.mod):
# Pebble, the ACME test server, and acme-dns01, lego's ACME client with its
# RFC 2136 provider. Both go into a cache outside the repository, keyed by
# their versions; the paths are printed as shell assignments:
#
#   eval "$(scripts/acme-tools.sh)"   # sets DNSD_PEBBLE, DNSD_PEBBLE_CERTS, DNSD_ACME_CLIENT
#
# Seconds when cold (a few MB of modules), at once when warm. Progress goes
# to stderr.
set -euo pipefail
cd "$(dirname "$0")/../hack/acme"

export GOFLAGS=-mod=readonly # the caller's (e.g. -race) must not leak in
pebble=$(go list -m -f '{{.Version}}' github.com/letsencrypt/pebble/v2)
lego=$(go list -m -f '{{.Version}}' github.com/go-acme/lego/v5)
if [ -z "$pebble" ] || [ -z "$lego" ]; then
	echo "acme-tools.sh: no pebble or lego version in hack/acme/go.mod" >&2
	exit 1
fi
dir="${DNSD_TOOLS_CACHE:-$HOME/.cache/dnsd}/acme/pebble-$pebble-lego-$lego-$(sha256sum main.go | cut -c1-12)"
if [ ! -x "$dir/pebble" ] || [ ! -x "$dir/acme-dns01" ]; then
	mkdir -p "$dir"
	echo "acme-tools.sh: building pebble $pebble and acme-dns01 (lego $lego) into $dir" >&2
	CGO_ENABLED=0 go build -trimpath -o "$dir/pebble.tmp.$$" github.com/letsencrypt/pebble/v2/cmd/pebble
	CGO_ENABLED=0 go build -trimpath -o "$dir/acme-dns01.tmp.$$" .
	mv "$dir/pebble.tmp.$$" "$dir/pebble"
	mv "$dir/acme-dns01.tmp.$$" "$dir/acme-dns01"
fi
# Pebble's test certificates (its TLS listener's, and the CA that signed it)
# come with its module.
go mod download github.com/letsencrypt/pebble/v2
certs="$(go list -m -f '{{.Dir}}' github.com/letsencrypt/pebble/v2)/test/certs"
printf 'DNSD_PEBBLE=%q\nDNSD_PEBBLE_CERTS=%q\nDNSD_ACME_CLIENT=%q\nexport DNSD_PEBBLE DNSD_PEBBLE_CERTS DNSD_ACME_CLIENT\n' "$dir/pebble" "$certs" "$dir/acme-dns01"
