#!/usr/bin/env bash
# Installs Podman (from Debian's archive) and starts a rootful Podman API service on
# unix:///run/podman/podman.sock if none answers there.
# Idempotent: installs nothing when podman is present, starts nothing when the socket answers
# /_ping. The service's PID and log are kept under $DOCKYARD_CACHE/podman, and only a service
# this script started is ever considered its own; it never stops anything.
# Rootful only: rootless Podman needs cgroup v2 with systemd delegation (see
# pkg/container/podman/doc.go).
set -euo pipefail

cache="${DOCKYARD_CACHE:-$HOME/.cache/dockyard}"
state="$cache/podman"
sock=/run/podman/podman.sock
conf=/etc/containers/containers.conf
mkdir -p "$state"

ping() {
  curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1
}

# apt may be held by another installer on the same machine: wait for its lock, and retry
# `apt-get update`, which (in bookworm's apt) gives up at once when the lists are locked.
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local out
  for _ in $(seq 1 60); do
    if out=$(apt-get -o DPkg::Lock::Timeout=600 update -qq 2>&1); then
      break
    fi
    if ! grep -q "Could not get lock" <<<"$out"; then
      echo "$out" >&2
      return 1
    fi
    echo "ensure-podman: apt is locked by another installer; retrying in 10s"
    sleep 10
  done
  # A package's configure step can fail once when another dpkg run races it; one retry.
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null ||
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

if ! command -v podman >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  echo "ensure-podman: installing podman from Debian's archive"
  apt_install podman curl
fi

# Rootful Podman gives containers nofile (1048576) and nproc (4194304) limits above this host's
# hard limits, and the OCI runtime then fails to start every container ("error setting rlimit
# type 6/7: operation not permitted"). Cap the defaults at the host's hard limits in
# containers.conf. The line this script writes carries a marker so a later run can update it;
# a default_ulimits line without the marker is an administrator's and is left alone.
marker="# managed by dockyard hack/ensure-podman.sh"
ensure_ulimits() {
  local nofile nproc want line
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  # Podman runs (and so starts conmon and the OCI runtime) with nproc capped at kernel.pid_max
  # (observed with 4.3 here: 32768 while the shell's hard limit was 96365), so cap it as well.
  local pidmax
  pidmax=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 4194304)
  if [ "$nproc" = unlimited ] || [ "$nproc" -gt "$pidmax" ]; then nproc=$pidmax; fi
  [ "$nofile" = unlimited ] && nofile=1048576
  [ "$nproc" = unlimited ] && nproc=4194304
  if [ "$nofile" -ge 1048576 ] && [ "$nproc" -ge 4194304 ]; then
    return 0
  fi
  # Soft and hard are equal on purpose: Podman 4.3's API (not its CLI) swaps the soft and hard
  # values of default_ulimits, and a soft limit above the hard one fails every start with
  # "error setting rlimit type 7: invalid argument".
  want="default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"] $marker"
  mkdir -p "$(dirname "$conf")"
  touch "$conf"
  line=$(grep -E '^[[:space:]]*default_ulimits' "$conf" || true)
  if [ "$line" = "$want" ]; then
    return 0
  elif [ -n "$line" ] && [[ "$line" != *"$marker"* ]]; then
    echo "ensure-podman: $conf sets default_ulimits already; leaving it (containers fail to start if it exceeds nofile $nofile / nproc $nproc)" >&2
    return 0
  elif [ -n "$line" ]; then
    grep -vF "$marker" "$conf" >"$conf.dockyard-tmp" && mv "$conf.dockyard-tmp" "$conf"
  fi
  if grep -q '^\[containers\]' "$conf"; then
    sed -i "/^\[containers\]/a $(sed 's/[&/\]/\\&/g' <<<"$want")" "$conf"
  else
    printf '\n[containers]\n%s\n' "$want" >>"$conf"
  fi
  echo "ensure-podman: set default_ulimits nofile=$nofile nproc=$nproc (the host's hard limits) in $conf"
  # A running service read the old configuration; only one this script started is restarted.
  if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
    echo "ensure-podman: restarting the service it started (pid $(cat "$state/pid")) to apply it"
    kill "$(cat "$state/pid")"
    for _ in $(seq 1 20); do kill -0 "$(cat "$state/pid")" 2>/dev/null || break; sleep 0.5; done
  elif ping; then
    echo "ensure-podman: a Podman service this script did not start answers on $sock; restart it to apply $conf" >&2
  fi
}
ensure_ulimits

# Where Docker runs too, the host's FORWARD policy is DROP and bridged frames go through it
# (br_netfilter). Netavark accepts only what comes from a network's own subnet, so pod traffic
# routed between nodes on one network (flannel host-gw: pod addresses, not node addresses) is
# dropped and pods on different nodes cannot talk. Let every Podman bridge forward its own
# frames, as Docker's rules do for Docker's bridges; traffic between two networks is routed,
# not bridged, so clusters stay apart.
ensure_bridge_forwarding() {
  local rule=(FORWARD -i podman+ -o podman+ -m physdev --physdev-is-bridged
    -m comment --comment "dockyard: Podman bridges forward their own frames" -j ACCEPT)
  if ! command -v iptables >/dev/null 2>&1; then
    return 0 # no firewall to open
  fi
  if ! iptables -C "${rule[@]}" 2>/dev/null; then
    iptables -I "${rule[@]}"
    echo "ensure-podman: Podman bridges forward their own frames (FORWARD policy: $(iptables -S FORWARD | head -1))"
  fi
}
ensure_bridge_forwarding

if ping; then
  exit 0
fi

if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
  echo "ensure-podman: podman system service (pid $(cat "$state/pid")) is starting"
else
  echo "ensure-podman: starting podman system service (log: $state/podman.log)"
  mkdir -p "$(dirname "$sock")"
  # From /: the service (and every conmon it starts) keeps its working directory, and the clone
  # this script ran in may be deleted while the service lives on ("Failed to get working
  # directory", "write child: broken pipe" on every start).
  (cd / && exec nohup podman system service --time=0 "unix://$sock" >"$state/podman.log" 2>&1) &
  echo $! >"$state/pid"
fi

for _ in $(seq 1 60); do
  if ping; then
    echo "ensure-podman: service ready on unix://$sock ($(podman version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
    exit 0
  fi
  sleep 1
done
echo "ensure-podman: the Podman service did not answer on $sock within 60s; last log lines:" >&2
tail -n 30 "$state/podman.log" >&2
exit 1
