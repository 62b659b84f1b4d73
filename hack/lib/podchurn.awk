# Pod churn between two snapshots of a cluster's pods, counted by owner so that a replaced pod
# (a new name and UID under the same ReplicaSet, DaemonSet or Node) is not missed.
# Snapshot lines (hack/density.sh writes them):
#   <namespace> <owner kind>/<owner name> <pod uid> <container>=<restarts> ...
# Usage: awk -v mode=total|owners -f podchurn.awk BEFORE AFTER
#   total:  "<restarts> <replaced>": container restarts since BEFORE (a pod created since counts
#           all of its restarts) and pods of BEFORE no longer there
#   owners: "<namespace>/<owner> restarts <n> replaced <m>" for each owner with either above 0
FNR == 1 { file++ }
{
	owner = $1 "/" $2
	for (i = 4; i <= NF; i++) {
		split($i, kv, "=")
		if (file == 1) before[$3, kv[1]] = kv[2]
		else {
			r = kv[2] - (($3, kv[1]) in before ? before[$3, kv[1]] : 0)
			if (r > 0) { restarts[owner] += r; total_restarts += r; owners[owner] = 1 }
		}
	}
	if (file == 1) { uid_owner[$3] = owner }
	else { present[$3] = 1 }
}
END {
	for (uid in uid_owner) {
		if (!(uid in present)) { replaced[uid_owner[uid]]++; total_replaced++; owners[uid_owner[uid]] = 1 }
	}
	if (mode == "owners") {
		for (o in owners) printf "%s restarts %d replaced %d\n", o, restarts[o], replaced[o]
	} else {
		printf "%d %d\n", total_restarts, total_replaced
	}
}
