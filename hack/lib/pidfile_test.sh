#!/usr/bin/env bash
# Tests hack/lib/pidfile.sh (run by make test).
set -euo pipefail
. "$(dirname "$0")/pidfile.sh"

dir=$(mktemp -d)
sleep 300 &
other=$!
trap 'kill "$other" 2>/dev/null || true; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A live process that is not the command: not ours, and its file is stale.
printf %s "$other" >"$dir/containerd.pid"
pid_of "$dir/containerd.pid" containerd && fail "pid_of took a live sleep for containerd"
clear_stale "$dir/containerd.pid" containerd >/dev/null
[ ! -e "$dir/containerd.pid" ] || fail "clear_stale kept a file naming a live sleep"
kill -0 "$other" || fail "clear_stale touched the process"

# The command itself: kept, with or without a trailing newline.
echo "$other" >"$dir/sleep.pid"
[ "$(pid_of "$dir/sleep.pid" sleep)" = "$other" ] || fail "pid_of missed a live sleep"
clear_stale "$dir/sleep.pid" sleep
[ -e "$dir/sleep.pid" ] || fail "clear_stale removed a file naming a live sleep"

# A dead process, an empty file, no file.
kill "$other"; wait "$other" 2>/dev/null || true
pid_of "$dir/sleep.pid" sleep && fail "pid_of took a dead process"
: >"$dir/empty.pid"
pid_of "$dir/empty.pid" sleep && fail "pid_of took an empty file"
pid_of "$dir/none.pid" sleep && fail "pid_of took a missing file"
clear_stale "$dir/none.pid" sleep
echo "pidfile: ok"
