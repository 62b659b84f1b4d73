#!/usr/bin/env bash
# dockyard quickstart on an engine that lacks its images, taking them from a registry instead of
# building them. The images the quick start runs are pushed (dockyard push images) into a local
# registry of this script's own, standing in for a public one; then, REGISTRY_RUNS times (3 by
# default): the images are removed from Docker, and `dockyard quickstart --image-registry` makes
# a management cluster of its own with the providers and a 1+1 cluster, timed from start to both
# Nodes Ready, and deleted. Prints every run and the median, and writes them to
# $DOCKYARD_CACHE/bench/registry-quickstart-<time>.md. Called by `make bench-registry-quickstart`
# with DOCKYARD. It refuses while a container uses one of the images (a quick start's cluster:
# make quickstart-delete), and leaves them on the engine as they were, pulled back.
set -euo pipefail
export LC_ALL=C

: "${DOCKYARD:?}"
runs=${REGISTRY_RUNS:-3}
port=${REGISTRY_PORT:-5001}
registry=dockyard-bench-registry
path=localhost:$port/dockyard
mgmt=dockyard-bench-pull
out="${DOCKYARD_CACHE:-$HOME/.cache/dockyard}/bench/registry-quickstart-$(date -u +%Y%m%dT%H%M%SZ).md"
mkdir -p "$(dirname "$out")"
: >"$out"
say() { echo "$*" | tee -a "$out"; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
log=$(mktemp)

cleanup() {
	"$DOCKYARD" --management-name "$mgmt" delete management >/dev/null 2>&1 || true
	"$DOCKYARD" registry delete --name "$registry" >/dev/null 2>&1 || true
	rm -f "$log"
}
trap cleanup EXIT

say "# dockyard quickstart --image-registry $path: $runs runs ($(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, $(date -u +%Y-%m-%d))"
"$DOCKYARD" registry delete --name "$registry" >/dev/null
"$DOCKYARD" registry create --name "$registry" --port "$port"
"$DOCKYARD" push images --image-registry "$path" | tee "$log"
mapfile -t images < <(sed -n 's/.* pushed \([^ ]*\) as .*/\1/p' "$log")
[ "${#images[@]}" -gt 0 ] || { echo "dockyard push images pushed nothing" >&2; exit 1; }
say "pushed ${#images[@]} images: ${images[*]}"
if users=$(docker ps -a --format '{{.Names}} {{.Image}}' | grep -F -f <(printf '%s\n' "${images[@]}")); then
	echo "containers use the quick start's images; delete them first (make quickstart-delete):" >&2
	echo "$users" >&2
	exit 1
fi

say ""
say "| run | quickstart (s) | of which pulling (s) |"
say "|---|---|---|"
totals=()
for run in $(seq 1 "$runs"); do
	docker rmi "${images[@]}" >/dev/null
	start=$(date +%s)
	# Its output holds the clusters' kubeconfigs: kept out of the terminal and removed.
	"$DOCKYARD" --management-name "$mgmt" quickstart --name bench-registry --image-registry "$path" >"$log"
	grep -E ' (pulling|pulled|building) ' "$log" || true
	took=$(($(date +%s) - start))
	pulled=$(sed -n 's/.* pulled [0-9]* images in \([0-9hms]*\)$/\1/p' "$log")
	say "| $run | $took | ${pulled:--} |"
	totals+=("$took")
	"$DOCKYARD" --management-name "$mgmt" delete management
done
say ""
say "median: $(printf '%s\n' "${totals[@]}" | median) s (every run above; management cluster, cert-manager, Cluster API and Dockyard installed, 1+1 Nodes Ready)"
echo "written to $out"
