#!/usr/bin/env bash
# Installs a Go command at a pinned version into a versioned path in the cache:
#   hack/go-install.sh <package> <version> <destination>
set -euo pipefail
pkg="$1" version="$2" dest="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "installing ${pkg}@${version}"
start=$(date +%s)
GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "${pkg}@${version}"
mkdir -p "$(dirname "$dest")"
mv "$tmp/$(basename "${pkg%/v[0-9]*}")" "$dest"
echo "installed $(basename "$dest") in $(($(date +%s) - start))s"
