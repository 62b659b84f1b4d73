#!/usr/bin/env bash
# Tests hack/run-targets.sh on a Makefile of its own (run by make test).
set -euo pipefail
script=$(cd "$(dirname "$0")" && pwd)/run-targets.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; echo "--- its output:" >&2; cat "$dir/out" >&2; exit 1; }
cat >"$dir/Makefile" <<'MK'
target: ; @echo target ran
wait-%: ; @for i in $$(seq 1200); do [ -e cache/beside/$*.rc ] && exit 0; sleep 0.1; done; exit 1
broken: ; @echo the reason it broke; exit 3
build: ; @touch built
slow: ; @echo $$$$ >slow.pid; sleep 30; touch slow-built
check: ; @echo checked >check-ran
slow-started: ; @for i in $$(seq 300); do [ -s slow.pid ] && exit 0; sleep 0.1; done; exit 1
burn: ; @sh -c 'ulimit -t 7; while :; do :; done' || true
meet-%: ; @touch met-$*; for i in $$(seq 300); do [ $$(ls met-* | wc -l) = 2 ] && exit 0; sleep 0.1; done; exit 1
MK
run() { # EXPECTED-EXIT ARG...
	local want=$1 rc=0
	shift
	(cd "$dir" && DOCKYARD_CACHE="$dir/cache" MAKE=make PROC_STAT=${PROC_STAT:-/proc/stat} "$script" "$@") >"$dir/out" 2>&1 || rc=$?
	[ "$rc" = "$want" ] || fail "run-targets.sh $* exited $rc, want $want"
}

# Builds and checks beside that finish first: the check counts, with its own row.
run 0 --beside build --checks check wait-check
[ -e "$dir/built" ] && [ -e "$dir/check-ran" ] || fail "the build or the check beside did not run"
grep -q '^check (beside) ' "$dir/out" || fail "no row for the check beside"

# A check that fails beside fails the run and prints its output.
run 1 --checks broken wait-broken
grep -q 'the reason it broke' "$dir/out" || fail "the failed check's output was not printed"
grep -q '^broken (beside) .*FAILED' "$dir/out" || fail "the failed check's row does not say FAILED"

# The targets end first: the session is stopped (its slow build with it) and the check it had
# not reached runs in the foreground.
rm -f "$dir/check-ran"
run 0 --beside slow --checks check slow-started
[ -e "$dir/check-ran" ] || fail "the check the session had not reached was not run"
grep -q '^builds beside  *stopped' "$dir/out" || fail "the stopped build has no row saying so"
kill -0 "$(cat "$dir/slow.pid")" 2>/dev/null && fail "the build beside was left running"
[ ! -e "$dir/slow-built" ] || fail "the build beside finished after being stopped"

# A target that fails stops the run; the checks not done are reported, not run.
rm -f "$dir/check-ran"
run 1 --beside slow --checks check broken target
grep -q 'target ran' "$dir/out" && fail "a target after the failed one ran"
grep -q '^check  *not run' "$dir/out" || fail "the check not run has no row saying so"
# Targets joined by a comma run at once (each waits for the other to start), and both count.
run 0 meet-a,meet-b target
grep -q '^meet-b (beside meet-a) ' "$dir/out" || fail "no row for the target run beside another"
grep -q 'target ran' "$dir/out" || fail "the target after the group did not run"
# Foreground rows say how busy the CPUs were; the total, the core-minutes the run used.
grep -Eq '^meet-a  *[0-9]+s  CPU busy [0-9]+%, its processes [0-9]+\.[0-9] core-min$' "$dir/out" || fail "the target's row has no CPU share"
grep -Eq '^total  *[0-9]+s  CPU busy [0-9]+%, [0-9]+ core-minutes of [0-9]+$' "$dir/out" || fail "the total has no CPU figures"
rm -f "$dir"/met-*
run 1 meet-a,broken,meet-c target
grep -q 'the reason it broke' "$dir/out" || fail "the failed target's output was not printed"
grep -q '^broken (beside meet-a) .*FAILED' "$dir/out" || fail "the failed target beside another has no row saying FAILED"
# A target that fails at once may end before a clock tick passes: its row then has no CPU share.
run 1 broken
grep -Eq '^broken  *[0-9]+s  (CPU busy [0-9]+%, )?its processes [0-9]+\.[0-9] core-min, FAILED$' "$dir/out" || fail "the failed target's row does not say FAILED"
grep -q 'target ran' "$dir/out" && fail "a target after the failed group ran"
# A target that fails before a clock tick passes (a frozen /proc/stat here) still says FAILED,
# without a CPU share it cannot know.
head -1 /proc/stat >"$dir/stat"
PROC_STAT=$dir/stat run 1 broken
grep -Eq '^broken  *[0-9]+s  its processes [0-9]+\.[0-9] core-min, FAILED$' "$dir/out" || fail "the failed target's row with no CPU share does not say FAILED"
grep -Eq '^total  *[0-9]+s  0 core-minutes of 0$' "$dir/out" || fail "the total with no CPU share is malformed"
# Each row counts the CPU of its own processes: a build beside that burns 7 CPU seconds shows
# them in its row, not in the row of the target it ended during.
run 0 --beside burn wait-builds
grep -Eq '^builds beside  *[0-9]+s  its processes 0\.1 core-min$' "$dir/out" || fail "the build beside does not count its CPU"
grep -Eq '^wait-builds  *[0-9]+s  CPU busy [0-9]+%, its processes 0\.0 core-min$' "$dir/out" || fail "the target counts the CPU of what ran beside it"
echo "run-targets: ok"
