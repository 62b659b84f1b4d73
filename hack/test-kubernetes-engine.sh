#!/usr/bin/env bash
# The Kubernetes engine's tests on a real infrastructure cluster: a management cluster made by
# `dockyard create management` under its own name, with the node image and the tests' image
# loaded into its node, then the runtime's suite (pkg/container/kubernetes/onacluster: the conformance
# behaviours that apply, Pods' lifecycle, volumes, fronts, zones, events) and the node layer's
# (docker, tag kubernetes_engine: a node of the node image boots as a Pod and runs a bootstrap
# plan once). The cluster is deleted at the end, passed or not. Called by `make
# test-kubernetes-engine` with DOCKYARD (the command), KUBECONFIG_DIR, NODE_IMAGE and TEST_IMAGE.
set -euo pipefail

: "${DOCKYARD:?}" "${KUBECONFIG_DIR:?}" "${NODE_IMAGE:?}" "${TEST_IMAGE:?}"
name=dockyard-engine-test
kubeconfig="$KUBECONFIG_DIR/$name.kubeconfig"
flags=(--management-name "$name" --kubeconfig-dir "$KUBECONFIG_DIR")

cleanup() { "$DOCKYARD" delete management "${flags[@]}" >/dev/null || echo "deleting the infrastructure cluster $name failed" >&2; }
trap cleanup EXIT

"$DOCKYARD" create management "${flags[@]}"
for img in "$NODE_IMAGE" "$TEST_IMAGE"; do
	docker save "$img" | docker exec -i "$name-control-plane" ctr --namespace k8s.io images import - >/dev/null
done
export DOCKYARD_TEST_INFRA_KUBECONFIG="$kubeconfig" DOCKYARD_TEST_INFRA_IMAGE="$TEST_IMAGE" DOCKYARD_TEST_NODE_IMAGE="$NODE_IMAGE"
go test ./pkg/container/kubernetes/onacluster/ -count=1 -v -timeout 20m ${GO_TEST_FLAGS:-}
go test -tags kubernetes_engine ./docker/ -run 'AsAPod|OfANodePod' -count=1 -v -timeout 20m ${GO_TEST_FLAGS:-}
