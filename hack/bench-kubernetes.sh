#!/usr/bin/env bash
# Timings of clusters whose nodes are Pods (the kubernetes flavor), beside those of
# hack/bench-clusters.sh on the engine: a management cluster of its own with a worker per zone
# (dockyard create management --zones a,b,c, under BENCH_MANAGEMENT_NAME) is the infrastructure
# cluster; hack/bench-clusters.sh then runs BENCH_RUNS 1+1 clusters of the kubernetes flavor
# there (the last BENCH_SCALE_RUNS scaled 1 -> 3, each deletion timed); then one more 1+1 is
# left idle IDLE_SETTLE seconds and each of its node Pods' CPU (its cgroup's usage) is read over
# IDLE_WINDOWS windows of IDLE_SECONDS. The management cluster is deleted at the end. Called by
# `make bench-kubernetes` with DOCKYARD, KUBECTL and BENCH_LB_IMAGE set.
set -euo pipefail
export LC_ALL=C

: "${DOCKYARD:?}" "${KUBECTL:?}" "${BENCH_LB_IMAGE:?}"
name="${BENCH_MANAGEMENT_NAME:-dockyard-bench-kubernetes}"
ns=bench-kubernetes
dir="${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/bench"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
out="$dir/kubernetes-$stamp.md"
state="$dir/kubernetes-$stamp.state"
mkdir -p "$dir" "$state"
kubeconfig="$state/$name.kubeconfig"
mgmt_kubeconfig="$kubeconfig"
: >"$out"
# shellcheck source=hack/lib/clusters.sh
. "$(dirname "$0")/lib/clusters.sh"

# dockyard of this management cluster, for hack/bench-clusters.sh.
cat >"$state/dockyard" <<WRAPPER
#!/bin/sh
exec "$DOCKYARD" --management-name "$name" --kubeconfig-dir "$state" "\$@"
WRAPPER
chmod +x "$state/dockyard"
cleanup() { "$state/dockyard" delete management >/dev/null 2>&1 || echo "deleting management cluster $name failed" >&2; }
trap cleanup EXIT

DOCKYARD_ALLOWED_MANAGEMENT_INFRASTRUCTURE_NAMESPACES=$ns "$state/dockyard" create management --zones a,b,c >"$state/create.log" 2>&1
k create namespace "$ns" >/dev/null
k label namespace "$ns" pod-security.kubernetes.io/enforce=privileged >/dev/null
k -n "$ns" create rolebinding dockyard-infrastructure --clusterrole dockyard-manager-infrastructure-role \
	--serviceaccount dockyard-system:dockyard-manager >/dev/null

say "# Clusters of the kubernetes flavor ($(date -u +%F), $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
say ""
DOCKYARD="$state/dockyard" BENCH_NAMESPACE=$ns BENCH_MANAGEMENT_KUBECONFIG="$kubeconfig" BENCH_OUT="$state/clusters.md" \
	BENCH_CREATE_FLAGS="--flavor kubernetes" "$(dirname "$0")/bench-clusters.sh"
cat "$state/clusters.md" >>"$out"

# cpu_ns prints a node Pod's CPU time so far, in nanoseconds, from its own cgroup.
cpu_ns() {
	k -n "$ns" exec "$1" -c node -- sh -c \
		'cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null || cat /sys/fs/cgroup/cpu,cpuacct/cpuacct.usage 2>/dev/null || awk "/^usage_usec/ { print \$2 * 1000 }" /sys/fs/cgroup/cpu.stat'
}
say ""
say "Idle node Pods: a 1+1 left ${IDLE_SETTLE:-120} s, then ${IDLE_WINDOWS:-3} windows of ${IDLE_SECONDS:-120} s (millicores):"
say ""
"$state/dockyard" create cluster idle -n "$ns" --flavor kubernetes --wait 15m >/dev/null
sleep "${IDLE_SETTLE:-120}"
cp=$(k -n "$ns" get pods -o name | grep 'idle-control-plane' | head -1)
wk=$(k -n "$ns" get pods -o name | grep 'idle-md-0' | head -1)
say "| window | control plane | worker |"
say "|---|---|---|"
cps=() wks=()
for w in $(seq 1 "${IDLE_WINDOWS:-3}"); do
	c0=$(cpu_ns "$cp") w0=$(cpu_ns "$wk") t0=$(date +%s%N)
	sleep "${IDLE_SECONDS:-120}"
	c1=$(cpu_ns "$cp") w1=$(cpu_ns "$wk") t1=$(date +%s%N)
	c=$(((c1 - c0) * 1000 / (t1 - t0))) wm=$(((w1 - w0) * 1000 / (t1 - t0)))
	cps+=("$c") wks+=("$wm")
	say "| $w | $c | $wm |"
done
say ""
say "- idle node Pods: control plane median $(printf '%s\n' "${cps[@]}" | median) millicores, worker median $(printf '%s\n' "${wks[@]}" | median) millicores"
"$state/dockyard" delete cluster idle -n "$ns" >/dev/null
say ""
say "Written to $out"
