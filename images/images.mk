# Image targets, included from the Makefile. No registry is needed: Debian comes from
# debootstrap, Kubernetes, etcd, CoreDNS and flannel are built from the Go module proxy, and the
# images are assembled and loaded into the local engine by cmd/dockyard-build. Everything is
# cached under $(DOCKYARD_CACHE); an image whose inputs did not change is not rebuilt.
# Building needs root (debootstrap, chroot). See docs/images.md.

KUBERNETES_VERSION ?= v1.34.4
FLANNEL_VERSION ?= v0.28.10
# cert-manager's newest release whose commands the Go module proxy serves (docs/images.md).
CERT_MANAGER_VERSION ?= v1.11.5
DOCKYARD_CACHE ?= $(HOME)/.cache/dockyard
# Extra flags for dockyard-build, e.g. IMAGE_BUILD_FLAGS=--force.
IMAGE_BUILD_FLAGS ?=

DOCKYARD_BUILD := go run ./cmd/dockyard-build

##@ Images

# Kubernetes versions (comma-separated) clusters of the node image are upgraded from or to: their
# kube-proxy and CoreDNS images are preloaded too (docs/images.md; make test-e2e-full sets it).
NODE_IMAGE_ADDONS_OF ?=
NODE_IMAGE_REPOSITORY ?= localhost/dockyard/node

.PHONY: node-image
node-image: ## Build the node image $(NODE_IMAGE_REPOSITORY):$(KUBERNETES_VERSION) (cached); NODE_IMAGE_ADDONS_OF=<versions> also preloads their add-ons.
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) node-image --cache "$(DOCKYARD_CACHE)" --kubernetes-version $(KUBERNETES_VERSION) \
		--flannel-version $(FLANNEL_VERSION) --repository $(NODE_IMAGE_REPOSITORY) \
		$(if $(NODE_IMAGE_ADDONS_OF),--addons-of $(NODE_IMAGE_ADDONS_OF)) $(IMAGE_BUILD_FLAGS)

.PHONY: lb-image
lb-image: ## Build the load balancer image localhost/dockyard/haproxy:<Debian haproxy version> (cached).
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) lb-image --cache "$(DOCKYARD_CACHE)" $(IMAGE_BUILD_FLAGS)

.PHONY: cni-image
cni-image: ## Build the CNI image localhost/dockyard/flannel:$(FLANNEL_VERSION) (cached).
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) cni-image --cache "$(DOCKYARD_CACHE)" --flannel-version $(FLANNEL_VERSION) $(IMAGE_BUILD_FLAGS)

# The local registry's release of distribution (dockyard registry create runs it).
DISTRIBUTION_VERSION ?= v3.1.2

.PHONY: registry-image
registry-image: ## Build the local registry image localhost/dockyard/registry:$(DISTRIBUTION_VERSION) (distribution's registry, cached).
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) registry-image --cache "$(DOCKYARD_CACHE)" --version $(DISTRIBUTION_VERSION) $(IMAGE_BUILD_FLAGS)

# The release of kube-router whose firewall enforces NetworkPolicies where asked (--network-policy).
KUBE_ROUTER_VERSION ?= v2.1.0

.PHONY: netpol-image
netpol-image: ## Build the network policy image localhost/dockyard/kube-router:$(KUBE_ROUTER_VERSION) (kube-router's firewall, cached).
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) netpol-image --cache "$(DOCKYARD_CACHE)" --version $(KUBE_ROUTER_VERSION) $(IMAGE_BUILD_FLAGS)

.PHONY: capi-test-extension
capi-test-extension: $(KUSTOMIZE) ## Build Cluster API's test extension (its Runtime SDK server, for the Runtime SDK upgrade spec) of the Cluster API test/capie2e requires, as localhost/dockyard/capi-test-extension:<version>, and its components into out/capi-test-extension (cached).
	hack/ensure-docker.sh
	KUSTOMIZE="$(KUSTOMIZE)" BUILD_IMAGE='$(DOCKYARD_BUILD) capi-test-extension-image --cache $(DOCKYARD_CACHE) $(IMAGE_BUILD_FLAGS)' \
		hack/capi-test-extension.sh

.PHONY: component-images
component-images: ## Build the images clusterctl installs: Dockyard's manager:$(VERSION), Cluster API's controllers, cert-manager $(CERT_MANAGER_VERSION) (cached).
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) component-images --cache "$(DOCKYARD_CACHE)" --version $(VERSION) \
		--cluster-api-version $$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api) \
		--cert-manager-version $(CERT_MANAGER_VERSION) $(IMAGE_BUILD_FLAGS)

# Kubernetes conformance without a registry (docs/testing.md#kubernetes-conformance): e2e.test,
# ginkgo, the KUBE_TEST_REPO_LIST file and the images the [Conformance] tests run, named under
# CONFORMANCE_IMAGE_PREFIX, which Dockyard's default load policy lets clusters of namespace
# CONFORMANCE_NAMESPACE load.
CONFORMANCE_NAMESPACE ?= conformance
CONFORMANCE_IMAGE_PREFIX ?= localhost/$(CONFORMANCE_NAMESPACE)/e2e
CONFORMANCE_DIR ?= $(DOCKYARD_CACHE)/conformance/$(KUBERNETES_VERSION)

# CONFORMANCE_IMAGES, when set, names the only images to build (agnhost busybox ...), and no
# image for Cluster API's kubetest: make test-conformance-focused sets it to what its specs run.
CONFORMANCE_IMAGES ?=
comma := ,
space := $(subst ,, )

.PHONY: conformance-images
conformance-images: ## Build e2e.test, ginkgo and the images Kubernetes' conformance tests run (those CONFORMANCE_IMAGES names, else all), named under $(CONFORMANCE_IMAGE_PREFIX), into $(CONFORMANCE_DIR), and registry.k8s.io/conformance:$(KUBERNETES_VERSION) for Cluster API's kubetest (cached).
	hack/ensure-docker.sh
	$(DOCKYARD_BUILD) conformance --cache "$(DOCKYARD_CACHE)" --kubernetes-version $(KUBERNETES_VERSION) \
		--prefix $(CONFORMANCE_IMAGE_PREFIX) --dir "$(CONFORMANCE_DIR)" \
		$(if $(strip $(CONFORMANCE_IMAGES)),--images $(subst $(space),$(comma),$(strip $(CONFORMANCE_IMAGES))) --runner-image none) $(IMAGE_BUILD_FLAGS)

.PHONY: images
images: node-image lb-image cni-image ## Build the node, load balancer and CNI images (in Docker); with CONTAINER_RUNTIME=podman or containerd, load them into that engine too.
	@if [ "$(CONTAINER_RUNTIME)" != docker ]; then \
		$(MAKE) --no-print-directory ensure-engine && \
		$(DOCKYARD_BUILD) load --container-runtime $(CONTAINER_RUNTIME) --container-runtime-endpoint "$(CONTAINER_RUNTIME_ENDPOINT)" \
			localhost/dockyard/node:$(KUBERNETES_VERSION) localhost/dockyard/haproxy:latest localhost/dockyard/flannel:$(FLANNEL_VERSION); fi

# Extra flags for the image proof, e.g. IMAGES_TEST_FLAGS='-run TestNodeImage'.
IMAGES_TEST_FLAGS ?=

.PHONY: test-images
test-images: images ## Prove the images on Dockyard's node layer: kubeadm init and join, flannel, no pulls (test/images).
	IMAGES_KUBERNETES_VERSION=$(KUBERNETES_VERSION) IMAGES_FLANNEL_IMAGE=localhost/dockyard/flannel:$(FLANNEL_VERSION) \
	DOCKYARD_TEST_NODE_IMAGE=localhost/dockyard/node:$(KUBERNETES_VERSION) \
		go test -tags images ./test/images -count=1 -v -timeout 40m $(IMAGES_TEST_FLAGS)
