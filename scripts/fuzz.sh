#!/usr/bin/env bash
# Runs every native Go fuzz target of the repository (func FuzzX(f
# *testing.F) in a _test.go file), one after another, each for a fixed
# time, and exits non-zero if any of them fails.
#
#   scripts/fuzz.sh                      # 30s per target
#   scripts/fuzz.sh 5m                   # 5 minutes per target
#   scripts/fuzz.sh 60s -parallel 1      # extra flags go to `go test`
#   FUZZ_ONLY='Parse' scripts/fuzz.sh    # only targets whose name matches
#
# DURATION is anything -fuzztime takes (30s, 10m, 100000x). On a shared
# or small machine pass -parallel 1 (one fuzzing worker per target).
# Minimizing each new interesting input is capped at 10s (Go's default is
# 60s, which can eat a whole short run); pass -fuzzminimizetime to change.
#
# A failing input is written by Go to testdata/fuzz/FuzzX/ in the target's
# package; `go test` replays everything there as a regression test from
# then on. Fix the bug, keep the file. The seed corpora committed there
# are replayed the same way by the ordinary test run (scripts/test.sh),
# so this script is only needed to search for new inputs.
set -uo pipefail
cd "$(dirname "$0")/.."

duration=${1:-30s}
shift || true
only=${FUZZ_ONLY:-.}
minimize="-fuzzminimizetime=10s"
case " $* " in *" -fuzzminimizetime"*) minimize="" ;; esac

# package directory <TAB> target, for every target in a tracked (or, outside
# git, any) test file.
files=$(git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go' -not -path './.git/*')
targets=$(grep -HoE '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' $files |
	sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*#\1\t\2#; s#^[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+).*#.\t\1#' |
	sort -u | awk -F'\t' -v only="$only" '$2 ~ only')
if [ -z "$targets" ]; then
	echo "fuzz.sh: no fuzz target matches '$only'" >&2
	exit 1
fi

summary=()
failed=0
while IFS=$'\t' read -r dir target; do
	pkg="./${dir#./}"
	echo "=== $target ($pkg) for $duration $*"
	start=$(date +%s)
	log=$(mktemp)
	go test -run '^$' -fuzz "^${target}\$" -fuzztime "$duration" $minimize "$@" "$pkg" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	took=$(( $(date +%s) - start ))
	# The last progress line: "fuzz: elapsed: 1m0s, execs: 123 (2/sec), new interesting: ..."
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
	rm -f "$log"
	if [ "$rc" -eq 0 ]; then
		result=ok
	else
		result=FAIL
		failed=$((failed + 1))
		echo "--- $target failed: a new failing input is saved in $dir/testdata/fuzz/$target/ (a failing seed is named above); replay: go test -run '^$target\$' $pkg"
	fi
	summary+=("$(printf '%-4s %-22s %-22s %6ss %12s execs' "$result" "$target" "$pkg" "$took" "${execs:-?}")")
done <<<"$targets"

echo
echo "fuzz.sh: $(echo "$targets" | wc -l) targets, $duration each"
printf '%s\n' "${summary[@]}"
if [ "$failed" -gt 0 ]; then
	echo "fuzz.sh: $failed target(s) failed" >&2
	exit 1
fi
