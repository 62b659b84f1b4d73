#!/usr/bin/env bash
# Builds what Cluster API's Runtime SDK upgrade spec needs of Cluster API's test extension (its
# end-to-end suite's Runtime SDK server), of the sigs.k8s.io/cluster-api/test module test/capie2e
# requires: its image, localhost/dockyard/capi-test-extension:<version> (dockyard-build
# capi-test-extension-image; Cluster API publishes none for its releases), and its components,
# out/capi-test-extension/components.yaml, rendered from the module's extension/config/default
# with that image, which is never pulled. The suite applies them where a spec needs them.
# Called by `make capi-test-extension` with KUSTOMIZE and BUILD_IMAGE (dockyard-build's
# capi-test-extension-image command with its cache flags) set.
set -euo pipefail

: "${KUSTOMIZE:?}" "${BUILD_IMAGE:?}"
cd "$(dirname "$0")/.."
version="$(cd test/capie2e && go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api/test)"
module="$(cd test/capie2e && go mod download -json "sigs.k8s.io/cluster-api/test@$version" | grep '"Dir"' | cut -d'"' -f4)"
# shellcheck disable=SC2086 # a command and its flags
image="$($BUILD_IMAGE --cluster-api-version "$version" --go-mod test/capie2e/go.mod)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(
	cd "$tmp"
	"$KUSTOMIZE" create --resources "$(realpath --relative-to=. "$module/extension/config/default")"
	"$KUSTOMIZE" edit set image "gcr.io/k8s-staging-cluster-api/test-extension=$image"
	# Its probes given the patience of the other controllers on a loaded 2-core host
	# (hack/release-manifests.sh).
	"$KUSTOMIZE" edit add patch --kind Deployment --patch "$(tr -d '\n' <<<'[
{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"IfNotPresent"},
{"op":"add","path":"/spec/template/spec/containers/0/livenessProbe/timeoutSeconds","value":5},
{"op":"add","path":"/spec/template/spec/containers/0/livenessProbe/periodSeconds","value":10},
{"op":"add","path":"/spec/template/spec/containers/0/livenessProbe/failureThreshold","value":6},
{"op":"add","path":"/spec/template/spec/containers/0/readinessProbe/timeoutSeconds","value":5}]')"
)
mkdir -p out/capi-test-extension
"$KUSTOMIZE" build "$tmp" > out/capi-test-extension/components.yaml.tmp
mv out/capi-test-extension/components.yaml.tmp out/capi-test-extension/components.yaml
echo "Cluster API's test extension $version: $image, out/capi-test-extension/components.yaml"
