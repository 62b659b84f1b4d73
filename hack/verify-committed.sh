#!/usr/bin/env bash
# Fails when generated files differ from the committed ones, saying which command writes them.
#
#   hack/verify-committed.sh "COMMAND THAT GENERATES" PATH...
set -euo pipefail
cmd=$1
shift
if [ -n "$(git status --porcelain -- "$@")" ]; then
	echo "generated files are stale; run '$cmd' and commit:"
	git status --porcelain -- "$@"
	git diff -- "$@" | head -50
	exit 1
fi
