#!/usr/bin/env bash
# Runs make targets one after another, stopping at the first that fails, and ends with how long
# each took (make test-all uses it, so every CI run says where its minutes went).
#
# Usage: hack/run-targets.sh [--beside "TARGET..."] TARGET...   (MAKE may name the make to run)
#
# --beside names build targets that later TARGETs need, made meanwhile in one make at the lowest
# CPU priority: on a machine with empty caches they are built while the suites wait on
# containers, not after. Their log is $DOCKYARD_CACHE/beside.log. They take nothing from the
# targets (the builds lock what they make, so a target needing one waits for it or finds it
# built), and a failure there fails no run by itself: the target that needs the build makes it
# again and says why. When the targets end, that make is stopped if it still runs.
set -uo pipefail

make_cmd=${MAKE:-make}
beside=
if [ "${1:-}" = --beside ]; then
	beside=$2
	shift 2
fi
start=$(date +%s)
report=()
status=0

beside_pid=
# stop_beside stops the builds beside, if they still run (the targets ended first, or the run
# is interrupted).
stop_beside() {
	if [ -n "$beside_pid" ] && kill -0 "$beside_pid" 2>/dev/null; then
		kill -- "-$beside_pid" 2>/dev/null
		wait "$beside_pid" 2>/dev/null
		return 0
	fi
	return 1
}
trap 'stop_beside' EXIT
trap 'exit 130' INT TERM
if [ -n "$beside" ]; then
	beside_log=${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/beside.log
	mkdir -p "$(dirname "$beside_log")"
	# A session of its own, so stopping its process group stops the builds it started and
	# nothing else. Where the kernel groups sessions for scheduling (sched_autogroup_enabled),
	# the group's weight, not the processes', is what the targets compete with, so the group,
	# from inside the session, is made the lowest priority too.
	# shellcheck disable=SC2086 # the targets are words
	setsid nice -n 19 bash -c '[ ! -w /proc/self/autogroup ] || echo 19 >/proc/self/autogroup
		t0=$(date +%s); "$@"; rc=$?; echo "=== beside: exit $rc after $(($(date +%s) - t0))s"; exit $rc' \
		beside "$make_cmd" --no-print-directory $beside >"$beside_log" 2>&1 &
	beside_pid=$!
	echo "=== building beside, at the lowest priority: $beside (pid $beside_pid, log $beside_log)"
fi

for target in "$@"; do
	t0=$(date +%s)
	echo "=== make $target"
	if ! "$make_cmd" --no-print-directory "$target"; then
		status=1
	fi
	report+=("$(printf '%-18s %5ds%s' "$target" "$(($(date +%s) - t0))" "$([ "$status" = 0 ] || echo '  FAILED')")")
	[ "$status" = 0 ] || break
done

if [ -n "$beside_pid" ]; then
	if stop_beside; then
		echo "=== stopped the builds beside (pid $beside_pid): the targets ended first"
		report+=("$(printf '%-18s %6s' beside stopped)")
	else
		wait "$beside_pid"
		rc=$?
		took=$(sed -n 's/^=== beside: exit [0-9]* after \([0-9]*\)s$/\1/p' "$beside_log")
		report+=("$(printf '%-18s %5ss%s' beside "${took:-?}" "$([ "$rc" = 0 ] || echo "  (exit $rc: see $beside_log)")")")
	fi
fi
echo
echo "=== time per target"
printf '%s\n' "${report[@]}"
printf '%-18s %5ds\n' total "$(($(date +%s) - start))"
exit "$status"
