#!/usr/bin/env bash
# Installs (from Debian's archive) and starts a Docker engine if none answers, and raises the
# host's inotify limits that many node containers need.
# Idempotent: starts nothing when `docker info` already works. The daemon's PID and log
# are kept under $DOCKYARD_CACHE/dockerd so only this script's daemon is ever stopped.
set -euo pipefail

cache="${DOCKYARD_CACHE:-$HOME/.cache/dockyard}"
state="$cache/dockerd"
mkdir -p "$state"
# shellcheck source=hack/lib/pidfile.sh
. "$(dirname "$0")/lib/pidfile.sh"

# Every node container's systemd, containerd, kubelet and control plane take inotify instances
# from the host's per-user limit (nodes run as the host's root). Debian's default of 128 is used
# up by about two clusters (a management cluster and a 1+1 workload cluster take about 80), and
# kubelets then fail to start ("too many open files"), so nodes never become Ready. Raise the
# limits to kind's recommendation; never lower them.
raise_sysctl() {
  local key=$1 want=$2 have
  have=$(sysctl -n "$key" 2>/dev/null || echo 0)
  if [ "$have" -lt "$want" ]; then
    if sysctl -q -w "$key=$want" >/dev/null 2>&1; then
      echo "ensure-docker: raised $key from $have to $want"
    else
      echo "ensure-docker: $key is $have (below $want) and could not be raised: nodes may fail to start; run as root: sysctl -w $key=$want" >&2
    fi
  fi
}
raise_sysctl fs.inotify.max_user_instances 512
raise_sysctl fs.inotify.max_user_watches 524288

# Docker before 27 writes no ip6tables rules unless asked (before 26 only as an experimental
# feature): its IPv6 networks are then neither isolated from each other nor masqueraded, and the
# nodes of IPv6 and dual-stack clusters reach other clusters' nodes over IPv6. The daemon this
# script starts asks for them.
ip6tables_flags() {
  local major
  major=$(dockerd --version 2>/dev/null | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')
  if [ -n "$major" ] && [ "$major" -lt 27 ]; then
    echo "--experimental --ip6tables"
  fi
}

# A daemon this script started before without those flags (an older version of the script) is
# restarted with them; any other daemon is left alone.
if own=$(pid_of "$state/pid" dockerd) && [ -n "$(ip6tables_flags)" ] &&
  ! tr '\0' ' ' <"/proc/$own/cmdline" | grep -q -- --ip6tables; then
  echo "ensure-docker: restarting dockerd (pid $own) with $(ip6tables_flags)"
  kill "$own"
  for _ in $(seq 1 60); do
    pid_of "$state/pid" dockerd >/dev/null || break
    sleep 1
  done
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "ensure-docker: installing docker.io from Debian's archive"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi

# The Debian package puts its own client in /usr/bin; a newer client elsewhere on PATH may
# negotiate an API version this engine lacks, which the SDK handles, but the CLI must too.
if own=$(pid_of "$state/pid" dockerd); then
  echo "ensure-docker: dockerd (pid $own) is starting"
else
  # No dockerd of ours runs and none answers: PID files left by a daemon that did not stop
  # (a reboot, a killed machine) would stop the new one from starting.
  clear_stale /var/run/docker.pid dockerd | sed 's/^/ensure-docker: /'
  clear_stale /var/run/docker/containerd/containerd.pid containerd | sed 's/^/ensure-docker: /'
  echo "ensure-docker: starting dockerd (log: $state/dockerd.log)"
  # shellcheck disable=SC2046 # the flags are words
  # From / and in a session of its own, as ensure-podman.sh explains: the clone this runs in may
  # be deleted under it, and a signal to the group that ran it must not stop the engine.
  (cd / && exec setsid dockerd $(ip6tables_flags) >"$state/dockerd.log" 2>&1) &
  echo $! >"$state/pid"
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "ensure-docker: engine ready ($(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 1
done
echo "ensure-docker: dockerd did not answer within 60s; last log lines:" >&2
tail -n 30 "$state/dockerd.log" >&2
exit 1
