#!/usr/bin/env bash
# The whole test suite: formatting, vet, and every test with the race
# detector (unit, integration and end-to-end tests that build the binary).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi
go vet ./...
go test -race -count=1 -timeout 30m "$@" ./...
