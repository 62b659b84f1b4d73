# Shared by hack/density.sh and hack/bench-clusters.sh, which set before sourcing it: KUBECTL,
# DOCKYARD, mgmt_kubeconfig (the management cluster), ns (the namespace of their clusters) and
# out (the report they write).

say() { echo "$*" | tee -a "$out"; }
k() { "$KUBECTL" --kubeconfig "$mgmt_kubeconfig" "$@"; }
now() { date +%s; }
# median prints the median of the numbers on its input, one per line; "-" when none.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# delete_clusters deletes every cluster of the namespace at once, each waited for until nothing
# of it is left on the engine.
delete_clusters() {
	local names c pid failed=0 pids=()
	names=$(k get clusters.cluster.x-k8s.io -n "$ns" -o jsonpath='{.items[*].metadata.name}' 2>/dev/null || true)
	for c in $names; do
		"$DOCKYARD" delete cluster "$c" -n "$ns" &
		pids+=("$!")
	done
	for pid in "${pids[@]}"; do
		wait "$pid" || failed=1
	done
	return "$failed"
}
