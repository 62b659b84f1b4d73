# Dockyard — a Cluster API infrastructure provider that runs Kubernetes nodes as containers.
#
# Everything downloaded or built (tools, Kubernetes binaries, images) is cached outside the
# repository under $(DOCKYARD_CACHE), keyed by version, so a second run is fast.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

DOCKYARD_CACHE ?= $(HOME)/.cache/dockyard
export DOCKYARD_CACHE

VERSION ?= v0.1.0
TOOLS_DIR := $(DOCKYARD_CACHE)/tools

CONTROLLER_GEN_VER := v0.21.0
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VER)
KUSTOMIZE_VER := v5.7.1
KUSTOMIZE := $(TOOLS_DIR)/kustomize-$(KUSTOMIZE_VER)

# Versions of the binaries envtest runs; built from the Go module proxy by `make envtest-assets`.
ENVTEST_KUBERNETES_VERSION ?= v1.34.4
ENVTEST_ETCD_VERSION ?= v3.6.5
ENVTEST_ASSETS := $(DOCKYARD_CACHE)/envtest/$(ENVTEST_KUBERNETES_VERSION)-etcd-$(ENVTEST_ETCD_VERSION)

GO_TEST_FLAGS ?=

# Images the engine tests use; `make images` builds them (see images/images.mk).
TEST_NODE_IMAGE ?= localhost/dockyard/node:$(KUBERNETES_VERSION)
TEST_LB_IMAGE ?= localhost/dockyard/haproxy:latest

include images/images.mk

##@ General

QUICKSTART_IMAGES ?= local
QUICKSTART_FLAGS ?=

.PHONY: quickstart
quickstart: ## Set up everything on this machine and create a 1+1 workload cluster (Ctrl-C deletes it).
	hack/ensure-docker.sh
	@if [ "$(QUICKSTART_IMAGES)" = local ]; then $(MAKE) --no-print-directory images; else $(MAKE) --no-print-directory cni-image; fi
	$(MAKE) --no-print-directory mgmt-binaries
	go run ./cmd/dockyard quickstart --images $(QUICKSTART_IMAGES) --kubernetes-version $(KUBERNETES_VERSION) $(QUICKSTART_FLAGS)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code, CRDs, RBAC and webhook configurations.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=manager-role webhook \
		paths=. paths=./api/... paths=./controllers/... paths=./pkg/webhooks/... \
		output:crd:dir=config/crd/bases output:rbac:dir=config/rbac output:webhook:dir=config/webhook

.PHONY: verify-generate
verify-generate: generate templates ## Fail when generated files differ from the committed ones.
	@if [ -n "$$(git status --porcelain -- api config templates)" ]; then \
		echo "generated files are stale; run 'make generate templates' and commit:"; \
		git status --porcelain -- api config templates; git diff -- api config templates | head -50; exit 1; fi

.PHONY: build
build: ## Build the manager binary into bin/.
	CGO_ENABLED=0 go build -trimpath -o bin/manager .

.PHONY: docker-build
docker-build: build ## Build the manager image localhost/dockyard/manager:dev (no registry needed).
	hack/ensure-docker.sh
	DOCKER_BUILDKIT=0 docker build -t localhost/dockyard/manager:dev .

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd for envtest (cached; skipped when KUBEBUILDER_ASSETS is set).
	@if [ -n "$$KUBEBUILDER_ASSETS" ]; then echo "using KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS"; \
	elif [ -x "$(ENVTEST_ASSETS)/kube-apiserver" ] && [ -x "$(ENVTEST_ASSETS)/etcd" ]; then :; \
	else go run ./cmd/dockyard-build envtest --kubernetes-version $(ENVTEST_KUBERNETES_VERSION) \
		--etcd-version $(ENVTEST_ETCD_VERSION) --dir $(ENVTEST_ASSETS); fi

.PHONY: mgmt-binaries
mgmt-binaries: envtest-assets ## Build the management plane's binaries: Cluster API's managers, clusterctl, kube-controller-manager (cached).
	go run ./cmd/dockyard-mgmt build >/dev/null

.PHONY: test
test: envtest-assets $(KUSTOMIZE) node-image lb-image mgmt-binaries ## Unit, envtest (real kube-apiserver) and real-engine tests.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(ENVTEST_ASSETS)}" KUSTOMIZE="$(KUSTOMIZE)" \
	DOCKYARD_TEST_NODE_IMAGE="$(TEST_NODE_IMAGE)" DOCKYARD_TEST_LB_IMAGE="$(TEST_LB_IMAGE)" \
		go test $(GO_TEST_FLAGS) ./...

.PHONY: test-all
test-all: verify-generate vet test test-images test-e2e ## Everything CI runs (.ci/run): generated files, vet, and every suite.

.PHONY: templates
templates: ## Write the clusterctl flavors in templates/ from templates/src/ and the CNI manifest.
	go run ./hack/gentemplates

E2E_ARTIFACTS ?= $(DOCKYARD_CACHE)/e2e-artifacts
E2E_FLAGS ?=

.PHONY: test-e2e
test-e2e: images mgmt-binaries ## End to end: Cluster API's controllers drive Dockyard on the real engine.
	E2E_ARTIFACTS="$(E2E_ARTIFACTS)" E2E_KUBERNETES_VERSION=$(KUBERNETES_VERSION) E2E_LB_IMAGE="$(TEST_LB_IMAGE)" \
		go test -tags e2e ./test/e2e -count=1 -v -timeout 85m -ginkgo.v -ginkgo.timeout 80m $(E2E_FLAGS)

##@ Release

# release-manifests lays out a clusterctl local repository in out/repository: Dockyard's
# components, metadata, flavors and ClusterClasses; Cluster API's core, kubeadm bootstrap and
# kubeadm control plane components built from the kustomize trees of the cluster-api module
# go.mod requires; cert-manager's manifest rendered from its chart in the cert-manager module
# (helm built from the module proxy). out/clusterctl.yaml points clusterctl at all of it, so
# `clusterctl init --infrastructure dockyard --config out/clusterctl.yaml` needs no network.
.PHONY: release-manifests
release-manifests: RELEASE_REPOSITORY = $(CURDIR)/out/repository
release-manifests: RELEASE_CAPI_VERSION = $(shell go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)
release-manifests: RELEASE_CERT_MANAGER_VERSION = v1.21.1
release-manifests: RELEASE_HELM = $(TOOLS_DIR)/helm-v3.22.0
release-manifests: $(KUSTOMIZE) templates ## Write the clusterctl repository out/repository, out/clusterctl.yaml and out/infrastructure-components.yaml.
	rm -rf out/repository out/clusterctl.yaml
	mkdir -p out/repository/infrastructure-dockyard/$(VERSION)
	$(KUSTOMIZE) build config/default > out/infrastructure-components.yaml
	cp metadata.yaml out/metadata.yaml
	cp out/infrastructure-components.yaml out/metadata.yaml templates/cluster-template*.yaml templates/clusterclass-*.yaml \
		out/repository/infrastructure-dockyard/$(VERSION)/
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	capi="$$(go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"; \
	for p in "core cluster-api core-components.yaml cluster-api-controller" \
		"bootstrap/kubeadm bootstrap-kubeadm bootstrap-components.yaml kubeadm-bootstrap-controller" \
		"controlplane/kubeadm control-plane-kubeadm control-plane-components.yaml kubeadm-control-plane-controller"; do \
		set -- $$p; dir="$(RELEASE_REPOSITORY)/$$2/$(RELEASE_CAPI_VERSION)"; mkdir -p "$$dir" "$$tmp/$$2"; \
		(cd "$$tmp/$$2" && $(KUSTOMIZE) create --resources "$$(realpath --relative-to=. "$$capi/$$1/config/default")" && \
			$(KUSTOMIZE) edit set image "gcr.io/k8s-staging-cluster-api/$$4=registry.k8s.io/cluster-api/$$4:$(RELEASE_CAPI_VERSION)" && \
			$(KUSTOMIZE) edit add patch --kind Deployment \
				--patch '[{"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"IfNotPresent"}]'); \
		$(KUSTOMIZE) build "$$tmp/$$2" > "$$dir/$$3"; \
		cp "$$capi/metadata.yaml" "$$dir/metadata.yaml"; \
	done; \
	[ -x "$(RELEASE_HELM)" ] || hack/go-install.sh helm.sh/helm/v3/cmd/helm v3.22.0 "$(RELEASE_HELM)"; \
	cm="$$(cd "$$tmp" && GOFLAGS=-mod=mod go mod download -json github.com/cert-manager/cert-manager@$(RELEASE_CERT_MANAGER_VERSION) | \
		grep '"Dir"' | cut -d'"' -f4)"; \
	cp -r "$$cm/deploy/charts/cert-manager" "$$tmp/cert-manager-chart"; chmod -R u+w "$$tmp/cert-manager-chart"; \
	sed -i -e 's/^version: .*/version: $(RELEASE_CERT_MANAGER_VERSION)/' -e 's/^appVersion: .*/appVersion: $(RELEASE_CERT_MANAGER_VERSION)/' \
		"$$tmp/cert-manager-chart/Chart.yaml"; \
	dir="$(RELEASE_REPOSITORY)/cert-manager/$(RELEASE_CERT_MANAGER_VERSION)"; mkdir -p "$$dir"; \
	{ cat "$$cm/deploy/manifests/namespace.yaml"; echo "---"; \
		"$(RELEASE_HELM)" template cert-manager "$$tmp/cert-manager-chart" --namespace cert-manager --kube-version 1.29.0 \
			--set crds.enabled=true --set creator=static --set startupapicheck.enabled=false | sed -e '1{/^---$$/d;}'; \
	} > "$$dir/cert-manager.yaml"
	@{ echo "# Written by make release-manifests: clusterctl reads every provider and cert-manager from"; \
	  echo "# the local repository next to this file. Use with --config $(CURDIR)/out/clusterctl.yaml."; \
	  echo "providers:"; \
	  echo "- {name: cluster-api, type: CoreProvider, url: $(RELEASE_REPOSITORY)/cluster-api/$(RELEASE_CAPI_VERSION)/core-components.yaml}"; \
	  echo "- {name: kubeadm, type: BootstrapProvider, url: $(RELEASE_REPOSITORY)/bootstrap-kubeadm/$(RELEASE_CAPI_VERSION)/bootstrap-components.yaml}"; \
	  echo "- {name: kubeadm, type: ControlPlaneProvider, url: $(RELEASE_REPOSITORY)/control-plane-kubeadm/$(RELEASE_CAPI_VERSION)/control-plane-components.yaml}"; \
	  echo "- {name: dockyard, type: InfrastructureProvider, url: $(RELEASE_REPOSITORY)/infrastructure-dockyard/$(VERSION)/infrastructure-components.yaml}"; \
	  echo "cert-manager:"; \
	  echo "  url: $(RELEASE_REPOSITORY)/cert-manager/$(RELEASE_CERT_MANAGER_VERSION)/cert-manager.yaml"; \
	  echo "  version: $(RELEASE_CERT_MANAGER_VERSION)"; \
	  echo "# No GitHub: do not look for a newer clusterctl."; \
	  echo 'CLUSTERCTL_DISABLE_VERSIONCHECK: "true"'; \
	  echo "# ClusterClass (the topology flavor) needs the ClusterTopology feature in Cluster API."; \
	  echo 'CLUSTER_TOPOLOGY: "true"'; \
	} > out/clusterctl.yaml
	@echo "clusterctl repository in out/repository; config out/clusterctl.yaml"

##@ Tools

$(CONTROLLER_GEN):
	hack/go-install.sh sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_GEN_VER) $@

$(KUSTOMIZE):
	hack/go-install.sh sigs.k8s.io/kustomize/kustomize/v5 $(KUSTOMIZE_VER) $@
