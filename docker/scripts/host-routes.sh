#!/bin/sh
# Prints the destinations the engine's host routes, one per line (both families; default routes
# and what is special-purpose left to the reader), run in the host's network namespace: the
# subnets a network Dockyard makes must not overlap, such as the host's own LAN.
set -eu
ip -4 -o route show table main | awk '{ print $1 }'
if ip -6 -o route show table main >/dev/null 2>&1; then
	ip -6 -o route show table main | awk '{ print $1 }'
fi
