#!/usr/bin/env bash
# Fails when a filesystem an end-to-end run fills has fewer than E2E_MIN_FREE_GB (20) GB free
# for this user: the one of the container engine's data root (images imported into nodes, the
# nodes' /var volumes) and the one of Go's build cache (`go env GOCACHE`). A full disk fails a
# run late and far from its cause: a node whose `ctr images import` ends in "write: broken pipe"
# (PreloadFailed), or "no space left on device" in a node's logs.
# Free space is df's Avail, what a user may still write: on ext4 root cannot use the reserved
# blocks either without CAP_SYS_RESOURCE, so Size - Used overstates it. GB are df -h's (2^30
# bytes). E2E_MIN_FREE_GB=0 turns the check off.
# The engine is DOCKYARD_CONTAINER_RUNTIME's (docker by default; podman, containerd).
# With arguments, runs them once the check passes (exec), so that
# `VAR=value hack/check-disk.sh ginkgo run ...` keeps the environment.
# It only suggests what to free; it deletes nothing.
set -euo pipefail

min_gb="${E2E_MIN_FREE_GB:-20}"
runtime="${DOCKYARD_CONTAINER_RUNTIME:-docker}"

if ! [[ "$min_gb" =~ ^[0-9]+$ ]]; then
  echo "check-disk: E2E_MIN_FREE_GB is \"$min_gb\": a whole number of GB is expected" >&2
  exit 2
fi

# engine_root prints where the engine keeps its data, the default when it does not answer.
engine_root() {
  local root=""
  case "$runtime" in
    docker) root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || true); root=${root:-/var/lib/docker} ;;
    podman) root=$(podman info --format '{{.Store.GraphRoot}}' 2>/dev/null || true); root=${root:-/var/lib/containers/storage} ;;
    containerd) root=/var/lib/containerd ;;
    *) echo "check-disk: unknown DOCKYARD_CONTAINER_RUNTIME \"$runtime\"" >&2; exit 2 ;;
  esac
  echo "$root"
}

# existing prints the path, or its nearest parent that exists (a cache not made yet).
existing() {
  local p=$1
  while [ ! -e "$p" ] && [ "$p" != / ]; do p=$(dirname "$p"); done
  echo "$p"
}

# suggest prints what could be freed.
suggest() {
  local gocache=$1
  echo "check-disk: a full disk fails a run late and obscurely: a node's image import ends in" \
    "\"write: broken pipe\" (PreloadFailed), or a node logs \"no space left on device\"." \
    "What could be freed (this check deletes nothing):" >&2
  if [ -n "$gocache" ] && [ "$gocache" != off ]; then
    echo "  go clean -cache     # Go's build cache, $(du -sh "$gocache" 2>/dev/null | cut -f1) in $gocache; the next build is cold" >&2
  fi
  case "$runtime" in
    docker | podman)
      echo "  $runtime system df                                           # what the engine holds: images, containers, volumes, build cache" >&2
      echo "  $runtime ps -a --filter label=dockyard.x-k8s.io/cluster      # node containers and load balancers earlier runs left" >&2
      echo "  $runtime volume ls --filter label=dockyard.x-k8s.io/cluster  # their /var volumes" >&2
      echo "  $runtime system prune   # stopped containers, unused networks, dangling images, build cache: of every project on this engine" >&2
      ;;
    containerd)
      echo "  what Dockyard's clusters left in containerd (ctr namespaces ls; ctr -n <namespace> containers ls, images ls)" >&2
      ;;
  esac
  echo "Or set E2E_MIN_FREE_GB lower (0 turns this check off)." >&2
}

check() {
  [ "$min_gb" -eq 0 ] && return 0
  local engine gocache failed=0 what path line avail_kb mount
  engine=$(engine_root)
  gocache=$(go env GOCACHE 2>/dev/null || true)
  for what in "the $runtime engine's data root=$engine" "Go's build cache=$gocache"; do
    path=${what#*=}
    case "$path" in "" | off) continue ;; esac
    line=$(df -Pk "$(existing "$path")" | awk 'NR == 2 {print $4, $6}')
    avail_kb=${line%% *}
    mount=${line#* }
    if [ "$avail_kb" -lt $((min_gb * 1024 * 1024)) ]; then
      printf 'check-disk: %s GB free for this user on %s, which holds %s (%s); an end-to-end run needs E2E_MIN_FREE_GB=%s.\n' \
        "$(awk -v k="$avail_kb" 'BEGIN {printf "%.1f", k / 1048576}')" "$mount" "${what%%=*}" "$path" "$min_gb" >&2
      failed=1
    fi
  done
  [ "$failed" -eq 0 ] && return 0
  suggest "$gocache"
  return 1
}

check || exit 1
if [ $# -gt 0 ]; then
  exec "$@"
fi
