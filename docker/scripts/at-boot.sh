#!/bin/sh
# Run by dockyard-management.service each time a management node starts, before kubelet: the
# node's isolation from the workload networks it is on and its routes through its own network,
# with the arguments the manager last ran them with (a network keeps its subnet and gateway when
# the engine restarts). Without it, after the engine restarted, the node came up with neither
# until a manager settled it again, and its kubelet started with the engine's default route on
# whichever network the engine attached first.
set -eu
dir=/etc/dockyard/management
# The arguments hold no spaces: one per line.
# shellcheck disable=SC2046
sh "$dir/isolate.sh" $(cat "$dir/isolate.args")
# shellcheck disable=SC2046
sh "$dir/own-routes.sh" $(cat "$dir/own-routes.args")
