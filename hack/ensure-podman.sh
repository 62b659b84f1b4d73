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
# shellcheck source=hack/lib/pidfile.sh
. "$(dirname "$0")/lib/pidfile.sh"

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

# Settings this script owns in containers.conf carry a marker, so a later run can update them;
# the same key without the marker is an administrator's and is left alone.
marker="# managed by dockyard hack/ensure-podman.sh"
conf_changed=false

# set_conf SECTION KEY VALUE WHY: VALUE is written as is (TOML), with the marker.
set_conf() {
  local section=$1 key=$2 value=$3 why=$4 want line
  want="$key = $value $marker"
  mkdir -p "$(dirname "$conf")"
  touch "$conf"
  line=$(grep -E "^[[:space:]]*$key[[:space:]]*=" "$conf" || true)
  if [ "$line" = "$want" ]; then
    return 0
  elif [ -n "$line" ] && [[ "$line" != *"$marker"* ]]; then
    echo "ensure-podman: $conf sets $key already; leaving it ($why)" >&2
    return 0
  elif [ -n "$line" ]; then
    grep -vE "^[[:space:]]*$key[[:space:]]*=.*$marker" "$conf" >"$conf.dockyard-tmp" && mv "$conf.dockyard-tmp" "$conf"
  fi
  if grep -q "^\[$section\]" "$conf"; then
    sed -i "/^\[$section\]/a $(sed 's/[&/\]/\\&/g' <<<"$want")" "$conf"
  else
    printf '\n[%s]\n%s\n' "$section" "$want" >>"$conf"
  fi
  echo "ensure-podman: set $key = $value in $conf ($why)"
  conf_changed=true
}

# Rootful Podman gives containers nofile (1048576) and nproc (4194304) limits above this host's
# hard limits, and the OCI runtime then fails to start every container ("error setting rlimit
# type 6/7: operation not permitted"). Cap the defaults at the host's hard limits.
ensure_ulimits() {
  local nofile nproc
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
  set_conf containers default_ulimits "[\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]" \
    "the host's hard limits; containers fail to start above nofile $nofile / nproc $nproc"
}
ensure_ulimits

# On a hybrid cgroup host (v1 controllers, and a cgroup v2 tree at /sys/fs/cgroup/unified that
# holds a controller, here hugetlb), crun refuses every container ("cgroups in hybrid mode not
# supported, drop all controllers from cgroupv2"); runc runs them. Podman prefers crun when both
# are installed, and Debian's podman pulls in crun when runc is not there yet, so which one a
# machine gets depends on what was installed first. Pick runc on such hosts.
ensure_oci_runtime() {
  local controllers
  # cgroup files report a size of 0, so read them rather than test them with -s.
  controllers=$(cat /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null || true)
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] || [ -z "$controllers" ]; then
    return 0 # cgroup v2 only, or v1 without controllers on the v2 tree: crun works
  fi
  if ! command -v runc >/dev/null 2>&1; then
    echo "ensure-podman: hybrid cgroups with controllers on cgroup v2 ($controllers): installing runc, which crun cannot stand in for here"
    apt_install runc
  fi
  set_conf engine runtime '"runc"' \
    "hybrid cgroups with controllers on cgroup v2; crun refuses to start containers there"
}
ensure_oci_runtime

# A running service read the old configuration; only one this script started is restarted.
if [ "$conf_changed" = true ]; then
  if own=$(pid_of "$state/pid" podman); then
    echo "ensure-podman: restarting the service it started (pid $own) to apply $conf"
    kill "$own"
    for _ in $(seq 1 20); do pid_of "$state/pid" podman >/dev/null || break; sleep 0.5; done
  elif ping; then
    echo "ensure-podman: a Podman service this script did not start answers on $sock; restart it to apply $conf" >&2
  fi
fi

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

if own=$(pid_of "$state/pid" podman); then
  echo "ensure-podman: podman system service (pid $own) is starting"
else
  echo "ensure-podman: starting podman system service (log: $state/podman.log)"
  mkdir -p "$(dirname "$sock")"
  # From /: the service (and every conmon it starts) keeps its working directory, and the clone
  # this script ran in may be deleted while the service lives on ("Failed to get working
  # directory", "write child: broken pipe" on every start). In a session of its own (setsid):
  # a signal to the process group that ran this script (a stopped CI job, ^C) must not stop the
  # engine under every cluster on it.
  (cd / && exec setsid podman system service --time=0 "unix://$sock" >"$state/podman.log" 2>&1) &
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
