#!/usr/bin/env bash
# Installs a Go command at a pinned version into a versioned path in the cache:
#   hack/go-install.sh <package> <version> <destination>
# Two installs of the same destination at once (make test-all builds tools beside its targets)
# build it once: the second waits for the first's lock and finds the command there.
set -euo pipefail
pkg="$1" version="$2" dest="$3"
mkdir -p "$(dirname "$dest")"
exec 9>"$dest.lock"
flock 9
[ -x "$dest" ] && exit 0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "installing ${pkg}@${version}"
start=$(date +%s)
GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "${pkg}@${version}"
# Copied beside the destination, then renamed: nobody runs a half-copied command.
cp "$tmp/$(basename "${pkg%/v[0-9]*}")" "$dest.tmp"
mv -f "$dest.tmp" "$dest"
echo "installed $(basename "$dest") in $(($(date +%s) - start))s"
