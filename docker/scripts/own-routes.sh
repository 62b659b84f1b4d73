#!/bin/sh
# Keeps a management node's traffic that has no route of its own (the cluster IPs of its
# Services among it) on the node's own network, whichever network the engine gave the default
# route to.
#
# Arguments: the gateways of the node's own network, at most one per address family, each used
# on the interface it is on-link at. When the manager cannot tell which network is the node's
# own, it gives the gateways of all of them, and only those on-link at eth0 (the network the
# engine created the node on, until the node restarts) are used. Policy routing leaves the main
# table, where the engine keeps its default route and its subnets, as it is (the engine
# rewrites its default route whenever the node joins or leaves a network, and refuses to join a
# network whose subnet overlaps a route in the main table): rule 30000 looks every destination
# up in the main table but for its default routes, and rule 30001 sends what is left to table
# 30001, whose default route goes through the node's own network.
#
# Idempotent; prints a line for each rule or route it sets.
set -eu
table=30001

# count FAMILY: how many gateways of a family are given.
count() {
	f=$1
	shift
	n=0
	for g in "$@"; do
		case "$g" in
		*:*) [ "$f" = -4 ] || n=$((n + 1)) ;;
		*) [ "$f" = -6 ] || n=$((n + 1)) ;;
		esac
	done
	echo "$n"
}

for gw in "$@"; do
	case "$gw" in
	*:*) family=-6 ;;
	*) family=-4 ;;
	esac
	# The gateway of the node's own network is reached on the link, not through another gateway.
	route="$(ip "$family" route get "$gw" 2>/dev/null || true)"
	case "$route" in
	*" via "* | "") continue ;;
	esac
	dev="$(echo "$route" | sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -n 1)"
	if [ -z "$dev" ] || { [ "$(count "$family" "$@")" -gt 1 ] && [ "$dev" != eth0 ]; }; then
		continue
	fi
	if [ -z "$(ip "$family" rule show priority 30000)" ]; then
		ip "$family" rule add priority 30000 lookup main suppress_prefixlength 0
		echo "rule 30000: the main table without its default routes ($family)"
	fi
	if [ -z "$(ip "$family" rule show priority 30001)" ]; then
		ip "$family" rule add priority 30001 lookup "$table"
		echo "rule 30001: table $table ($family)"
	fi
	case "$(ip "$family" route show table "$table" default)" in
	"default via $gw dev $dev"*) ;;
	*)
		ip "$family" route replace default via "$gw" dev "$dev" table "$table"
		echo "table $table: default via $gw dev $dev"
		;;
	esac
done
