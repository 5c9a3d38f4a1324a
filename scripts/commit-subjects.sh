#!/usr/bin/env bash
# Checks that every commit subject after 018c7da (the last commit before
# the rule) is at most 72 characters: git log's one-line form, release
# notes and mail keep a subject whole then. Merge commits are left out
# (git writes their subjects). Without a git history (a source tarball)
# the check is skipped with a message; in a shallow clone that lacks
# 018c7da, the commits the clone has are checked.
#
#   scripts/commit-subjects.sh          # every commit after 018c7da up to HEAD
#   scripts/commit-subjects.sh REV      # ... up to REV
set -euo pipefail
cd "$(dirname "$0")/.."

base=018c7da
max=72
head=${1:-HEAD}

if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "commit-subjects.sh: not a git checkout: commit subjects not checked" >&2
	exit 0
fi
range="$base..$head"
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
	if [ "$(git rev-parse --is-shallow-repository)" != true ]; then
		echo "commit-subjects.sh: $base is not in this repository's history" >&2
		exit 1
	fi
	echo "commit-subjects.sh: shallow clone without $base: checking the commits it has" >&2
	range=$head
fi

# Characters, not bytes: a subject may hold a non-ASCII sign.
export LC_ALL=C.UTF-8
long=
while read -r hash subject; do
	if [ ${#subject} -gt $max ]; then
		long+="$hash $subject (${#subject} characters)"$'\n'
	fi
done < <(git log --no-merges --format='%h %s' "$range")
if [ -n "$long" ]; then
	echo "commit-subjects.sh: commit subjects over $max characters (reword them):" >&2
	printf '%s' "$long" >&2
	exit 1
fi
