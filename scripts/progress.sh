# Progress lines for long scripts, sourced (scripts/test.sh):
#
#   . scripts/progress.sh
#   phase "go vet"     # prints "test.sh: go vet, 0s elapsed" on stderr
#
# Sourcing it starts a background ticker that repeats the current phase
# with the time since the start, "NAME: PHASE, ELAPSED elapsed", every
# DNSD_PROGRESS_EVERY seconds (default 30), so that a long phase is never
# silent. It sets the EXIT trap, which stops the ticker (INT and TERM exit
# through it); a script killed outright leaves a ticker that ends at its
# next tick, when it finds the script gone. Progress goes to stderr only:
# what the phases print on stdout is unchanged.

progress_name=${0##*/}
progress_t0=$(date +%s)
progress_file=$(mktemp "${TMPDIR:-/tmp}/progress.XXXXXX")
echo "starting" >"$progress_file"

progress_elapsed() {
	local s=$(($(date +%s) - progress_t0))
	if [ "$s" -ge 60 ]; then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "$s"
	fi
}

# phase NAME...: the current phase, printed at once and at every tick.
phase() {
	printf '%s\n' "$*" >"$progress_file"
	echo "$progress_name: $*, $(progress_elapsed) elapsed" >&2
}

progress_tick() {
	local parent=$1 p
	# sleep holds no descriptor of the script's: a pipe reading its
	# output closes when the script and this loop are gone.
	while sleep "${DNSD_PROGRESS_EVERY:-30}" </dev/null >/dev/null 2>&1; do
		kill -0 "$parent" 2>/dev/null || exit 0
		p=$(cat "$progress_file" 2>/dev/null) || exit 0
		echo "$progress_name: $p, $(progress_elapsed) elapsed" >&2
	done
}

progress_stop() {
	if [ -n "${progress_pid:-}" ]; then
		kill "$progress_pid" 2>/dev/null || true
		wait "$progress_pid" 2>/dev/null || true
		progress_pid=
	fi
	rm -f "$progress_file"
}

progress_tick $$ &
progress_pid=$!
trap progress_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
