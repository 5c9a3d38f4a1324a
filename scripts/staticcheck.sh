#!/usr/bin/env bash
# Runs staticcheck (pinned by hack/staticcheck/go.mod) over every module of
# the repository: the main module and the build-only modules under hack/.
# The binary is built once into a cache outside the repository, keyed by
# version (seconds cold, at once warm). Arguments replace the default
# package pattern ./... of the main module:
#
#   scripts/staticcheck.sh              # the whole repository
#   scripts/staticcheck.sh ./server/... # one package tree of the main module
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=$(cd hack/staticcheck && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' honnef.co/go/tools)
if [ -z "$version" ]; then
	echo "staticcheck.sh: no honnef.co/go/tools version in hack/staticcheck/go.mod" >&2
	exit 1
fi
dir="${DNSD_TOOLS_CACHE:-$HOME/.cache/dnsd}/staticcheck/$version"
bin="$dir/staticcheck"

if [ ! -x "$bin" ]; then
	mkdir -p "$dir"
	echo "staticcheck.sh: building staticcheck $version into $dir" >&2
	tmp="$bin.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	# GOFLAGS from the caller (e.g. -race) must not leak into this build.
	(cd hack/staticcheck && GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -o "$tmp" honnef.co/go/tools/cmd/staticcheck)
	mv "$tmp" "$bin"
	trap - EXIT
fi

if [ $# -gt 0 ]; then
	exec "$bin" "$@"
fi
status=0
"$bin" ./... || status=1
for mod in hack/*/go.mod; do
	mod=$(dirname "$mod")
	# hack/extdns needs Go 1.27 (external-dns does); this staticcheck is
	# built by the repository's Go and cannot load it.
	[ "$mod" = hack/extdns ] && continue
	# A module without Go packages of its own (a pin only) has nothing to check.
	if [ -n "$(cd "$mod" && go list ./... 2>/dev/null)" ]; then
		(cd "$mod" && "$bin" ./...) || status=1
	fi
done
exit $status
