#!/usr/bin/env bash
# Kubernetes conformance on a Dockyard cluster, without a registry (make test-conformance and
# test-conformance-focused). A cluster of one control plane and CONFORMANCE_WORKERS workers is
# made in namespace CONFORMANCE_NAMESPACE through the management cluster (one that was running is
# kept; one `dockyard create management` makes for the run is deleted at the end); the images of
# $CONFORMANCE_DIR/images.txt (make conformance-images: those CONFORMANCE_IMAGES names, else
# all) are loaded into its nodes; e2e.test runs the specs CONFORMANCE_FOCUS matches, as upstream
# does:
# those not labelled Serial on CONFORMANCE_PARALLEL ginkgo processes, then the Serial ones on one;
# the cluster is deleted at the end (CONFORMANCE_KEEP=1 keeps it), and anything left on the
# engine with the cluster's label is removed before and after.
#
# Called by the Makefile with DOCKYARD, KUBECTL, KUBERNETES_VERSION, CONFORMANCE_DIR and
# CONFORMANCE_LB_IMAGE set. Writes the ginkgo output, JUnit reports and a summary under
# $CONFORMANCE_REPORT_DIR (default $DOCKYARD_CACHE/conformance/reports/<time>).
set -euo pipefail
export LC_ALL=C

: "${DOCKYARD:?}" "${KUBECTL:?}" "${KUBERNETES_VERSION:?}" "${CONFORMANCE_DIR:?}" "${CONFORMANCE_LB_IMAGE:?}"
ns=${CONFORMANCE_NAMESPACE:-conformance}
name=${CONFORMANCE_CLUSTER:-conformance}
workers=${CONFORMANCE_WORKERS:-2}
focus=${CONFORMANCE_FOCUS:-'\[Conformance\]'}
skip=${CONFORMANCE_SKIP:-}
parallel=${CONFORMANCE_PARALLEL:-4}
timeout=${CONFORMANCE_TIMEOUT:-3h}
report=${CONFORMANCE_REPORT_DIR:-${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/conformance/reports/$(date -u +%Y%m%dT%H%M%SZ)}
mgmt_kubeconfig="$HOME/.dockyard/dockyard-mgmt.kubeconfig"
label="dockyard.x-k8s.io/cluster=$ns/$name"
ginkgo="$CONFORMANCE_DIR/bin/ginkgo"
e2e="$CONFORMANCE_DIR/bin/e2e.test"
out="$report/summary.txt"
mkdir -p "$report"
: >"$out"

# shellcheck source=hack/lib/clusters.sh
. "$(dirname "$0")/lib/clusters.sh"

for f in "$ginkgo" "$e2e" "$CONFORMANCE_DIR/images.txt" "$CONFORMANCE_DIR/repo-list.yaml"; do
	[ -e "$f" ] || { echo "conformance: $f is missing (make conformance-images makes it)" >&2; exit 2; }
done

# remove_leftovers removes what the engine still holds with the cluster's label: the containers,
# volumes and networks Dockyard made for it (never anything else).
# shellcheck disable=SC2086 # the IDs are words
remove_leftovers() {
	local ids
	ids=$(docker ps -aq --filter "label=$label")
	if [ -n "$ids" ]; then echo "conformance: removing containers left of $ns/$name"; docker rm -f -v $ids >/dev/null; fi
	ids=$(docker volume ls -q --filter "label=$label")
	if [ -n "$ids" ]; then echo "conformance: removing volumes left of $ns/$name"; docker volume rm $ids >/dev/null; fi
	ids=$(docker network ls -q --filter "label=$label")
	if [ -n "$ids" ]; then echo "conformance: removing networks left of $ns/$name"; docker network rm $ids >/dev/null; fi
}

cleanup() {
	local rc=$?
	if [ "${CONFORMANCE_KEEP:-0}" = 1 ]; then
		echo "conformance: cluster $ns/$name kept (kubeconfig $report/kubeconfig)"
	else
		delete_clusters || rc=1
		remove_leftovers || rc=1
		if [ -z "$mgmt_before" ]; then
			step "deleting the management cluster this run made"
			"$DOCKYARD" delete management || rc=1
		fi
	fi
	echo "conformance: report in $report"
	exit "$rc"
}

start=$(date +%s)
# The commit the run tests, read before anything runs (the checkout may move meanwhile).
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
step() { echo "$(date -u +%H:%M:%S) ==> conformance: $*"; }

step "management cluster"
# A management cluster that was there before is kept; one this run makes is deleted at the end.
mgmt_before=$(docker ps -aq --filter "label=dockyard.x-k8s.io/cluster=/dockyard-mgmt")
"$DOCKYARD" create management --kubernetes-version "$KUBERNETES_VERSION" >/dev/null
step "removing what an earlier run left in namespace $ns"
delete_clusters
remove_leftovers
trap cleanup EXIT

k create namespace "$ns" --dry-run=client -o yaml | k apply -f - >/dev/null
step "cluster $ns/$name: 1 control plane, $workers workers"
t0=$(date +%s)
"$DOCKYARD" create cluster "$name" -n "$ns" --workers "$workers" --kubernetes-version "$KUBERNETES_VERSION" \
	--var "DOCKYARD_LB_IMAGE=$CONFORMANCE_LB_IMAGE" --wait 15m
cluster_seconds=$(($(date +%s) - t0))
"$DOCKYARD" get kubeconfig "$name" -n "$ns" >"$report/kubeconfig"

mapfile -t images <"$CONFORMANCE_DIR/images.txt"
step "loading ${#images[@]} images: ${images[*]##*/}"
t0=$(date +%s)
"$DOCKYARD" load image "${images[@]}" --cluster "$ns/$name"
load_seconds=$(($(date +%s) - t0))

# run PHASE LABEL_FILTER PROCS [GINKGO_FLAG...]: one ginkgo run of e2e.test; its output and
# JUnit go to $report/PHASE. A run that fails does not stop the next.
status=0
run() {
	local phase=$1 labels=$2 procs=$3 t0 rc=0
	shift 3
	mkdir -p "$report/$phase"
	step "$phase specs matching '$focus' (label filter '$labels', $procs processes)"
	t0=$(date +%s)
	KUBE_TEST_REPO_LIST="$CONFORMANCE_DIR/repo-list.yaml" "$ginkgo" --procs="$procs" --timeout="$timeout" \
		--focus="$focus" ${skip:+--skip="$skip"} --label-filter="$labels" --no-color "$@" \
		"$e2e" -- --provider=skeleton --kubeconfig="$report/kubeconfig" --kubectl-path="$KUBECTL" \
		--report-dir="$report/$phase" 2>&1 | tee "$report/$phase/ginkgo.log" || rc=$?
	local took=$(($(date +%s) - t0))
	{
		echo "$phase: exit $rc in $((took / 60))m$((took % 60))s"
		grep -E '^Ran [0-9]+ of [0-9]+ Specs|^(SUCCESS|FAIL)! -- ' "$report/$phase/ginkgo.log" || echo "  (no ginkgo summary)"
		grep -E '^\s*\[(FAIL|TIMEDOUT|PANICKED|INTERRUPTED)\] ' "$report/$phase/ginkgo.log" | sed 's/^\s*/  /' || true
	} >>"$out"
	[ "$rc" = 0 ] || status=1
}

# selected LABEL_FILTER: how many specs of the focus the label filter selects (a dry run, which
# runs nothing); empty when the dry run fails.
selected() {
	KUBE_TEST_REPO_LIST="$CONFORMANCE_DIR/repo-list.yaml" "$ginkgo" --dry-run --focus="$focus" ${skip:+--skip="$skip"} \
		--label-filter="$1" --no-color "$e2e" -- --provider=skeleton --kubeconfig="$report/kubeconfig" 2>&1 |
		sed -n 's/^Ran \([0-9]*\) of.*/\1/p' | tail -1
}

# Each phase runs only when the focus selects specs of it (the focused set has no Serial one),
# and then fails if it runs none; a focus that selects no spec at all fails.
n_parallel=$(selected '!Serial')
n_serial=$(selected 'Serial')
echo "the focus selects ${n_parallel:-?} specs not labelled Serial and ${n_serial:-?} Serial ones" | tee -a "$out"
if [ -z "$n_parallel" ] || [ -z "$n_serial" ]; then
	echo "a dry run of e2e.test did not say how many specs the focus selects" >>"$out"
	status=1
elif [ $((n_parallel + n_serial)) = 0 ]; then
	echo "no spec matched '$focus'" >>"$out"
	status=1
fi
[ "${n_parallel:-0}" = 0 ] || run parallel '!Serial' "$parallel" --fail-on-empty
[ "${n_serial:-0}" = 0 ] || run serial 'Serial' 1 --fail-on-empty

{
	echo "cluster 1+$workers Ready in ${cluster_seconds}s, images loaded in ${load_seconds}s; total $(($(date +%s) - start))s"
	echo "focus '$focus'${skip:+, skip '$skip'}; $(date -u +%FT%TZ), commit $rev, $(nproc) cores"
} >>"$out"
echo
cat "$out"
exit "$status"
