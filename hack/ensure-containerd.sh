#!/usr/bin/env bash
# Installs (from Debian's archive) containerd and the CNI plugins, and starts Dockyard's OWN
# containerd daemon when its socket does not answer. The daemon has its own configuration,
# root, state directory and socket, so it never meets the containerd a Docker engine runs.
# Idempotent: starts nothing when the socket already answers; never stops anything.
#
#   DOCKYARD_CONTAINERD_ENDPOINT  socket (default /run/dockyard-containerd/containerd.sock)
#   DOCKYARD_CONTAINERD_ROOT      persistent root (default /var/lib/dockyard-containerd)
#   DOCKYARD_CACHE                PID, log and config under $DOCKYARD_CACHE/containerd
set -euo pipefail

sock="${DOCKYARD_CONTAINERD_ENDPOINT:-/run/dockyard-containerd/containerd.sock}"
sock="${sock#unix://}"
root="${DOCKYARD_CONTAINERD_ROOT:-/var/lib/dockyard-containerd}"
statedir="$(dirname "$sock")/state"
cache="${DOCKYARD_CACHE:-$HOME/.cache/dockyard}"
own="$cache/containerd"
mkdir -p "$own"
# shellcheck source=hack/lib/pidfile.sh
. "$(dirname "$0")/lib/pidfile.sh"

# apt may be held by another installer: wait for the lock, and retry update, which does not
# honour the lock timeout for its lists lock on every version.
apt_update() {
  local out
  for _ in $(seq 1 60); do
    if out=$(apt-get -o DPkg::Lock::Timeout=600 update -qq 2>&1); then
      return 0
    fi
    if ! grep -q "Could not get lock" <<<"$out"; then
      echo "$out" >&2
      return 1
    fi
    sleep 10
  done
  echo "ensure-containerd: apt stayed locked" >&2
  return 1
}

install_packages() {
  local missing=()
  command -v containerd >/dev/null 2>&1 || missing+=(containerd)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "ensure-containerd: installing ${missing[*]} from Debian's archive"
  export DEBIAN_FRONTEND=noninteractive
  apt_update
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
}

answers() {
  ctr --address "$sock" version >/dev/null 2>&1
}

write_config() {
  # The CRI plugin is not needed (Dockyard talks to containerd's own API) and would want CNI
  # configuration of its own.
  cat >"$own/config.toml" <<EOF
version = 2
root = "$root"
state = "$statedir"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$sock"

[ttrpc]
  address = "$sock.ttrpc"

[debug]
  address = "$sock.debug"
EOF
}

install_packages
if answers; then
  exit 0
fi

mkdir -p "$(dirname "$sock")" "$root"
write_config
if pid=$(pid_of "$own/pid" containerd); then
  echo "ensure-containerd: containerd (pid $pid) is starting"
else
  echo "ensure-containerd: starting containerd on $sock (log: $own/containerd.log)"
  # Containers inherit the daemon's limits (as Docker's do): nodes run many processes and files.
  ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
  # From / and in a session of its own, as ensure-podman.sh explains: the clone this runs in may
  # be deleted under it, and a signal to the group that ran it must not stop the engine.
  (cd / && exec setsid containerd --config "$own/config.toml" >"$own/containerd.log" 2>&1) &
  echo $! >"$own/pid"
fi

for _ in $(seq 1 60); do
  if answers; then
    echo "ensure-containerd: containerd ready ($(ctr --address "$sock" version 2>/dev/null | awk '/Server:/{s=1} s&&/Version:/{print $2; exit}'))"
    exit 0
  fi
  sleep 1
done
echo "ensure-containerd: containerd did not answer on $sock within 60s; last log lines:" >&2
tail -n 30 "$own/containerd.log" >&2
exit 1
