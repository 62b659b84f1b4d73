#!/bin/sh
# Keeps a management node's traffic that has no route of its own (the cluster IPs of its
# Services among it) on the node's own network: eth0, the network the engine created it on,
# whichever network the engine gave the default route to.
#
# Arguments: the gateways of the node's networks. Only those on eth0's subnet are used, one per
# address family. Two half-default routes (0.0.0.0/1 and 128.0.0.0/1; ::/1 and 8000::/1) are
# more specific than any default route, so they win over the engine's without touching it: the
# engine rewrites its default route whenever the node joins or leaves a network, and fails to
# join one when a default route it did not set is in its way. Subnets of the networks the node
# is on stay more specific still.
#
# Idempotent; prints a line for each route it sets.
set -eu

for gw in "$@"; do
	case "$gw" in
	*:*) family=-6 halves="::/1 8000::/1" ;;
	*) family=-4 halves="0.0.0.0/1 128.0.0.0/1" ;;
	esac
	case "$(ip "$family" route get "$gw" 2>/dev/null)" in
	*" dev eth0 "*) ;;
	*) continue ;;
	esac
	for half in $halves; do
		case "$(ip "$family" route show "$half")" in
		"$half via $gw dev eth0"*) ;;
		*)
			ip "$family" route replace "$half" via "$gw" dev eth0
			echo "$half via $gw dev eth0"
			;;
		esac
	done
done
