#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector (unit and integration tests, and the end-to-end tests in e2e/
# that build the binary). Each phase is announced on stderr, and repeated
# with the elapsed time every 30 s while it runs (scripts/progress.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/progress.sh

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
if tools=$(scripts/k8s-tools.sh); then
	eval "$tools"
elif [ "${CI:-}" = true ]; then
	echo "scripts/k8s-tools.sh failed" >&2
	exit 1
else
	echo "warning: no kube-apiserver: the kubernetes integration tests will be skipped" >&2
fi
# The ACME test runs Pebble and lego's client, built the same way (seconds).
phase "Pebble and lego (scripts/acme-tools.sh)"
if tools=$(scripts/acme-tools.sh); then
	eval "$tools"
elif [ "${CI:-}" = true ]; then
	echo "scripts/acme-tools.sh failed" >&2
	exit 1
else
	echo "warning: no Pebble or lego: the ACME test will be skipped" >&2
fi
# The external-dns test runs external-dns's rfc2136 provider, built with the
# Go 1.27 toolchain external-dns needs (about a minute when cold).
phase "external-dns (scripts/extdns-tools.sh; about a minute when cold)"
if tools=$(scripts/extdns-tools.sh); then
	eval "$tools"
elif [ "${CI:-}" = true ]; then
	echo "scripts/extdns-tools.sh failed" >&2
	exit 1
else
	echo "warning: no extdns-once: the external-dns test will be skipped" >&2
fi
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
