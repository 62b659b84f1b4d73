#!/usr/bin/env bash
# Cluster timings on the management cluster `make quickstart` makes: BENCH_RUNS 1+1 clusters
# made one after another, each timed from its objects to both Nodes Ready with where the time
# went; the last BENCH_SCALE_RUNS of them then have their control plane scaled 1 -> 3, with
# where that time went; each cluster's deletion is timed. Prints the tables and the medians,
# and writes them to $BENCH_OUT, with the providers' logs of each run beside it. Called by `make bench` with DOCKYARD, KUBECTL and
# BENCH_LB_IMAGE set. The clusters live in namespace $BENCH_NAMESPACE; clusters of an earlier
# run there are deleted first, and each is deleted after its run. BENCH_CREATE_FLAGS are added
# to `dockyard create cluster` (hack/bench-kubernetes.sh: --flavor kubernetes).
#
# The breakdown reads the objects' own timestamps (one-second resolution), in the order
# Cluster API and Dockyard make things happen for a 1+1 cluster:
#   infra ready   the Cluster's InfrastructureReady (Dockyard's network and load balancer)
#   cp machine    the control plane Machine exists (KubeadmControlPlane made it)
#   cp data       its bootstrap data secret exists (CABPK)
#   cp node up    its DockyardMachine's ContainerProvisioned (systemd and containerd up)
#   cp bootstrap  its BootstrapSucceeded (kubeadm init and the CNI applied)
#   cp init       the Cluster's ControlPlaneInitialized (KCP saw the API server)
#   worker data   the worker Machine's bootstrap data secret exists
#   worker node up, worker bootstrap (kubeadm join)
#   nodes ready   the last Machine's NodeReady
# and for each control plane Machine a scale-up adds, from the patch of spec.replicas: the
# Machine exists, its data, node up, bootstrap (kubeadm join as a control plane member, etcd
# included) and its Node Ready. KCP adds one Machine at a time, each once the one before it is
# a healthy etcd member.
set -euo pipefail
export LC_ALL=C

: "${DOCKYARD:?}" "${KUBECTL:?}" "${BENCH_LB_IMAGE:?}"
runs="${BENCH_RUNS:-5}"
scale_runs="${BENCH_SCALE_RUNS:-3}"
[ "$scale_runs" -le "$runs" ] || scale_runs=$runs
ns="${BENCH_NAMESPACE:-bench}"
out="${BENCH_OUT:-${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/bench/clusters-$(date -u +%Y%m%dT%H%M%SZ).md}"
mgmt_kubeconfig="${BENCH_MANAGEMENT_KUBECONFIG:-$HOME/.dockyard/dockyard-mgmt.kubeconfig}"
mkdir -p "$(dirname "$out")"
: >"$out"

# shellcheck source=hack/lib/clusters.sh
. "$(dirname "$0")/lib/clusters.sh"
# ts converts an RFC 3339 timestamp to seconds since the epoch; "-" when empty.
ts() { if [ -n "$1" ]; then date -d "$1" +%s; else echo -; fi; }
delta() { if [ "$2" = - ]; then echo -; else echo $(($2 - $1)); fi; }

# machines prints the Machines of a cluster with their role, bootstrap secret and
# DockyardMachine, one JSON object per line.
machines() {
	k get machines.cluster.x-k8s.io -n "$ns" -l "cluster.x-k8s.io/cluster-name=$1" -o json |
		jq -c '.items[] | {name: .metadata.name, created: .metadata.creationTimestamp,
			cp: (.metadata.labels["cluster.x-k8s.io/control-plane"] != null),
			secret: (.spec.bootstrap.dataSecretName // ""), infra: .spec.infrastructureRef.name,
			nodeReady: ([(.status.conditions // [])[] | select(.type == "NodeReady" and .status == "True") | .lastTransitionTime][0] // "")}'
}

# all_ready is true when the cluster has `want` Machines, each with its Node Ready.
all_ready() {
	local want=$2 got
	got=$(k get machines.cluster.x-k8s.io -n "$ns" -l "cluster.x-k8s.io/cluster-name=$1" \
		-o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="NodeReady")].status}{"\n"}{end}' 2>/dev/null | grep -c '^True$' || true)
	[ "$got" -ge "$want" ]
}

wait_ready() { # cluster, machines, seconds
	local start
	start=$(now)
	until all_ready "$1" "$2"; do
		if [ $(($(now) - start)) -gt "$3" ]; then
			say "- $1: not every Node Ready after $3 s"
			k get machines.cluster.x-k8s.io,dockyardmachines -n "$ns" -l "cluster.x-k8s.io/cluster-name=$1" | tee -a "$out"
			exit 1
		fi
		sleep 1
	done
}

cond_time() { # kind, name, condition
	k get "$1" -n "$ns" "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].lastTransitionTime}" 2>/dev/null || true
}
secret_time() { # name
	[ -n "$1" ] || { echo; return; }
	k get secret -n "$ns" "$1" -o jsonpath='{.metadata.creationTimestamp}' 2>/dev/null || true
}
# steps T0 MACHINE prints " | data | node up | bootstrap" of a Machine (one object of
# `machines`): seconds from T0 to its bootstrap data, ContainerProvisioned, BootstrapSucceeded.
steps() {
	local infra
	infra=$(jq -r .infra <<<"$2")
	printf ' | %s | %s | %s' "$(delta "$1" "$(ts "$(secret_time "$(jq -r .secret <<<"$2")")")")" \
		"$(delta "$1" "$(ts "$(cond_time dockyardmachines "$infra" ContainerProvisioned)")")" \
		"$(delta "$1" "$(ts "$(cond_time dockyardmachines "$infra" BootstrapSucceeded)")")"
}

[ -r "$mgmt_kubeconfig" ] || { echo "bench: no management cluster kubeconfig at $mgmt_kubeconfig (make quickstart makes it)" >&2; exit 2; }
delete_clusters
k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null

say "# Cluster timings: $runs 1+1 clusters one after another, the last $scale_runs then scaled 1 -> 3 ($(date -u +%FT%TZ), $(nproc) cores)"
say ""
say "Seconds from creating the cluster's objects:"
say ""
say "| run | infra ready | cp machine | cp data | cp node up | cp bootstrap | cp init | worker data | worker node up | worker bootstrap | both Nodes Ready |"
say "|---|---|---|---|---|---|---|---|---|---|---|"

# scale NAME: the control plane 1 -> 3, until three control plane Machines have their Node Ready
# and the KubeadmControlPlane reports three ready replicas. Adds a row per new Machine to
# scale_rows and the total to scale_totals.
scale_rows=()
scale_totals=()
scale() {
	local name=$1 kcp start total m n=0
	kcp=$(k get kubeadmcontrolplanes -n "$ns" -l "cluster.x-k8s.io/cluster-name=$name" -o jsonpath='{.items[0].metadata.name}')
	start=$(now)
	k patch kubeadmcontrolplane -n "$ns" "$kcp" --type merge -p '{"spec":{"replicas":3}}' >/dev/null
	wait_ready "$name" 4 900
	until [ "$(k get kubeadmcontrolplane -n "$ns" "$kcp" -o jsonpath='{.status.readyReplicas}')" = 3 ]; do
		if [ $(($(now) - start)) -gt 900 ]; then
			say "- control plane 1 -> 3: KubeadmControlPlane $kcp not 3 ready replicas after 900 s"
			exit 1
		fi
		sleep 1
	done
	total=$(($(now) - start))
	scale_totals+=("$total")
	# The Machines made after the patch, oldest first.
	while read -r m; do
		n=$((n + 1))
		local row="| $name | $((n + 1))"
		row+=" | $(delta "$start" "$(ts "$(jq -r .created <<<"$m")")")$(steps "$start" "$m")"
		row+=" | $(delta "$start" "$(ts "$(jq -r .nodeReady <<<"$m")")")"
		row+=" | $( [ "$n" = 2 ] && echo "$total" || echo) |"
		scale_rows+=("$row")
	done < <(machines "$name" | jq -s -c --arg t "$(date -u -d "@$start" +%FT%TZ)" 'map(select(.cp and .created >= $t)) | sort_by(.created, .name) | .[]')
}

# keep_logs NAME SINCE: the providers' logs over the run (Cluster API's and Dockyard's), beside
# the report, for a run that went slower than the others.
logs="${out%.md}-logs"
keep_logs() {
	local d="$logs/$1" nsd
	mkdir -p "$d"
	k get deployments -A -l cluster.x-k8s.io/provider -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}' 2>/dev/null |
		while read -r nsd; do
			k logs -n "${nsd%/*}" "deployment/${nsd#*/}" --all-containers --timestamps --since-time="$(date -u -d "@$2" +%FT%TZ)" \
				>"$d/${nsd#*/}.log" 2>&1 || true
		done
}

totals=()
deletes=()
for i in $(seq 1 "$runs"); do
	name="$ns-$i"
	start=$(now)
	# shellcheck disable=SC2086 # BENCH_CREATE_FLAGS are words, e.g. "--flavor kubernetes"
	"$DOCKYARD" create cluster "$name" -n "$ns" --wait 0 --var DOCKYARD_LB_IMAGE="$BENCH_LB_IMAGE" ${BENCH_CREATE_FLAGS:-} >/dev/null
	wait_ready "$name" 2 900
	total=$(($(now) - start))
	t0=$(ts "$(k get clusters.cluster.x-k8s.io -n "$ns" "$name" -o jsonpath='{.metadata.creationTimestamp}')")
	cp=$(machines "$name" | jq -s -c 'map(select(.cp)) | .[0]')
	wk=$(machines "$name" | jq -s -c 'map(select(.cp | not)) | .[0]')
	row="| $i"
	row+=" | $(delta "$t0" "$(ts "$(cond_time clusters.cluster.x-k8s.io "$name" InfrastructureReady)")")"
	row+=" | $(delta "$t0" "$(ts "$(jq -r .created <<<"$cp")")")$(steps "$t0" "$cp")"
	row+=" | $(delta "$t0" "$(ts "$(cond_time clusters.cluster.x-k8s.io "$name" ControlPlaneInitialized)")")$(steps "$t0" "$wk")"
	row+=" | $total |"
	say "$row"
	totals+=("$total")
	keep_logs "$name" "$start"
	if [ "$i" -gt $((runs - scale_runs)) ]; then
		scale "$name"
	fi
	start=$(now)
	"$DOCKYARD" delete cluster "$name" -n "$ns" >/dev/null
	deletes+=("$(($(now) - start))")
done
say ""
say "- 1+1 to both Nodes Ready: median $(printf '%s\n' "${totals[@]}" | median) s of $runs runs (each: ${totals[*]} s)"
if [ "$scale_runs" -gt 0 ]; then
	say ""
	say "Control plane 1 -> 3, seconds from the patch of spec.replicas, per Machine KCP added:"
	say ""
	say "| cluster | member | Machine | data | node up | bootstrap | Node Ready | 3 ready replicas |"
	say "|---|---|---|---|---|---|---|---|"
	for row in "${scale_rows[@]}"; do say "$row"; done
	say ""
	say "- control plane 1 -> 3 (three Nodes Ready, KubeadmControlPlane 3 ready replicas): median $(printf '%s\n' "${scale_totals[@]}" | median) s of $scale_runs runs (each: ${scale_totals[*]} s)"
fi
say "- deletion (dockyard delete cluster until nothing is left on the engine): median $(printf '%s\n' "${deletes[@]}" | median) s (each: ${deletes[*]} s)"
say ""
say "Written to $out (the providers' logs of each run: $logs/)"
