#!/usr/bin/env bash
# Runs make targets one after another, stopping at the first that fails, and ends with how long
# each took (make test-all uses it, so every CI run says where its minutes went).
#
# Usage: hack/run-targets.sh [--beside "BUILD..."] [--checks "CHECK..."] TARGET...
#        (MAKE may name the make to run)
#
# A TARGET of several names joined by commas (test-e2e-capi,test-other-engines) runs them at
# once: suites that wait on different containers and never touch each other's. The first one's
# output streams; the others' is printed when they end.
#
# Beside the TARGETs, in one session at the lowest CPU priority, it makes the BUILDs later
# TARGETs need, then runs the CHECKs: on two cores the suites leave most of the CPU idle while
# they wait on containers, and these use it instead of adding their minutes to the run.
#  - A BUILD takes nothing from the targets (builds lock what they make, so a target needing one
#    waits for it or finds it built), and its failure fails no run by itself: the target that
#    needs it builds it again and says why.
#  - A CHECK (lint, say: a target that needs no engine) counts like a TARGET: its failure
#    fails the run and its output is printed. One the session has not finished when the TARGETs
#    end runs then, in the foreground.
# The session is stopped when the TARGETs end. Logs of what did not run in the foreground are in
# $DOCKYARD_CACHE/beside/.
# Each foreground row also says how busy the machine's CPUs were while it ran (all of them, what
# ran beside included, from /proc/stat), and the total how many core-minutes the run used: where
# a run is CPU-bound, running more at once cannot shorten it. Every row says how much CPU its own
# processes used ("its processes N core-min": the compilers, tests and tools its make ran, not
# what an engine's daemon or a container did for them), which is where a CPU-bound run's
# minutes went.
set -uo pipefail

make_cmd=${MAKE:-make}
dir=${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/beside
ticks=$(getconf CLK_TCK)

# timed FILE COMMAND...: runs COMMAND and writes to FILE the CPU time, in clock ticks, of the
# processes it ran (cutime and cstime of the subshell that waited for them); COMMAND's status.
timed() {
	local file=$1
	shift
	(
		"$@"
		rc=$?
		read -r stat <"/proc/$BASHPID/stat"
		read -r -a f <<<"${stat##*) }"
		echo $((f[13] + f[14])) >"$file"
		exit "$rc"
	)
}
# own TICKS: TICKS of CPU time in core-minutes, to a tenth.
own() {
	local tenths=$(($1 * 10 / (ticks * 60)))
	echo "its processes $((tenths / 10)).$((tenths % 10)) core-min"
}

# Inside a session of its own: each NAME made in turn, with its log and "EXIT SECONDS TICKS" (TICKS
# the CPU time of its processes) in $dir/NAME.rc once it has ended (BUILDS, when not empty, made
# first as "builds").
# Usage: run-targets.sh --session low|normal BUILDS NAME...
if [ "${1:-}" = --session ]; then
	priority=$2 builds=$3
	shift 3
	# Where the kernel groups sessions for scheduling (sched_autogroup_enabled), the group's
	# weight, not the processes', is what the targets compete with: lower it too.
	if [ "$priority" = low ] && [ -w /proc/self/autogroup ]; then echo 19 >/proc/self/autogroup; fi
	run() { # NAME TARGET...
		local name=$1 t0 rc
		shift
		t0=$(date +%s)
		# shellcheck disable=SC2068 # the targets are words
		timed "$dir/$name.cpu" "$make_cmd" --no-print-directory $@ >"$dir/$name.log" 2>&1
		rc=$?
		echo "$rc $(($(date +%s) - t0)) $(<"$dir/$name.cpu")" >"$dir/$name.rc"
	}
	[ -z "$builds" ] || run builds "$builds"
	for name in "$@"; do run "$name" "$name"; done
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
row() { # NAME TIME [NOTE]
	report+=("$(printf '%-40s %6s%s' "$1" "$2" "${3:+  $3}")")
}
# cpu: the CPUs' busy and idle time so far, in clock ticks summed over every CPU (PROC_STAT
# names another file to read, for tests).
cpu() {
	local _ user nice system idle iowait irq softirq steal
	read -r _ user nice system idle iowait irq softirq steal _ <"${PROC_STAT:-/proc/stat}"
	echo "$((user + nice + system + irq + softirq + steal)) $((idle + iowait))"
}
# busy BUSY0 IDLE0: the share of CPU time that was busy since the cpu sample BUSY0 IDLE0;
# nothing when no clock tick has passed since (a target that failed at once).
busy() {
	local b i
	read -r b i < <(cpu)
	b=$((b - $1)) i=$((i - $2))
	[ $((b + i)) -le 0 ] || echo "CPU busy $((100 * b / (b + i)))%"
}
# note PART...: the non-empty PARTs joined by ", ".
note() {
	local out= part
	for part in "$@"; do [ -z "$part" ] || out+="${out:+, }$part"; done
	echo "$out"
}
read -r run_busy run_idle < <(cpu)

# Sessions started (their leaders' PIDs): stopped, with everything they started, when the run
# ends or is interrupted. stop PID says whether it was still running.
sessions=()
stop() {
	if kill -0 "$1" 2>/dev/null; then
		kill -- "-$1" 2>/dev/null
		wait "$1" 2>/dev/null
		return 0
	fi
	return 1
}
trap 'for p in "${sessions[@]}"; do stop "$p"; done' EXIT
trap 'exit 130' INT TERM
rm -rf "$dir"
mkdir -p "$dir"

# result NAME [WITH]: the row of something a session ran, its output printed when it failed
# (or, for a target run beside another, always); returns its exit status.
result() {
	local name=$1 with=${2:-} rc took cpu
	read -r rc took cpu <"$dir/$name.rc"
	if [ -n "$with" ] || [ "$rc" != 0 ]; then
		echo "=== make $name (beside${with:+ make $with}): exit $rc after ${took}s; its output ($dir/$name.log):"
		cat "$dir/$name.log"
	fi
	row "$name (beside${with:+ $with})" "${took}s" "$(note "$(own "$cpu")" "$([ "$rc" = 0 ] || echo FAILED)")"
	return "$rc"
}

beside=
if [ -n "$builds$checks" ]; then
	# shellcheck disable=SC2086 # the checks are words
	setsid nice -n 19 "$0" --session low "$builds" $checks </dev/null >"$dir/session.log" 2>&1 &
	beside=$!
	sessions+=("$beside")
	echo "=== beside, at the lowest priority (pid $beside, logs in $dir): builds: ${builds:-none}; checks: ${checks:-none}"
fi

for target in "$@"; do
	IFS=, read -r -a group <<<"$target"
	first=${group[0]}
	others=("${group[@]:1}")
	pids=()
	for t in "${others[@]}"; do
		setsid "$0" --session normal "" "$t" </dev/null >>"$dir/session.log" 2>&1 &
		sessions+=("$!")
		pids+=("$!")
		echo "=== make $t, beside make $first (pid $!, log $dir/$t.log)"
	done
	t0=$(date +%s)
	read -r b0 i0 < <(cpu)
	echo "=== make $first"
	timed "$dir/$first.cpu" "$make_cmd" --no-print-directory "$first" || status=1
	row "$first" "$(($(date +%s) - t0))s" "$(note "$(busy "$b0" "$i0")" "$(own "$(<"$dir/$first.cpu")")" "$([ "$status" = 0 ] || echo FAILED)")"
	for i in "${!others[@]}"; do
		t=${others[$i]}
		wait "${pids[$i]}" 2>/dev/null
		if [ -f "$dir/$t.rc" ]; then
			result "$t" "$first" || status=1
		else
			status=1
			row "$t (beside $first)" "?" "FAILED: ended without a result, see $dir/$t.log"
		fi
	done
	[ "$status" = 0 ] || break
done

if [ -n "$beside" ]; then
	stop "$beside" && echo "=== stopped what ran beside (pid $beside): the targets ended first"
	if [ -n "$builds" ]; then
		if [ -f "$dir/builds.rc" ]; then
			read -r rc took cpu <"$dir/builds.rc"
			row "builds beside" "${took}s" "$(note "$(own "$cpu")" "$([ "$rc" = 0 ] || echo "exit $rc, the targets built what they needed: $dir/builds.log")")"
		else
			row "builds beside" stopped
		fi
	fi
	for check in $checks; do
		if [ -f "$dir/$check.rc" ]; then
			result "$check" || status=1
		elif [ "$status" = 0 ]; then
			t0=$(date +%s)
			read -r b0 i0 < <(cpu)
			echo "=== make $check (not finished beside)"
			timed "$dir/$check.cpu" "$make_cmd" --no-print-directory "$check" || status=1
			row "$check" "$(($(date +%s) - t0))s" "$(note "$(busy "$b0" "$i0")" "$(own "$(<"$dir/$check.cpu")")" "$([ "$status" = 0 ] || echo FAILED)")"
		else
			row "$check" "not run"
		fi
	done
fi
echo
echo "=== time per target"
printf '%s\n' "${report[@]}"
read -r b i < <(cpu)
row total "$(($(date +%s) - start))s" "$(note "$(busy "$run_busy" "$run_idle")" \
	"$(((b - run_busy) / ticks / 60)) core-minutes of $(((b - run_busy + i - run_idle) / ticks / 60))")"
echo "${report[-1]}"
exit "$status"
