#!/usr/bin/env bash
# Tests hack/lib/podchurn.awk (run by make test).
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
churn() { awk -v mode="$1" -f "$(dirname "$0")/podchurn.awk" "$dir/before" "$dir/after"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$dir/before" <<'X'
capi-system ReplicaSet/capi-controller-manager-5d uid-a manager=2
kube-system Node/mgmt uid-b kube-apiserver=0
dockyard-system ReplicaSet/dockyard-manager-7f uid-c manager=0 sidecar=1
X
# capi's pod replaced (a new one restarted once); the API server restarted twice; the sidecar
# once more; a new pod under a new owner that never restarted.
cat >"$dir/after" <<'X'
capi-system ReplicaSet/capi-controller-manager-5d uid-d manager=1
kube-system Node/mgmt uid-b kube-apiserver=2
dockyard-system ReplicaSet/dockyard-manager-7f uid-c manager=0 sidecar=2
default ReplicaSet/app-1 uid-e app=0
X
[ "$(churn total)" = "4 1" ] || fail "total: got '$(churn total)', want '4 1'"
want='capi-system/ReplicaSet/capi-controller-manager-5d restarts 1 replaced 1
dockyard-system/ReplicaSet/dockyard-manager-7f restarts 1 replaced 0
kube-system/Node/mgmt restarts 2 replaced 0'
[ "$(churn owners | sort)" = "$want" ] || fail "owners: got
$(churn owners | sort)"

cp "$dir/before" "$dir/after"
[ "$(churn total)" = "0 0" ] || fail "unchanged: got '$(churn total)'"
[ -z "$(churn owners)" ] || fail "unchanged: owners listed"
echo "podchurn: ok"
