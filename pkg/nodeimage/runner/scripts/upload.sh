# Dockyard's bootstrap upload (pkg/nodeimage/runner): unpacks a plan, a tar archive on stdin,
# into the runner's directory $1, unless a plan started there before (its lock exists): the
# files of a started plan are never replaced.
test -d "$1/lock" && exit 0
mkdir -p -m 0700 "$1" && rm -rf "$1/files" "$1/steps" && tar -x -f - -C "$1"
