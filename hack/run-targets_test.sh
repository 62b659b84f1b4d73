#!/usr/bin/env bash
# Tests hack/run-targets.sh on a Makefile of its own (run by make test).
set -euo pipefail
script=$(cd "$(dirname "$0")" && pwd)/run-targets.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; echo "--- its output:" >&2; cat "$dir/out" >&2; exit 1; }
cat >"$dir/Makefile" <<'MK'
target: ; @echo target ran
wait-%: ; @for i in $$(seq 300); do [ -e cache/beside/$*.rc ] && exit 0; sleep 0.1; done; exit 1
broken: ; @echo the reason it broke; exit 3
build: ; @touch built
slow: ; @echo $$$$ >slow.pid; sleep 30; touch slow-built
check: ; @echo checked >check-ran
slow-started: ; @for i in $$(seq 300); do [ -s slow.pid ] && exit 0; sleep 0.1; done; exit 1
meet-%: ; @touch met-$*; for i in $$(seq 300); do [ $$(ls met-* | wc -l) = 2 ] && exit 0; sleep 0.1; done; exit 1
MK
run() { # EXPECTED-EXIT ARG...
	local want=$1 rc=0
	shift
	(cd "$dir" && DOCKYARD_CACHE="$dir/cache" MAKE=make "$script" "$@") >"$dir/out" 2>&1 || rc=$?
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
rm -f "$dir"/met-*
run 1 meet-a,broken,meet-c target
grep -q 'the reason it broke' "$dir/out" || fail "the failed target's output was not printed"
grep -q '^broken (beside meet-a) .*FAILED' "$dir/out" || fail "the failed target beside another has no row saying FAILED"
grep -q 'target ran' "$dir/out" && fail "a target after the failed group ran"
echo "run-targets: ok"
