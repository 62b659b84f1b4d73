#!/usr/bin/env bash
# Density: N workload clusters of one control plane and one worker each, made at once by the
# management cluster `make quickstart` makes, then held for a while. Prints, and writes to
# $DENSITY_OUT:
#   - how long until every Node of every cluster is Ready;
#   - each minute of the hold: the host's load average, Machines whose Node is not Ready, and
#     the management cluster's pod churn since the clusters were created (container restarts
#     and pods replaced, counted by owner: hack/lib/podchurn.awk);
#   - at the end, the idle footprint per node (CPU over a minute and memory, from the node
#     containers' cgroups, memory as `docker stats` counts it) by role, and the management node's;
#   - every owner (ReplicaSet, DaemonSet, Node) in the management cluster whose pods restarted or
#     were replaced;
#   - every kube-system container of the workload clusters that restarted.
# Called by `make density` (which makes the management cluster first) with DOCKYARD, KUBECTL
# and DENSITY_LB_IMAGE set. The clusters live in namespace $DENSITY_NAMESPACE and are deleted
# at the end unless DENSITY_KEEP=1; clusters of an earlier run there are deleted first.
# Docker on cgroup v1 only
# (the footprint is read from /sys/fs/cgroup/{cpuacct,memory}/docker/<id>).
set -euo pipefail
export LC_ALL=C

: "${DOCKYARD:?}" "${KUBECTL:?}" "${DENSITY_LB_IMAGE:?}"
lb_image="$DENSITY_LB_IMAGE"
clusters="${DENSITY_CLUSTERS:-10}"
hold="${DENSITY_HOLD_SECONDS:-1800}"
ns="${DENSITY_NAMESPACE:-density}"
out="${DENSITY_OUT:-${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/density/$(date -u +%Y%m%dT%H%M%SZ).md}"
mgmt_kubeconfig="${DENSITY_MANAGEMENT_KUBECONFIG:-$HOME/.dockyard/dockyard-mgmt.kubeconfig}"
mkdir -p "$(dirname "$out")"
: >"$out"

# shellcheck source=hack/lib/clusters.sh
. "$(dirname "$0")/lib/clusters.sh"
since() { echo $(($(now) - $1)); }

# A figure read from an API server that did not answer is no figure: every read is retried
# for a minute, then the run stops, saying so.
die() {
	say "- $*; stopping"
	exit 1
}
read_api() { # file, then kubectl arguments
	local file=$1 try
	shift
	for try in 1 2 3 4 5 6; do
		if k "$@" >"$file" 2>"$file.err"; then
			return 0
		fi
		sleep 10
	done
	die "the management cluster's API server did not answer for a minute ($(tail -n 1 "$file.err"))"
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# pods writes a snapshot of the management cluster's pods for hack/lib/podchurn.awk to $1.
pods() {
	read_api "$1" get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{" "}{.metadata.uid}{range .status.containerStatuses[*]}{" "}{.name}={.restartCount}{end}{"\n"}{end}'
}
churn() { awk -v mode="$1" -f "$(dirname "$0")/lib/podchurn.awk" "$work/before" "$work/now"; }

# machines writes "<name> <NodeReady status>" for each Machine of the namespace to $1.
machines() {
	read_api "$1" get machines.cluster.x-k8s.io -n "$ns" \
		-o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="NodeReady")].status}{"\n"}{end}'
}
not_ready() { awk '$2 != "True" { print $1 }' "$work/machines"; }

[ -r "$mgmt_kubeconfig" ] || { echo "density: no management cluster kubeconfig at $mgmt_kubeconfig (make quickstart makes it)" >&2; exit 2; }
echo "density: clusters of an earlier run in namespace $ns are deleted first"
delete_clusters
k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null

say "# Density: $clusters clusters of 1 control plane + 1 worker, held ${hold}s ($(date -u +%FT%TZ), $(nproc) cores)"
say ""
pods "$work/before"
start=$(now)
for i in $(seq 1 "$clusters"); do
	# The default flavor names kind's load balancer image; the local one is what the quick
	# start's own cluster runs.
	"$DOCKYARD" create cluster "$ns-$i" -n "$ns" --wait 0 --var DOCKYARD_LB_IMAGE="$lb_image" >/dev/null
done
say "- $clusters clusters' objects created in $(since "$start") s"
while :; do
	machines "$work/machines"
	count=$(grep -c . "$work/machines" || true)
	pending=$(not_ready | wc -l)
	if [ "$count" -ge $((2 * clusters)) ] && [ "$pending" -eq 0 ]; then
		break
	fi
	if [ "$(since "$start")" -gt 3600 ]; then
		say "- not every Node Ready after an hour: $pending of $count Machines; stopping"
		not_ready | tee -a "$out"
		k get machines.cluster.x-k8s.io -n "$ns" | tee -a "$out"
		exit 1
	fi
	sleep 10
done
say "- every Node of the $((2 * clusters)) Machines Ready $(since "$start") s after the first object was created"

say ""
say "| minute | load average (1 min) | Machines whose Node is not Ready | management cluster container restarts | pods replaced |"
say "|---|---|---|---|---|"
held=$(now)
minute=0
while [ "$(since "$held")" -lt "$hold" ]; do
	sleep 60
	minute=$((minute + 1))
	load=$(cut -d' ' -f1 /proc/loadavg)
	machines "$work/machines"
	pods "$work/now"
	read -r restarted replaced <<<"$(churn total)"
	say "| $minute | $load | $(not_ready | wc -l) | $restarted | $replaced |"
done

# Footprint: CPU time over a minute and memory (usage minus inactive file cache) per node.
declare -A cpu0
cg() { echo "/sys/fs/cgroup/$1/docker/$2/$3"; }
all=$(docker ps --no-trunc -q --filter "label=io.x-k8s.kind.role")
for id in $all; do cpu0[$id]=$(cat "$(cg cpuacct "$id" cpuacct.usage)"); done
t0=$(date +%s%N)
sleep 60
t1=$(date +%s%N)
# usage prints "<millicores> <MiB>" for each node container matching the docker ps filters.
usage() {
	local id cpu mem
	for id in $(docker ps --no-trunc -q "$@"); do
		[ -n "${cpu0[$id]:-}" ] || continue
		cpu=$((($(cat "$(cg cpuacct "$id" cpuacct.usage)") - ${cpu0[$id]}) * 1000 / (t1 - t0)))
		mem=$((($(cat "$(cg memory "$id" memory.usage_in_bytes)") - $(awk '$1 == "total_inactive_file" { print $2 }' "$(cg memory "$id" memory.stat)")) >> 20))
		echo "$cpu $mem"
	done
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
row() { # label, then usage lines on stdin
	local lines
	lines=$(cat)
	say "| $1 | $(printf '%s\n' "$lines" | grep -c . || true) | $(printf '%s\n' "$lines" | awk 'NF { print $1 }' | median) | $(printf '%s\n' "$lines" | awk 'NF { print $2 }' | median) |"
}
say ""
say "| idle, over one minute | nodes | CPU (millicores, median) | memory (MiB, median) |"
say "|---|---|---|---|"
for role in control-plane worker; do
	for i in $(seq 1 "$clusters"); do
		usage --filter "label=io.x-k8s.kind.role=$role" --filter "label=io.x-k8s.kind.cluster=$ns-$i.$ns"
	done | row "workload $role"
done
usage --filter "label=io.x-k8s.kind.cluster=dockyard-mgmt" | row "management node"
say "| the whole host | $(nproc) cores | load $(cut -d' ' -f1 /proc/loadavg) | $(free -m | awk '/^Mem:/ { print $3 }') used |"

say ""
pods "$work/now"
owners=$(churn owners | sort)
if [ -z "$owners" ]; then
	say "No pod of the management cluster restarted or was replaced."
else
	say "Management cluster pods that restarted or were replaced, by owner:"
	while read -r line; do say "- $line"; done <<<"$owners"
fi

# The workload clusters' own control planes, read from inside each control plane node.
say ""
wl=""
for i in $(seq 1 "$clusters"); do
	nodes=$(docker ps --format '{{.Names}}' --filter "label=io.x-k8s.kind.role=control-plane" --filter "label=io.x-k8s.kind.cluster=$ns-$i.$ns")
	[ -n "$nodes" ] || die "cluster $ns-$i has no running control plane node"
	for node in $nodes; do
		if ! docker exec "$node" kubectl --kubeconfig /etc/kubernetes/admin.conf get pods -n kube-system \
			-o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.containerStatuses[0].restartCount}{"\n"}{end}' >"$work/wl" 2>&1; then
			die "cluster $ns-$i's API server did not answer in $node: $(tail -n 1 "$work/wl")"
		fi
		lines=$(awk -v c="$ns-$i" '$2 > 0 { print "- " c ": " $1 " restarted " $2 " times" }' "$work/wl")
		[ -z "$lines" ] || wl+="${wl:+$'\n'}$lines"
	done
done
if [ -z "$wl" ]; then
	say "No kube-system container of a workload cluster restarted."
else
	say "Workload clusters' kube-system containers that restarted (since the clusters were created):"
	say "$wl"
fi
say ""
say "Written to $out"

if [ "${DENSITY_KEEP:-0}" != 1 ]; then
	start=$(now)
	delete_clusters
	echo "density: clusters deleted in $(since "$start") s"
fi
