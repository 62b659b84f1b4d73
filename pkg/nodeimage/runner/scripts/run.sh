#!/bin/sh
# Dockyard's bootstrap runner (pkg/nodeimage/runner): runs this node's bootstrap plan, once.
# It runs as a transient systemd unit, so it goes on while Dockyard restarts, and keeps its
# state beside it on the node's /var volume, so it survives a restart of the node too.
#
# The plan (./plan) is a list of commands defined here:
#   start <timeout seconds>
#   run_file <step> <path> <mode> <owner> <group> <append>   install files/<step> at <path>
#   run_shell <first step> <script>                          run a script of commands
#   finish [<success sentinel>]
# State goes to ./state (runner.State), the first failure to ./failure, output to ./output.log.
set -u
__dockyard_dir=$(cd "$(dirname "$0")" && pwd) || exit 1
cd "$__dockyard_dir" || exit 1
# The lock directory makes sure the plan starts at most once per node: kubeadm init or join
# must never run twice.
if ! mkdir lock 2>/dev/null; then
	echo "dockyard: the bootstrap started before; it never runs twice" >&2
	exit 0
fi
__dockyard_started=$(date +%s)
__dockyard_timeout=0
export __dockyard_dir __dockyard_started __dockyard_timeout
. ./lib.sh
current=0

start() {
	__dockyard_timeout=$1
	__dockyard_state running 0 0
}

cleanup() {
	# Staged files hold private keys; the installed copies are the only ones left. The unit's
	# ExecStopPost removes them too, when the plan was stopped or killed: no trap here, because
	# systemd's SIGTERM on timeout also reaches whatever a trap forks.
	rm -rf files steps
}

run_file() {
	current=$1
	echo "$1" > step
	__dockyard_state running "$1" 0
	echo "dockyard: step $1: write $2" >> output.log
	{
		mkdir -p "$(dirname "$2")" &&
		if [ "$6" = 1 ]; then cat "files/$1" >> "$2"; else install -m "$3" "files/$1" "$2"; fi &&
		chmod "$3" "$2"
	} >> output.log 2>&1 || { __dockyard_failed "$1" 1; return; }
	chown "$4:$5" "$2" >> output.log 2>&1 || echo "dockyard: warning: cannot set owner $4:$5 of $2" >> output.log
}

run_shell() {
	# Consecutive commands run in one shell, like cloud-init's runcmd (cd and export carry
	# over), in / like cloud-init: bootstrap data may name files relative to it (./script.sh).
	current=$1
	echo "$1" > step
	__dockyard_state running "$1" 0
	(cd / && HOME=${HOME:-/root} exec /bin/sh "$__dockyard_dir/$2") >> output.log 2>&1 < /dev/null
	rc=$?
	current=$(cat step)
	if [ "$rc" -ne 0 ]; then __dockyard_failed "$current" "$rc"; fi
}

finish() {
	# With a sentinel, it alone decides; a missing sentinel is reported as such only when no
	# command failed before.
	missing=""
	if [ $# -gt 0 ]; then
		if [ -e "$1" ]; then
			rm -f failure
		elif [ ! -e failure ]; then
			__dockyard_failed "$current" 1
			missing="missing=$1
"
		fi
	fi
	if [ -e failure ]; then
		read -r step rc < failure
		__dockyard_state failed "$step" "$rc" "$missing"
		for unit in $(systemctl list-units --state=failed --no-legend --plain 2>/dev/null | cut -d' ' -f1); do
			echo "dockyard: journal of failed unit $unit:"
			journalctl --no-pager -n 30 -u "$unit" 2>&1
		done >> output.log
		cleanup
		exit "$rc"
	fi
	__dockyard_state succeeded "$current" 0
	cleanup
	echo "dockyard: bootstrap succeeded" >> output.log
}

. ./plan
