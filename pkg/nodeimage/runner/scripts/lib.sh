# Dockyard's bootstrap runner library (pkg/nodeimage/runner), sourced by run.sh and by every
# step script. $__dockyard_dir is the runner's directory; $__dockyard_started and
# $__dockyard_timeout are set by run.sh. The names start with __dockyard_ because the
# bootstrap data's own commands run in the same shells.

# __dockyard_state <phase> <step> <exit code> [extra lines]: writes the state file atomically,
# as key=value lines (runner.State).
__dockyard_state() {
	printf 'phase=%s\nstep=%s\nstarted=%s\nexit=%s\ntimeout=%s\n%s' "$1" "$2" "$__dockyard_started" "$3" "$__dockyard_timeout" "${4:-}" \
		> "$__dockyard_dir/state.tmp" && mv -f "$__dockyard_dir/state.tmp" "$__dockyard_dir/state"
}

# __dockyard_failed <step> <exit code>: records the first failure, the one a user needs to see.
__dockyard_failed() {
	[ -e "$__dockyard_dir/failure" ] || echo "$1 $2" > "$__dockyard_dir/failure"
}

# __dockyard_step <step>: a step script starts a bootstrap command.
__dockyard_step() {
	echo "$1" > "$__dockyard_dir/step"
	__dockyard_state running "$1" 0
	echo "dockyard: step $1" >> "$__dockyard_dir/output.log"
}

# __dockyard_done <step> <exit code>: a bootstrap command ended; like cloud-init, a failing
# command does not stop the ones after it.
__dockyard_done() {
	if [ "$2" -ne 0 ]; then __dockyard_failed "$1" "$2"; fi
}
