#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector (unit and integration tests, and the end-to-end tests in e2e/
# that build the binary). Each phase is announced on stderr, and repeated
# with the elapsed time every 30 s while it runs (scripts/progress.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/progress.sh
# tools SCRIPT WHAT: evaluate the assignments a tools script prints; without
# them the tests that need WHAT are skipped, or fail the run in CI.
tools() {
	local out
	if out=$("$1"); then
		eval "$out"
	elif [ "${CI:-}" = true ]; then
		echo "$1 failed" >&2
		exit 1
	else
		echo "warning: no $2: the tests that need it will be skipped" >&2
	fi
}

phase "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi
# Commit subjects of at most 72 characters (skipped without a git history).
phase "commit subjects"
scripts/commit-subjects.sh
phase "go vet"
go vet ./...
# staticcheck, pinned in hack/staticcheck and built once into a cache.
phase "staticcheck"
scripts/staticcheck.sh
# The release tools are a module of their own (hack/release-tools).
phase "release tools (go vet, go test)"
(cd hack/release-tools && go vet ./... && go test -count=1 ./...)

# The kubernetes tests run a real kube-apiserver, built from the Go module
# proxy once and cached outside the repository (about 12 minutes on 2 cores
# the first time).
if scripts/k8s-tools.sh --cached; then
	phase "kube-apiserver (cached)"
else
	phase "building kube-apiserver (cold: about 12 minutes on 2 cores)"
fi
tools scripts/k8s-tools.sh kube-apiserver
# The ACME test runs Pebble and lego's client, built the same way (seconds).
phase "Pebble and lego (scripts/acme-tools.sh)"
tools scripts/acme-tools.sh "Pebble or lego"
# The external-dns test runs external-dns's rfc2136 provider, built with the
# Go 1.27 toolchain external-dns needs (about a minute when cold).
phase "external-dns (scripts/extdns-tools.sh; about a minute when cold)"
tools scripts/extdns-tools.sh extdns-once
phase "go test -race ./..."
go test -race -count=1 -timeout 30m "$@" ./...

# A smoke run of the side-by-side benchmark (bench/peers.sh: one short run of
# one scenario against every peer), only on request: it needs the peers that
# scripts/bench-deps.sh installs and takes about a minute.
if [ "${DNSD_BENCH_SMOKE:-}" = 1 ]; then
	phase "benchmark smoke run"
	bench/peers.sh 1s 1 -scenarios hosts -strict
fi
phase "done"
