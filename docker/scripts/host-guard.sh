#!/bin/sh
# Keeps the engine's host from answering the workload networks Dockyard made: a node (root there
# is what a team's bootstrap commands or a privileged pod get) reaches the host at its network's
# gateway, the bridge's address, and so every service the host listens on (0.0.0.0, or the
# bridge's own address). Run in the host's network namespace (a helper container with
# NET_ADMIN), it keeps chain DOCKYARD-HOST in table filter of iptables and ip6tables, jumped to
# first from INPUT: from each workload bridge, only replies to what the host opened (ESTABLISHED,
# RELATED), IPv6 neighbour discovery, and new TCP connections to the ports the administrator
# opened pass; the rest is dropped. Traffic the host forwards (containers to each other, to the
# outside) is not INPUT, and is left to the engine.
#
# Arguments: -o PORT for each TCP port of the host workload nodes may connect to (none unless
# the administrator opens one), then the bridges of the workload networks. Each run replaces the
# chain's rules in one iptables-restore, so a removed network loses its rules.
#
# Without bridges (no workload network left) the jump and the chain are removed.
#
# Idempotent; prints the rules of each chain it changed and each jump it set.
set -eu
chain=DOCKYARD-HOST

for cmd in iptables iptables-restore; do
	if ! command -v "$cmd" >/dev/null 2>&1; then
		echo "$cmd is missing in the helper's image: Dockyard cannot keep workload networks off the engine's host" >&2
		exit 1
	fi
done

open=""
while getopts o: opt; do
	case "$opt" in
	o) open="$open $OPTARG" ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))

# rules FAMILY: the chain's rules, as iptables-restore reads them.
rules() {
	for dev in "$@"; do
		echo "-A $chain -i $dev -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
		if [ "$family" = 6 ]; then
			for type in 133 135 136; do
				echo "-A $chain -i $dev -p ipv6-icmp -m icmp6 --icmpv6-type $type -m hl --hl-eq 255 -j RETURN"
			done
		fi
		for port in $open; do
			echo "-A $chain -i $dev -p tcp --dport $port -m conntrack --ctstate NEW -j RETURN"
		done
		echo "-A $chain -i $dev -j DROP"
	done
}

for family in 4 6; do
	ipt=iptables
	[ "$family" = 4 ] || ipt=ip6tables
	if [ "$family" = 6 ] && ! ip6tables -S INPUT >/dev/null 2>&1; then
		continue # no IPv6 on the host: nothing to reach it by
	fi
	if [ $# -eq 0 ]; then
		if $ipt -S "$chain" >/dev/null 2>&1; then
			while $ipt -D INPUT -j "$chain" 2>/dev/null; do :; done
			$ipt -F "$chain"
			$ipt -X "$chain"
			echo "$ipt: $chain removed (no workload network)"
		fi
		continue
	fi
	before="$($ipt -S "$chain" 2>/dev/null || true)"
	{
		echo "*filter"
		echo ":$chain - [0:0]"
		rules "$@"
		echo COMMIT
	} | "$ipt-restore" --noflush
	after="$($ipt -S "$chain")"
	if [ "$before" != "$after" ]; then
		echo "$after" | sed -n "s/^-A /$ipt -A /p"
	fi
	if [ "$($ipt -S INPUT | sed -n 2p)" != "-A INPUT -j $chain" ]; then
		while $ipt -D INPUT -j "$chain" 2>/dev/null; do :; done
		$ipt -I INPUT 1 -j "$chain"
		echo "$ipt: INPUT jumps to $chain first"
	fi
done
