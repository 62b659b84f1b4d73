# Dockyard's bootstrap status (pkg/nodeimage/runner): prints the state of the runner in
# directory $1, started as systemd unit $2, as key=value lines (runner.Status). The unit is
# read before the state file: the runner writes its final state before its unit ends, so a
# unit seen ended means the state read after it is final.
echo "unit=$(systemctl is-active "$2" 2>/dev/null)"
cat "$1/state" 2>/dev/null
test -d "$1/lock" && echo lock=1
echo "now=$(date +%s)"
