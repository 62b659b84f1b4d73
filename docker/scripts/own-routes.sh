#!/bin/sh
# Keeps a management node's traffic that has no route of its own (the cluster IPs of its
# Services among it) on the node's own network: eth0, the network the engine created it on,
# whichever network the engine gave the default route to.
#
# Arguments: the gateways of the node's networks. Only those on eth0's own subnet are used, one
# per address family. Policy routing leaves the main table, where the engine keeps its default
# route and its subnets, as it is (the engine rewrites its default route whenever the node joins
# or leaves a network, and refuses to join a network whose subnet overlaps a route in the main
# table): rule 30000 looks every destination up in the main table but for its default routes,
# and rule 30001 sends what is left to table 30001, whose default route goes through eth0.
#
# Idempotent; prints a line for each rule or route it sets.
set -eu
table=30001

for gw in "$@"; do
	case "$gw" in
	*:*) family=-6 ;;
	*) family=-4 ;;
	esac
	# A gateway on eth0's subnet is reached on the link, not through another gateway.
	case "$(ip "$family" route get "$gw" 2>/dev/null)" in
	*" via "*) continue ;;
	*" dev eth0 "*) ;;
	*) continue ;;
	esac
	if [ -z "$(ip "$family" rule show priority 30000)" ]; then
		ip "$family" rule add priority 30000 lookup main suppress_prefixlength 0
		echo "rule 30000: the main table without its default routes ($family)"
	fi
	if [ -z "$(ip "$family" rule show priority 30001)" ]; then
		ip "$family" rule add priority 30001 lookup "$table"
		echo "rule 30001: table $table ($family)"
	fi
	case "$(ip "$family" route show table "$table" default)" in
	"default via $gw dev eth0"*) ;;
	*)
		ip "$family" route replace default via "$gw" dev eth0 table "$table"
		echo "table $table: default via $gw dev eth0"
		;;
	esac
done
