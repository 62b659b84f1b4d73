#!/usr/bin/env bash
# Idle: what a workload cluster that nobody uses costs. One cluster of one control plane and one
# worker, made by the management cluster `make quickstart` makes, left alone until it settled,
# then watched for IDLE_WINDOWS windows of IDLE_SECONDS each. For every window and node it
# prints, and writes to $IDLE_OUT:
#   - the node's CPU (millicores, from its cgroup's cpuacct.usage over the window);
#   - the commands the engine ran in it (Docker's exec_start events over the window);
# then the median of the windows per role. Called by `make idle` (which makes the management
# cluster first) with DOCKYARD, KUBECTL and IDLE_LB_IMAGE set. The cluster lives in namespace
# $IDLE_NAMESPACE and is deleted at the end unless IDLE_KEEP=1; one of an earlier run there is
# deleted first. Docker on cgroup v1 only (/sys/fs/cgroup/cpuacct/docker/<id>).
set -euo pipefail
export LC_ALL=C

: "${DOCKYARD:?}" "${KUBECTL:?}" "${IDLE_LB_IMAGE:?}"
windows="${IDLE_WINDOWS:-3}"
seconds="${IDLE_SECONDS:-300}"
settle="${IDLE_SETTLE_SECONDS:-120}"
ns="${IDLE_NAMESPACE:-idle}"
name=idle
out="${IDLE_OUT:-${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/idle/$(date -u +%Y%m%dT%H%M%SZ).md}"
mgmt_kubeconfig="${IDLE_MANAGEMENT_KUBECONFIG:-$HOME/.dockyard/dockyard-mgmt.kubeconfig}"
mkdir -p "$(dirname "$out")"
: >"$out"

# shellcheck source=hack/lib/clusters.sh
. "$(dirname "$0")/lib/clusters.sh"

[ -r "$mgmt_kubeconfig" ] || { echo "idle: no management cluster kubeconfig at $mgmt_kubeconfig (make quickstart makes it)" >&2; exit 2; }
delete_clusters
k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
manager=$(k get deployment -n dockyard-system dockyard-controller-manager -o jsonpath='{.spec.template.spec.containers[0].image}')
say "# Idle: a 1+1 cluster watched $windows x ${seconds}s after ${settle}s to settle ($(date -u +%FT%TZ), $(nproc) cores, manager $manager, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
say ""
"$DOCKYARD" create cluster "$name" -n "$ns" --workers 1 --var "DOCKYARD_LB_IMAGE=$IDLE_LB_IMAGE" --wait 15m >/dev/null
sleep "$settle"

cg() { echo "/sys/fs/cgroup/cpuacct/docker/$1/cpuacct.usage"; }
declare -A role_of
for id in $(docker ps --no-trunc -q --filter "label=io.x-k8s.kind.cluster=$name.$ns" --filter "label=dockyard.x-k8s.io/machine"); do
	role_of[$id]=$(docker inspect -f '{{index .Config.Labels "io.x-k8s.kind.role"}} {{.Name}}' "$id")
done
[ "${#role_of[@]}" -eq 2 ] || { echo "idle: want 2 node containers of $name.$ns, found ${#role_of[@]}" >&2; exit 1; }

say "| window | node | role | CPU (millicores) | commands run in it |"
say "|---|---|---|---|---|"
declare -A cpu0 samples
for w in $(seq 1 "$windows"); do
	for id in "${!role_of[@]}"; do cpu0[$id]=$(cat "$(cg "$id")"); done
	since=$(date -u +%FT%T.%NZ)
	t0=$(date +%s%N)
	sleep "$seconds"
	t1=$(date +%s%N)
	until=$(date -u +%FT%T.%NZ)
	for id in "${!role_of[@]}"; do
		read -r role node <<<"${role_of[$id]}"
		cpu=$((($(cat "$(cg "$id")") - ${cpu0[$id]}) * 1000 / (t1 - t0)))
		execs=$(docker events --since "$since" --until "$until" --filter type=container --filter event=exec_start \
			--filter "container=$id" --format '{{.Action}}' | grep -c . || true)
		say "| $w | ${node#/} | $role | $cpu | $execs |"
		samples[$role]+="$cpu $execs"$'\n'
	done
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
say ""
say "| role | CPU (millicores, median of $windows) | commands per ${seconds}s (median) |"
say "|---|---|---|"
for role in control-plane worker; do
	say "| $role | $(printf '%s' "${samples[$role]}" | awk 'NF { print $1 }' | median) | $(printf '%s' "${samples[$role]}" | awk 'NF { print $2 }' | median) |"
done
if [ "${IDLE_KEEP:-0}" != 1 ]; then delete_clusters; fi
echo "written to $out"
