#!/usr/bin/env bash
# Runs make targets one after another, stopping at the first that fails, and ends with how long
# each took (make test-all uses it, so every CI run says where its minutes went).
# Usage: hack/run-targets.sh TARGET...   (MAKE may name the make to run)
set -uo pipefail

make_cmd=${MAKE:-make}
start=$(date +%s)
report=()
status=0
for target in "$@"; do
	t0=$(date +%s)
	echo "=== make $target"
	if ! "$make_cmd" --no-print-directory "$target"; then
		status=1
	fi
	report+=("$(printf '%-18s %5ds%s' "$target" "$(($(date +%s) - t0))" "$([ "$status" = 0 ] || echo '  FAILED')")")
	[ "$status" = 0 ] || break
done
echo
echo "=== time per target"
printf '%s\n' "${report[@]}"
printf '%-18s %5ds\n' total "$(($(date +%s) - start))"
exit "$status"
