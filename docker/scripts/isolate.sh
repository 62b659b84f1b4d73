#!/bin/sh
# Makes a management node no router for the workload networks it joined. It is a Kubernetes
# node, so it forwards; without these rules a workload node (root there is what a tenant's
# bootstrap commands or a privileged pod get) could route through it into the management
# cluster's Services and pods, the node's own network, or another workload network, and open
# connections to the node itself (kubelet, API server, NodePorts).
#
# Arguments: -g GATEWAY for the gateway (the engine's host) of each workload network, -p PORT for
# each TCP port of the node the engine publishes on the host, -o PORT for each TCP port of the
# node that workload nodes may connect to (none unless the administrator opens one), then the
# subnets of the workload networks it is on (either family). The interfaces on them (those with
# a kernel route to the subnet) are the workload interfaces; the others (the node's own network,
# its pods' interfaces, lo) are left alone. Subnets, not addresses: a network keeps its subnet
# when the engine restarts, so the same arguments hold when the node starts again
# (dockyard-management.service runs this script then, before kubelet). From a workload
# interface:
#   - table raw, before connection tracking and before kube-proxy's DNAT: only packets to the
#     node's own addresses on that interface pass (IPv6: also link-local and link-scope
#     multicast destinations, which are never forwarded). Nothing else is routed, whatever
#     route a workload node sets.
#   - table mangle, after connection tracking and still before DNAT: only replies to what the
#     node and its pods opened (ESTABLISHED, RELATED) pass, IPv6 neighbour discovery (which
#     connection tracking leaves untracked), and new TCP connections from the engine's host (the
#     network's gateway) to the node's published ports: the engine publishes a container's ports
#     through one of its networks, which may be a workload network (it picks by name), and the
#     host reaches the management cluster's API server that way. That a workload node may forge
#     the gateway's address gets it nothing: the replies go to the host. And new TCP connections
#     from any workload node to the -o ports of the node's own address there.
#     The rest is how the management cluster's controllers reach workload API servers through
#     their load balancers.
# Workload nodes need nothing on the management node (their DNS is the engine's resolver in
# their own network namespace), so everything else is dropped.
#
# The rules are chain DOCKYARD-ISOLATION in tables raw and mangle of iptables and ip6tables (the
# backend the node uses), jumped to first from PREROUTING; a jump something else put first is
# moved back on top. Each run replaces the chains' rules in one iptables-restore, so a network
# the node left loses its rules. An IPv4-only workload network gets IPv6 rules as well (a
# workload node can route through a link-local next hop): ip6tables not working is an error
# unless IPv6 is off on every workload interface.
#
# Idempotent; prints the rules of each chain it changed and each jump it set.
set -eu
chain=DOCKYARD-ISOLATION

for cmd in ip awk iptables iptables-restore; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		echo "$cmd is missing in this node: Dockyard cannot keep workload networks from routing through it" >&2
		exit 1
	fi
done

gateways=""
ports=""
open=""
while getopts g:p:o: opt; do
	case "$opt" in
	g) gateways="$gateways $OPTARG" ;;
	p) ports="$ports $OPTARG" ;;
	o) open="$open $OPTARG" ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))

devs=""
for subnet in "$@"; do
	family=-4
	case "$subnet" in *:*) family=-6 ;; esac
	dev="$(ip "$family" -o route show proto kernel | awk -v s="$subnet" '$1 == s { for (i = 2; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')"
	case "$dev" in
	"" | lo)
		echo "no workload interface is on $subnet (the node left that network)" >&2
		continue
		;;
	esac
	case " $devs " in
	*" $dev "*) ;;
	*) devs="$devs $dev" ;;
	esac
done

# addresses FAMILY DEV: the node's addresses on an interface (IPv6: global scope).
addresses() {
	if [ "$1" = 4 ]; then
		ip -4 -o addr show dev "$2"
	else
		ip -6 -o addr show dev "$2" scope global
	fi | awk '{ split($4, p, "/"); print p[1] }'
}

# rules FAMILY TABLE: the chain's rules, as iptables-restore reads them.
rules() {
	for dev in $devs; do
		case "$2" in
		raw)
			for a in $(addresses "$1" "$dev"); do
				echo "-A $chain -i $dev -d $a -j RETURN"
			done
			if [ "$1" = 6 ]; then
				echo "-A $chain -i $dev -d fe80::/10 -j RETURN"
				echo "-A $chain -i $dev -d ff02::/16 -j RETURN"
			fi
			;;
		mangle)
			echo "-A $chain -i $dev -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
			for gw in $gateways; do
				case "$1:$gw" in
				4:*.* | 6:*:*) ;;
				*) continue ;;
				esac
				for port in $ports; do
					echo "-A $chain -i $dev -s $gw -p tcp --dport $port -m conntrack --ctstate NEW -j RETURN"
				done
			done
			for port in $open; do
				echo "-A $chain -i $dev -p tcp --dport $port -m conntrack --ctstate NEW -j RETURN"
			done
			if [ "$1" = 6 ]; then
				for type in 135 136; do
					echo "-A $chain -i $dev -p ipv6-icmp -m icmp6 --icmpv6-type $type -m hl --hl-eq 255 -j RETURN"
				done
			fi
			;;
		esac
		echo "-A $chain -i $dev -j DROP"
	done
}

# ipv6_on: whether IPv6 is on for any workload interface.
ipv6_on() {
	for dev in $devs; do
		if [ "$(cat "/proc/sys/net/ipv6/conf/$dev/disable_ipv6" 2>/dev/null || echo 1)" = 0 ]; then
			return 0
		fi
	done
	return 1
}

apply() {
	family=$1
	ipt=iptables
	[ "$family" = 4 ] || ipt=ip6tables
	if [ "$family" = 6 ] && ! { ip6tables -t raw -S PREROUTING && ip6tables -t mangle -S PREROUTING; } >/dev/null 2>&1; then
		if ipv6_on; then
			echo "ip6tables does not work in this node, and IPv6 is on for a workload interface ($devs):" >&2
			ip6tables -t raw -S PREROUTING >&2
			exit 1
		fi
		return 0
	fi
	for table in raw mangle; do
		before="$($ipt -t "$table" -S "$chain" 2>/dev/null || true)"
		{
			echo "*$table"
			echo ":$chain - [0:0]"
			rules "$family" "$table"
			echo COMMIT
		} | "$ipt-restore" --noflush
		after="$($ipt -t "$table" -S "$chain")"
		if [ "$before" != "$after" ]; then
			echo "$after" | sed -n "s/^-A /$ipt -t $table -A /p"
			[ -n "$devs" ] || echo "$ipt -t $table: $chain is empty (no workload interface)"
		fi
		if [ "$($ipt -t "$table" -S PREROUTING | sed -n 2p)" != "-A PREROUTING -j $chain" ]; then
			while $ipt -t "$table" -D PREROUTING -j "$chain" 2>/dev/null; do :; done
			$ipt -t "$table" -I PREROUTING 1 -j "$chain"
			echo "$ipt -t $table: PREROUTING jumps to $chain first"
		fi
	done
}

apply 4
apply 6
