#!/usr/bin/env bash
# Runs make targets one after another, stopping at the first that fails, and ends with how long
# each took (make test-all uses it, so every CI run says where its minutes went).
#
# Usage: hack/run-targets.sh [--beside "BUILD..."] [--checks "CHECK..."] TARGET...
#        (MAKE may name the make to run)
#
# Beside the TARGETs, in one session at the lowest CPU priority, it makes the BUILDs later
# TARGETs need, then runs the CHECKs: on two cores the suites leave most of the CPU idle while
# they wait on containers, and these use it instead of adding their minutes to the run.
#  - A BUILD takes nothing from the targets (builds lock what they make, so a target needing one
#    waits for it or finds it built), and its failure fails no run by itself: the target that
#    needs it builds it again and says why.
#  - A CHECK (vet, lint, fuzz: targets that need no engine) counts like a TARGET: its failure
#    fails the run and its output is printed. One the session has not finished when the TARGETs
#    end runs then, in the foreground.
# The session is stopped when the TARGETs end. Its logs are in $DOCKYARD_CACHE/beside/.
set -uo pipefail

make_cmd=${MAKE:-make}
dir=${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/beside

# Inside the session: the builds, then each check, each with its log and "EXIT SECONDS" in
# $dir/NAME.rc once it has ended.
if [ "${1:-}" = --session ]; then
	builds=$2
	shift 2
	# Where the kernel groups sessions for scheduling (sched_autogroup_enabled), the group's
	# weight, not the processes', is what the targets compete with: lower it too.
	[ ! -w /proc/self/autogroup ] || echo 19 >/proc/self/autogroup
	run() { # NAME TARGET...
		local name=$1 t0
		shift
		t0=$(date +%s)
		# shellcheck disable=SC2068 # the targets are words
		"$make_cmd" --no-print-directory $@ >"$dir/$name.log" 2>&1
		echo "$? $(($(date +%s) - t0))" >"$dir/$name.rc"
	}
	[ -z "$builds" ] || run builds "$builds"
	for check in "$@"; do run "$check" "$check"; done
	exit 0
fi

builds=
checks=
while [ $# -gt 0 ]; do
	case $1 in
	--beside) builds=$2; shift 2 ;;
	--checks) checks=$2; shift 2 ;;
	*) break ;;
	esac
done
start=$(date +%s)
report=()
status=0
row() { # NAME SECONDS [NOTE]
	report+=("$(printf '%-26s %6s%s' "$1" "$2" "${3:+  $3}")")
}

session_pid=
# stop_session stops the session beside, if it still runs (the targets ended first, or the
# run is interrupted); it says whether it did.
stop_session() {
	if [ -n "$session_pid" ] && kill -0 "$session_pid" 2>/dev/null; then
		kill -- "-$session_pid" 2>/dev/null
		wait "$session_pid" 2>/dev/null
		return 0
	fi
	return 1
}
trap 'stop_session' EXIT
trap 'exit 130' INT TERM
if [ -n "$builds$checks" ]; then
	rm -rf "$dir"
	mkdir -p "$dir"
	# A session of its own, so stopping its process group stops what it started and nothing else.
	# shellcheck disable=SC2086 # the checks are words
	setsid nice -n 19 "$0" --session "$builds" $checks </dev/null >"$dir/session.log" 2>&1 &
	session_pid=$!
	echo "=== beside, at the lowest priority (pid $session_pid, logs in $dir): builds: ${builds:-none}; checks: ${checks:-none}"
fi

for target in "$@"; do
	t0=$(date +%s)
	echo "=== make $target"
	if ! "$make_cmd" --no-print-directory "$target"; then
		status=1
	fi
	row "$target" "$(($(date +%s) - t0))s" "$([ "$status" = 0 ] || echo FAILED)"
	[ "$status" = 0 ] || break
done

if [ -n "$session_pid" ]; then
	stop_session && echo "=== stopped what ran beside (pid $session_pid): the targets ended first"
	if [ -n "$builds" ]; then
		if [ -f "$dir/builds.rc" ]; then
			read -r rc took <"$dir/builds.rc"
			row "builds beside" "${took}s" "$([ "$rc" = 0 ] || echo "exit $rc, the targets built what they needed: $dir/builds.log")"
		else
			row "builds beside" stopped
		fi
	fi
	for check in $checks; do
		if [ -f "$dir/$check.rc" ]; then
			read -r rc took <"$dir/$check.rc"
			if [ "$rc" != 0 ]; then
				status=1
				echo "=== make $check (beside) failed (exit $rc); its output ($dir/$check.log):"
				cat "$dir/$check.log"
			fi
			row "$check (beside)" "${took}s" "$([ "$rc" = 0 ] || echo FAILED)"
		elif [ "$status" = 0 ]; then
			t0=$(date +%s)
			echo "=== make $check (not finished beside)"
			"$make_cmd" --no-print-directory "$check" || status=1
			row "$check" "$(($(date +%s) - t0))s" "$([ "$status" = 0 ] || echo FAILED)"
		else
			row "$check" "not run"
		fi
	done
fi
echo
echo "=== time per target"
printf '%s\n' "${report[@]}"
printf '%-26s %5ds\n' total "$(($(date +%s) - start))"
exit "$status"
