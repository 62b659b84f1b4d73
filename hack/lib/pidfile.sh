# PID files outlive the processes they name: after a reboot or a killed machine the number in
# one may belong to another process. Shared by hack/ensure-*.sh, which only ever stop or wait
# for a process that is the command they started.

# pid_of FILE COMMAND prints the PID in FILE when that process is alive and its command is
# COMMAND; prints nothing (and fails) otherwise.
pid_of() {
	local file=$1 want=$2 pid
	[ -f "$file" ] || return 1
	pid=$(tr -dc '0-9' <"$file")
	[ -n "$pid" ] || return 1
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$want" ] || return 1
	echo "$pid"
}

# clear_stale FILE COMMAND removes FILE when it names no live COMMAND process. Daemons that
# find their PID file naming a live process believe they are running already: dockerd then
# waits for a containerd that is not there ("timeout waiting for containerd to start").
clear_stale() {
	local file=$1 want=$2
	if [ -f "$file" ] && ! pid_of "$file" "$want" >/dev/null; then
		echo "removing stale $file (it names no running $want)"
		rm -f "$file"
	fi
}
