#!/usr/bin/env bash
# make quickstart, step by step: each step says what it does and how long it took, and the run
# ends with a timing summary (also on failure, naming the step that failed), written to
# $DOCKYARD_CACHE/bench/quickstart-<time>.txt where docs/performance.md and README quote it.
#
# Called by the Makefile with MAKE, CONTAINER_RUNTIME, CONTAINER_RUNTIME_ENDPOINT,
# KUBERNETES_VERSION, QUICKSTART_IMAGES (local: build the images here) and QUICKSTART_FLAGS.
set -euo pipefail

: "${MAKE:=make}" "${CONTAINER_RUNTIME:=docker}" "${CONTAINER_RUNTIME_ENDPOINT:=}"
: "${KUBERNETES_VERSION:?}" "${QUICKSTART_IMAGES:=local}" "${QUICKSTART_FLAGS:=}"
: "${DOCKYARD_CACHE:=$HOME/.cache/dockyard}"

start=$(date +%s)
summary=()
current=""

duration() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# step NAME COMMAND...: runs COMMAND, announcing it and its time.
step() {
	local name=$1 t0
	shift
	current=$name
	t0=$(date +%s)
	echo "$(date -u +%H:%M:%S) ==> quickstart: $name"
	"$@"
	local took=$(($(date +%s) - t0))
	summary+=("$(printf '  %-48s %s' "$name" "$(duration "$took")")")
	echo "$(date -u +%H:%M:%S) ==> quickstart: $name done in $(duration "$took")"
	current=""
}

report() {
	local rc=$? out
	out="$DOCKYARD_CACHE/bench/quickstart-$(date -u +%Y%m%dT%H%M%SZ).txt"
	{
		if [ "$rc" -eq 0 ]; then
			echo "make quickstart: done in $(duration $(($(date +%s) - start)))"
		else
			echo "make quickstart: FAILED at \"$current\" after $(duration $(($(date +%s) - start))) (exit $rc)"
		fi
		if [ "${#summary[@]}" -gt 0 ]; then printf '%s\n' "${summary[@]}"; fi
		echo "  ($(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, engine $CONTAINER_RUNTIME)"
	} | { mkdir -p "$(dirname "$out")" && tee "$out"; }
	echo "summary written to $out"
}
trap report EXIT

mk() { "$MAKE" --no-print-directory "$@"; }

step "container engine ($CONTAINER_RUNTIME)" mk ensure-engine
if [ "$QUICKSTART_IMAGES" = local ]; then
	step "node, load balancer and CNI images" mk images
fi
step "Dockyard, Cluster API and cert-manager images" mk component-images
step "clusterctl repository (out/)" mk release-manifests
step "the dockyard command (bin/dockyard)" mk dockyard
# shellcheck disable=SC2086 # QUICKSTART_FLAGS is a list of flags
step "clusters (management, clusterctl init, 1+1)" bin/dockyard quickstart --images "$QUICKSTART_IMAGES" \
	--kubernetes-version "$KUBERNETES_VERSION" --container-runtime "$CONTAINER_RUNTIME" \
	--container-runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" $QUICKSTART_FLAGS
