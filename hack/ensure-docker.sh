#!/usr/bin/env bash
# Installs (from Debian's archive) and starts a Docker engine if none answers.
# Idempotent: does nothing when `docker info` already works. The daemon's PID and log
# are kept under $DOCKYARD_CACHE/dockerd so only this script's daemon is ever stopped.
set -euo pipefail

cache="${DOCKYARD_CACHE:-$HOME/.cache/dockyard}"
state="$cache/dockerd"
mkdir -p "$state"

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
if [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null; then
  echo "ensure-docker: dockerd (pid $(cat "$state/pid")) is starting"
else
  echo "ensure-docker: starting dockerd (log: $state/dockerd.log)"
  nohup dockerd >"$state/dockerd.log" 2>&1 &
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
