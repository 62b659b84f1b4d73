#!/usr/bin/env bash
# Renders Dockyard's clusterctl repository, so `clusterctl init --infrastructure dockyard
# --config out/clusterctl.yaml` (and the dockyard command, which embeds it) needs no network:
#   - Dockyard's components (config/default) and metadata;
#   - Cluster API's core, kubeadm bootstrap and kubeadm control plane components, built from
#     the kustomize trees of the cluster-api module go.mod requires, with the released images;
#   - cert-manager's manifest, rendered from its chart in the cert-manager Go module with helm
#     built from the module proxy, the way cert-manager's own release (make/manifests.mk) does.
# Every image is one `make component-images` builds, under the name its release publishes.
# hack/genrepository then puts the components into pkg/repository/embedded/components
# (committed: the dockyard command embeds them), and lays the repository out in out/repository
# with templates/'s flavors and ClusterClasses, writing out/clusterctl.yaml,
# out/infrastructure-components.yaml and out/metadata.yaml.
# Called by `make release-manifests` with KUSTOMIZE, HELM and VERSION set. With RENDER_ONLY=DIR
# (`make release`) it copies the rendered components into DIR, a directory that must not exist,
# and changes nothing in the tree or in out/.
#
# Only files whose content changed are written, each by a rename: make test-all runs suites at
# once, and a suite reading out/ while another target runs this script never sees a file
# half-written.
set -euo pipefail

: "${KUSTOMIZE:?}" "${HELM:?}" "${VERSION:?}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.11.5}"
capi_version="$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)"
capi="$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/components"
mkdir -p "$stage/infrastructure-dockyard/$VERSION"

# Dockyard's components, with the manager image of this version (under IMAGE_REPOSITORY, for a
# release published to a registry).
mkdir -p "$tmp/dockyard"
(
	cd "$tmp/dockyard"
	"$KUSTOMIZE" create --resources "$(realpath --relative-to=. "$OLDPWD/config/default")"
	"$KUSTOMIZE" edit set image "localhost/dockyard/manager=${IMAGE_REPOSITORY:-localhost/dockyard}/manager:$VERSION"
)
"$KUSTOMIZE" build "$tmp/dockyard" > "$stage/infrastructure-dockyard/$VERSION/infrastructure-components.yaml"
cp metadata.yaml "$stage/infrastructure-dockyard/$VERSION/metadata.yaml"

# The management cluster shares the host's cores with every workload node, and the load average
# reaches tens: Kubernetes' probe defaults (1 s, three failures) and client-go's leases (15 s,
# renewed within 10 s) restart healthy controllers there. Probes wait 5 s and give up after a
# minute; leases are the kubeadm control plane provider's own defaults (60 s / 40 s / 5 s).
# Dockyard's manager carries the same in config/manager, cert-manager through its chart's values.
loaded_host_patch="$(tr -d '\n' <<<'[
{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--leader-elect-lease-duration=60s"},
{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--leader-elect-renew-deadline=40s"},
{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--leader-elect-retry-period=5s"},
{"op":"add","path":"/spec/template/spec/containers/0/livenessProbe/timeoutSeconds","value":5},
{"op":"add","path":"/spec/template/spec/containers/0/livenessProbe/periodSeconds","value":10},
{"op":"add","path":"/spec/template/spec/containers/0/livenessProbe/failureThreshold","value":6},
{"op":"add","path":"/spec/template/spec/containers/0/readinessProbe/timeoutSeconds","value":5}]')"

# Cluster API's providers: <module dir> <clusterctl provider dir> <components file> <image name>
for p in "core cluster-api core-components.yaml cluster-api-controller" \
	"bootstrap/kubeadm bootstrap-kubeadm bootstrap-components.yaml kubeadm-bootstrap-controller" \
	"controlplane/kubeadm control-plane-kubeadm control-plane-components.yaml kubeadm-control-plane-controller"; do
	set -- $p
	dir="$stage/$2/$capi_version"
	mkdir -p "$dir" "$tmp/$2"
	(
		cd "$tmp/$2"
		"$KUSTOMIZE" create --resources "$(realpath --relative-to=. "$capi/$1/config/default")"
		"$KUSTOMIZE" edit set image "gcr.io/k8s-staging-cluster-api/$4=registry.k8s.io/cluster-api/$4:$capi_version"
		"$KUSTOMIZE" edit add patch --kind Deployment \
			--patch '[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"IfNotPresent"}]'
		"$KUSTOMIZE" edit add patch --kind Deployment --patch "$loaded_host_patch"
	)
	"$KUSTOMIZE" build "$tmp/$2" > "$dir/$3"
	cp "$capi/metadata.yaml" "$dir/metadata.yaml"
done

# cert-manager, as its own release renders it.
cm="$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@$CERT_MANAGER_VERSION" |
	grep '"Dir"' | cut -d'"' -f4)"
# The chart as cert-manager's release assembles it: Chart.yaml from its template, the CRDs
# as one template behind installCRDs.
chart="$tmp/cert-manager-chart"
mkdir -p "$chart/templates"
cp "$cm"/deploy/charts/cert-manager/templates/* "$chart/templates/"
cp "$cm/deploy/charts/cert-manager/values.yaml" "$chart/values.yaml"
sed -e "s/^version: .*/version: $CERT_MANAGER_VERSION/" -e "s/^appVersion: .*/appVersion: $CERT_MANAGER_VERSION/" \
	-e '/^annotations:/,$d' "$cm/deploy/charts/cert-manager/Chart.template.yaml" > "$chart/Chart.yaml"
{
	echo '{{- if .Values.installCRDs }}'
	for f in "$cm"/deploy/crds/crd-*.yaml; do
		echo "---"
		cat "$f"
	done
	echo '{{- end }}'
} > "$chart/templates/crds.yaml"
chmod -R u+w "$chart"
dir="$stage/cert-manager/$CERT_MANAGER_VERSION"
mkdir -p "$dir"
{
	cat "$cm/deploy/manifests/namespace.yaml"
	echo "---"
	"$HELM" template cert-manager "$chart" --namespace cert-manager --api-versions="" --kube-version 1.34.0 \
		--set installCRDs=true --set creator=static --set startupapicheck.enabled=false \
		--set webhook.livenessProbe.timeoutSeconds=5 --set webhook.livenessProbe.failureThreshold=6 \
		--set webhook.readinessProbe.timeoutSeconds=5 | sed -e '1{/^---$/d;}'
} > "$dir/cert-manager.yaml"

if [ -n "${RENDER_ONLY:-}" ]; then
	cp -r "$stage" "$RENDER_ONLY"
	exit 0
fi
go run ./hack/genrepository "$stage"
