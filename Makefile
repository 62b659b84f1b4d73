# Dockyard — a Cluster API infrastructure provider that runs Kubernetes nodes as containers.
#
# Everything downloaded or built (tools, Kubernetes binaries, images) is cached outside the
# repository under $(DOCKYARD_CACHE), keyed by version, so a second run is fast.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

DOCKYARD_CACHE ?= $(HOME)/.cache/dockyard
export DOCKYARD_CACHE

# One set of Go build settings for every go command run here, the shipped binaries' (static, no
# local paths in them): a package compiled for a test, a vet or a lint is then the one the
# manager, the dockyard command and the image builder link, instead of a second compilation of
# every dependency with cgo's settings.
export CGO_ENABLED := 0
GOFLAGS += -trimpath
export GOFLAGS

VERSION ?= v0.1.0
TOOLS_DIR := $(DOCKYARD_CACHE)/tools

CONTROLLER_GEN_VER := v0.21.0
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VER)
KUSTOMIZE_VER := v5.7.1
KUSTOMIZE := $(TOOLS_DIR)/kustomize-$(KUSTOMIZE_VER)
GOLANGCI_LINT_VER := v2.15.0
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VER)
# helm renders cert-manager's manifest from its chart (hack/release-manifests.sh).
HELM_VER := v3.22.0
HELM := $(TOOLS_DIR)/helm-$(HELM_VER)
# Writes each release image's SBOM (CycloneDX) from the modules its Go binary records.
CYCLONEDX_GOMOD_VER := v1.10.0
CYCLONEDX_GOMOD := $(TOOLS_DIR)/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VER)

# Versions of the binaries envtest runs; built from the Go module proxy by `make envtest-assets`.
ENVTEST_KUBERNETES_VERSION ?= v1.34.4
ENVTEST_ETCD_VERSION ?= v3.6.5
ENVTEST_ASSETS := $(DOCKYARD_CACHE)/envtest/$(ENVTEST_KUBERNETES_VERSION)-etcd-$(ENVTEST_ETCD_VERSION)

GO_TEST_FLAGS ?=

# The engine nodes run on: docker (the default), podman or containerd; an empty endpoint is the
# engine's default address (docs/runtimes.md). The image builder itself runs on Docker; its
# images are loaded into the other engines (make engine-images).
CONTAINER_RUNTIME ?= docker
CONTAINER_RUNTIME_ENDPOINT ?=
# The engines besides Docker that `make test-all` proves.
OTHER_ENGINES ?= podman containerd
ENGINE_ENV = DOCKYARD_CONTAINER_RUNTIME=$(CONTAINER_RUNTIME) DOCKYARD_CONTAINER_RUNTIME_ENDPOINT="$(CONTAINER_RUNTIME_ENDPOINT)"

# Images the engine tests use; `make images` builds them (see images/images.mk).
TEST_NODE_IMAGE ?= localhost/dockyard/node:$(KUBERNETES_VERSION)
TEST_LB_IMAGE ?= localhost/dockyard/haproxy:latest

include images/images.mk

##@ General

QUICKSTART_IMAGES ?= local
QUICKSTART_FLAGS ?=

.PHONY: quickstart
quickstart: ## Set up everything on this machine: a management cluster in containers with Cluster API and Dockyard installed by clusterctl, and a 1+1 workload cluster (both persist); ends with each step's time (hack/quickstart.sh). CONTAINER_RUNTIME=podman runs them on Podman.
	@if [ "$(CONTAINER_RUNTIME)" = containerd ]; then echo "make quickstart runs Dockyard's manager in a pod, which cannot drive Dockyard's containerd runtime (it keeps networks and volumes on the host): use CONTAINER_RUNTIME=docker or podman; make test-e2e-engine CONTAINER_RUNTIME=containerd runs a cluster on containerd (docs/runtimes.md)" >&2; exit 2; fi
	MAKE="$(MAKE)" CONTAINER_RUNTIME="$(CONTAINER_RUNTIME)" CONTAINER_RUNTIME_ENDPOINT="$(CONTAINER_RUNTIME_ENDPOINT)" \
		KUBERNETES_VERSION="$(KUBERNETES_VERSION)" QUICKSTART_IMAGES="$(QUICKSTART_IMAGES)" QUICKSTART_FLAGS="$(QUICKSTART_FLAGS)" \
		DOCKYARD_CACHE="$(DOCKYARD_CACHE)" hack/quickstart.sh

.PHONY: quickstart-delete
quickstart-delete: ## Delete every workload cluster through Cluster API, then the management cluster: nothing is left on the engine.
	go run ./cmd/dockyard delete management --container-runtime $(CONTAINER_RUNTIME) --container-runtime-endpoint "$(CONTAINER_RUNTIME_ENDPOINT)"

.PHONY: dockyard
dockyard: ## Build the dockyard command line into bin/dockyard (dockyard --help; completion: dockyard completion bash).
	go build -o bin/dockyard ./cmd/dockyard

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code, CRDs, RBAC and webhook configurations.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true rbac:roleName=manager-role webhook \
		paths=./cmd/manager/... paths=./api/... paths=./controllers/... paths=./pkg/webhooks/... \
		output:crd:dir=config/crd/bases output:rbac:dir=config/rbac output:webhook:dir=config/webhook

.PHONY: verify-generate
verify-generate: generate templates ## Fail when generated files differ from the committed ones (the clusterctl repository's: make test-clusterctl).
	@hack/verify-committed.sh "make generate templates" api config templates

.PHONY: build
build: ## Build the manager binary into bin/.
	CGO_ENABLED=0 go build -trimpath -o bin/manager .

.PHONY: docker-build
docker-build: build ## Build the manager image localhost/dockyard/manager:$(VERSION) from the Dockerfile (make component-images builds it too, with the other components).
	hack/ensure-docker.sh
	DOCKER_BUILDKIT=0 docker build -t localhost/dockyard/manager:$(VERSION) .

# Go modules of the repository: Dockyard, and the suite of Cluster API's shared specs.
GO_MODULES := . test/capie2e

.PHONY: vet
vet: ## Run go vet on every module.
	for m in $(GO_MODULES); do (cd $$m && go vet -tags e2e,images,release ./...) || exit 1; done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml: errors, the floors' imports, the one door to engines and the one picker of them) on every module, the e2e and image proof code included; then hack/house, the bounds of the node layer's surface and of function lengths.
	for m in $(GO_MODULES); do (cd $$m && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...) || exit 1; done
	go run ./hack/house

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver and etcd for envtest (cached; skipped when KUBEBUILDER_ASSETS is set).
	@if [ -n "$$KUBEBUILDER_ASSETS" ]; then echo "using KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS"; \
	elif [ -x "$(ENVTEST_ASSETS)/kube-apiserver" ] && [ -x "$(ENVTEST_ASSETS)/etcd" ]; then :; \
	else go run ./cmd/dockyard-build envtest --kubernetes-version $(ENVTEST_KUBERNETES_VERSION) \
		--etcd-version $(ENVTEST_ETCD_VERSION) --dir $(ENVTEST_ASSETS); fi

.PHONY: mgmt-binaries
mgmt-binaries: envtest-assets ## Build the management plane's binaries: Cluster API's managers, clusterctl, kube-controller-manager (cached).
	go run ./test/cmd/dockyard-mgmt build >/dev/null

# Packages with a target of their own, which provides what they need: the other engines' (make
# test-engines) and the real clusterctl's (make test-clusterctl). Elsewhere they skip, or fail in
# CI, where a test that cannot run never passes.
OWN_TARGET_PACKAGES = /pkg/container/podman /pkg/container/containerd /pkg/container/kubernetes/onacluster /test/clusterctl

.PHONY: test-deps
test-deps: envtest-assets $(KUSTOMIZE) node-image lb-image registry-image mgmt-binaries ## What make test needs built (a row of its own in make test-all, which says what CPU it used).

.PHONY: test
test: test-deps ## Unit, envtest (real kube-apiserver) and real-engine tests.
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(ENVTEST_ASSETS)}" KUSTOMIZE="$(KUSTOMIZE)" \
	DOCKYARD_TEST_NODE_IMAGE="$(TEST_NODE_IMAGE)" DOCKYARD_TEST_LB_IMAGE="$(TEST_LB_IMAGE)" \
		go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v $(foreach p,$(OWN_TARGET_PACKAGES),-e '$(p)$$'))
	cd test/capie2e && go test $(GO_TEST_FLAGS) ./...
	bash hack/lib/pidfile_test.sh
	bash hack/lib/podchurn_test.sh
	bash hack/run-targets_test.sh

# test-e2e-capi,test-other-engines: at once (Cluster API's specs on Docker, Dockyard's on Podman
# and containerd), as they wait on different engines' containers; test-e2e, which restarts
# Docker, runs alone.
# make test-kubernetes-engine is not among them: with it a cold run took 68 min (ed34d53), over
# the 65 CI allows; make test-e2e-full runs it.
TEST_ALL_TARGETS = verify-generate test-deps test test-clusterctl test-e2e test-e2e-capi,test-other-engines test-conformance-focused
# Beside the targets, in one session at the lowest CPU priority (hack/run-targets.sh): the builds
# later targets need, in the order they need them, then the checks that need no engine. On two
# cores the suites leave about 70 % of the CPU idle while they wait on containers; these use it.
# A check counts like a target (its failure fails the run, with its output); one not finished
# beside when the targets end runs then. golangci-lint, which only the checks need, is built
# after what test-clusterctl and test-e2e need: before them, in the cold run of baa1ecf,
# test-e2e waited 75 s for the component images.
TEST_ALL_BESIDE = $(HELM) component-images $(GOLANGCI_LINT) conformance-images-focused
# make fuzz is not among them: a campaign of 15 000 inputs per commit finds little, and its
# instrumented build of the standard library cost a cold run about 6 core-minutes; make test runs
# the fuzz targets' seed corpus, and make test-e2e-full, run before a release, runs make fuzz.
# Nor is make vet: lint's govet runs go vet's analyzers on the same modules, tags and tests (34 of
# go vet's 35, as GL_DEBUG=govet lists them; loopclosure, left out, reports nothing in a module of
# Go 1.22 or later); vet's own compilation cost a cold run 2.2 core-minutes.
TEST_ALL_CHECKS = lint

.PHONY: test-all
test-all: ## Everything CI runs (.ci/run): generated files and every suite, on every engine (Cluster API's shared specs: the blocking set), with TEST_ALL_BESIDE built and TEST_ALL_CHECKS (lint, go vet's analyzers included) run beside at the lowest priority; ends with each target's time.
	MAKE="$(MAKE)" hack/run-targets.sh --beside "$(TEST_ALL_BESIDE)" --checks "$(TEST_ALL_CHECKS)" $(TEST_ALL_TARGETS)

##@ Engines

.PHONY: ensure-engine
ensure-engine: ## Install and start CONTAINER_RUNTIME's engine if it does not answer (and Docker, where images are built).
	hack/ensure-docker.sh
	@if [ "$(CONTAINER_RUNTIME)" != docker ]; then hack/ensure-$(CONTAINER_RUNTIME).sh; fi

.PHONY: engine-images
engine-images: images ## The same as make images: with CONTAINER_RUNTIME=podman or containerd, its engine is started and the images loaded into it.

.PHONY: test-engine
test-engine: test-engine-runtime ## On CONTAINER_RUNTIME: the runtime conformance suite, then the image proof (kubeadm init and join on Dockyard's node layer).
	$(ENGINE_ENV) $(MAKE) --no-print-directory test-images

.PHONY: test-engine-runtime
test-engine-runtime: engine-images
	$(ENGINE_ENV) DOCKYARD_TEST_LB_IMAGE="$(TEST_LB_IMAGE)" go test ./pkg/container/$(CONTAINER_RUNTIME)/ -count=1 -v -timeout 20m $(GO_TEST_FLAGS)

.PHONY: test-kubernetes-engine
test-kubernetes-engine: node-image dockyard conformance-images-focused ## The Kubernetes engine (nodes as Pods) on an infrastructure cluster made for it and deleted after: the runtime's suite and a node of the node image booting as a Pod (hack/test-kubernetes-engine.sh).
	DOCKYARD="$(CURDIR)/bin/dockyard" KUBECONFIG_DIR="$(DOCKYARD_CACHE)/kubernetes-engine" NODE_IMAGE="$(TEST_NODE_IMAGE)" \
		TEST_IMAGE=localhost/conformance/e2e/busybox:1.37.0-1 GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/test-kubernetes-engine.sh

.PHONY: test-engines
test-engines: ## The runtime conformance suite on each of OTHER_ENGINES (Docker's is in make test); make test-e2e-engines boots clusters on them.
	for engine in $(OTHER_ENGINES); do $(MAKE) --no-print-directory test-engine-runtime CONTAINER_RUNTIME=$$engine || exit 1; done

.PHONY: test-other-engines
test-other-engines: ## Everything make test-all runs on OTHER_ENGINES: make test-engines, then make test-e2e-engines.
	$(MAKE) --no-print-directory test-engines
	$(MAKE) --no-print-directory test-e2e-engines

.PHONY: test-e2e-engine
test-e2e-engine: E2E_ARTIFACTS_SUBDIR = /$(CONTAINER_RUNTIME)
test-e2e-engine: engine-images registry-image release-manifests mgmt-binaries ginkgo ## The end-to-end specs labelled "engines" (the daily loop: a 1+1 cluster, images, Services, logs, deletion) on CONTAINER_RUNTIME.
	$(DOCKYARD_BUILD) load --container-runtime $(CONTAINER_RUNTIME) --container-runtime-endpoint "$(CONTAINER_RUNTIME_ENDPOINT)" \
		localhost/dockyard/registry:$(DISTRIBUTION_VERSION)
	$(ENGINE_ENV) $(E2E_GINKGO) --timeout 25m --label-filter=engines $(E2E_FLAGS) ./test/e2e

.PHONY: test-e2e-engines
test-e2e-engines: ## test-e2e-engine on each of OTHER_ENGINES.
	for engine in $(OTHER_ENGINES); do $(MAKE) --no-print-directory test-e2e-engine CONTAINER_RUNTIME=$$engine || exit 1; done

# How many inputs each fuzz target runs in `make fuzz` (about 25 s for ParseCloudConfig and 15 s
# for ParseIgnition on two cores). A count, not a duration: Go 1.26's fuzz coordinator can report
# its own -fuzztime deadline as a failure ("context deadline exceeded", no crasher written;
# go.dev/issue/75804, fixed in Go 1.27), and a count sets no deadline. New inputs are minimized for
# at most a second: with Go's default (a minute) the fuzzer spent its time shrinking the multi-KiB
# seeds (real bootstrap data) and ran a dozen inputs in 30 s.
FUZZ_TIME ?= 15000x

.PHONY: fuzz
fuzz: ## Fuzz the bootstrap data parsers for FUZZ_TIME inputs each: no panic, deterministic plans, no secret in what they say.
	for target in FuzzParseCloudConfig FuzzParseIgnition; do \
		go test ./pkg/bootstrap -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZ_TIME) -fuzzminimizetime 1s || exit 1; \
	done

.PHONY: templates
templates: ## Write the clusterctl flavors in templates/ from templates/src/, inlining the CNI installer images/cni/install-cni.sh.
	go run ./hack/gentemplates

E2E_ARTIFACTS ?= $(DOCKYARD_CACHE)/e2e-artifacts
# Every end-to-end run first checks that the filesystems of the engine's data root and of Go's
# build cache have E2E_MIN_FREE_GB free for this user (hack/check-disk.sh; 0 turns it off): a
# full disk otherwise fails a run late, as "write: broken pipe" from a node's image import.
E2E_MIN_FREE_GB ?= 20
CHECK_DISK = E2E_MIN_FREE_GB=$(E2E_MIN_FREE_GB) "$(CURDIR)/hack/check-disk.sh"
# Ginkgo's command line flags (--focus, --label-filter, ...), e.g. E2E_FLAGS="--focus='IP family'".
E2E_FLAGS ?=
# How many processes run the suite's specs at once, each with a management plane of its own: the
# specs mostly wait on containers, and the chaos specs (Serial) run alone after the others.
E2E_PROCS ?= 2
# Ginkgo's command line, built from go.mod's version: it runs a suite's specs in parallel
# processes, which go test cannot.
GINKGO := $(TOOLS_DIR)/ginkgo
E2E_GINKGO = E2E_ARTIFACTS="$(E2E_ARTIFACTS)$(E2E_ARTIFACTS_SUBDIR)" E2E_KUBERNETES_VERSION=$(KUBERNETES_VERSION) E2E_LB_IMAGE="$(TEST_LB_IMAGE)" \
	$(CHECK_DISK) $(GINKGO) run --tags e2e -v --no-color --fail-on-empty --output-dir "$(E2E_ARTIFACTS)$(E2E_ARTIFACTS_SUBDIR)" --junit-report junit.xml

.PHONY: test-e2e
test-e2e: images registry-image component-images release-manifests mgmt-binaries ginkgo ## End to end: Cluster API's controllers drive Dockyard on the real engine, and the daily loop of the dockyard command line.
	$(E2E_GINKGO) --procs $(E2E_PROCS) --timeout 80m --label-filter='!release && !lifecycle' $(E2E_FLAGS) ./test/e2e

.PHONY: test-e2e-lifecycle
test-e2e-lifecycle: E2E_ARTIFACTS_SUBDIR = /lifecycle
test-e2e-lifecycle: images registry-image component-images release-manifests mgmt-binaries ginkgo ## Lifecycle chaos (label lifecycle, and the engine's restart under a management cluster in containers): clusters with MachinePools made and deleted while the manager is killed at random, an infrastructure cluster deleted under its clusters, a namespace deleted with clusters in it; every deletion ends and leaves nothing.
	$(E2E_GINKGO) --timeout 60m --label-filter='lifecycle || engine-restart' $(E2E_FLAGS) ./test/e2e

.PHONY: test-e2e-release
test-e2e-release: E2E_ARTIFACTS_SUBDIR = /release
test-e2e-release: images component-images release-manifests mgmt-binaries ginkgo upgrade-node-images ## Dockyard's own specs that run before a release (label release): dockyard upgrade cluster from KUBERNETES_VERSION_UPGRADE_FROM, and clusters from kind's networking settings, from a directory holding only the binary.
	E2E_NODE_IMAGE_REPOSITORY=$(UPGRADE_NODE_IMAGE_REPOSITORY) E2E_KUBERNETES_VERSION_UPGRADE_FROM=$(KUBERNETES_VERSION_UPGRADE_FROM) \
		$(E2E_GINKGO) --timeout 30m --label-filter=release $(E2E_FLAGS) ./test/e2e

# Cluster API's own end-to-end specs (sigs.k8s.io/cluster-api/test/e2e) on Dockyard: the suite in
# test/capie2e (its own Go module). CI runs the specs labelled "blocking"; test-e2e-full runs
# every spec, the Kubernetes upgrades from KUBERNETES_VERSION_UPGRADE_FROM included.
CAPI_E2E_ARTIFACTS ?= $(DOCKYARD_CACHE)/capi-e2e-artifacts
CAPI_E2E_FLAGS ?=
KUBERNETES_VERSION_UPGRADE_FROM ?= v1.33.13
# The full run's workload nodes: images of both versions, each preloading the other's add-ons
# (kube-proxy, CoreDNS), which nodes of both versions run during an upgrade.
UPGRADE_NODE_IMAGE_REPOSITORY ?= localhost/dockyard/node-upgrades
CAPI_E2E_ENV ?=
CAPI_E2E_RUN = rm -rf "$(CAPI_E2E_ARTIFACTS)" && $(CHECK_DISK) && cd test/capie2e/e2e && E2E_ARTIFACTS="$(CAPI_E2E_ARTIFACTS)" CONFORMANCE_DIR="$(CONFORMANCE_DIR)" $(CAPI_E2E_ENV) \
	go test -tags e2e . -count=1 -v -timeout 300m -ginkgo.v -ginkgo.no-color -ginkgo.timeout 295m -ginkgo.fail-on-empty

.PHONY: test-e2e-capi
test-e2e-capi: images component-images release-manifests ## Cluster API's shared specs labelled blocking (ClusterClass and Ignition quick starts) and Dockyard's install and router specs, on a management cluster in containers.
	$(CAPI_E2E_RUN) -ginkgo.label-filter=blocking $(CAPI_E2E_FLAGS)

.PHONY: test-e2e-full-capi
test-e2e-full-capi: images component-images netpol-image release-manifests conformance-images upgrade-node-images e2e-previous-release capi-test-extension ## make test-e2e-full's first step: every Cluster API shared spec test/capie2e runs but those of nodes as Pods.
	$(MAKE) --no-print-directory test-e2e-capi-run CAPI_E2E_ENV='DOCKYARD_NODE_IMAGE_REPOSITORY=$(UPGRADE_NODE_IMAGE_REPOSITORY) $(CAPI_E2E_UPGRADE_ENV) $(E2E_INMEMORY_ENV)' \
		CAPI_E2E_FLAGS="-ginkgo.label-filter='!kubernetes' $(CAPI_E2E_FLAGS)"

.PHONY: test-e2e-full
test-e2e-full: test-e2e-full-capi ## Every Cluster API shared spec test/capie2e runs, upgrades from KUBERNETES_VERSION_UPGRADE_FROM, clusterctl upgrade from FIRST_RELEASE and from IN_MEMORY_RELEASE (an in-memory workload cluster) and Kubernetes conformance through Cluster API's kubetest included (on node images carrying both versions' add-ons), then make test-kubernetes-engine, make test-e2e-kubernetes, make test-e2e-release, make test-e2e-lifecycle and make fuzz.
	$(MAKE) --no-print-directory test-kubernetes-engine
	$(MAKE) --no-print-directory test-e2e-kubernetes-run
	$(MAKE) --no-print-directory test-e2e-release
	$(MAKE) --no-print-directory test-e2e-lifecycle
	$(MAKE) --no-print-directory fuzz

.PHONY: upgrade-node-images
upgrade-node-images: ## Node images of KUBERNETES_VERSION_UPGRADE_FROM and KUBERNETES_VERSION under UPGRADE_NODE_IMAGE_REPOSITORY, each preloading the other's add-ons.
	$(MAKE) --no-print-directory node-image NODE_IMAGE_REPOSITORY=$(UPGRADE_NODE_IMAGE_REPOSITORY) \
		KUBERNETES_VERSION=$(KUBERNETES_VERSION_UPGRADE_FROM) NODE_IMAGE_ADDONS_OF=$(KUBERNETES_VERSION)
	$(MAKE) --no-print-directory node-image NODE_IMAGE_REPOSITORY=$(UPGRADE_NODE_IMAGE_REPOSITORY) \
		KUBERNETES_VERSION=$(KUBERNETES_VERSION) NODE_IMAGE_ADDONS_OF=$(KUBERNETES_VERSION_UPGRADE_FROM)

# The releases Cluster API's clusterctl upgrade spec starts from, each made of its tree by make
# release, its images named for the local registry the spec publishes them into, on its own host
# port: FIRST_RELEASE, with a workload cluster of containers; and IN_MEMORY_RELEASE, the first
# with the in-memory engine, with an in-memory workload cluster. No release of Dockyard has that
# engine yet, so IN_MEMORY_RELEASE is a pre-release of UPGRADE_RELEASE's series made of
# IN_MEMORY_RELEASE_SOURCE's tree, its metadata given that series as its release commit would.
# The spec lists this tree as UPGRADE_RELEASE, and initializes with the clusterctl the
# management plane builds.
E2E_RELEASE_REGISTRY_PORT ?= 5011
E2E_IN_MEMORY_RELEASE_REGISTRY_PORT ?= 5012
IN_MEMORY_RELEASE ?= v0.2.0-alpha.0
IN_MEMORY_RELEASE_SOURCE ?= f50a9de
E2E_RELEASES_DIR ?= $(DOCKYARD_CACHE)/e2e-releases
CAPI_E2E_UPGRADE_ENV = DOCKYARD_PREVIOUS_RELEASE="$(E2E_RELEASES_DIR)/$(FIRST_RELEASE)" DOCKYARD_UPGRADE_RELEASE=$(UPGRADE_RELEASE) \
	DOCKYARD_RELEASE_REGISTRY_PORT=$(E2E_RELEASE_REGISTRY_PORT) \
	DOCKYARD_IN_MEMORY_RELEASE="$(E2E_RELEASES_DIR)/$(IN_MEMORY_RELEASE)" DOCKYARD_IN_MEMORY_RELEASE_REGISTRY_PORT=$(E2E_IN_MEMORY_RELEASE_REGISTRY_PORT) \
	DOCKYARD_INIT_CLUSTERCTL="$(E2E_RELEASES_DIR)/clusterctl"

.PHONY: e2e-previous-release
e2e-previous-release: registry-image mgmt-binaries ## FIRST_RELEASE and IN_MEMORY_RELEASE for the clusterctl upgrade spec, into E2E_RELEASES_DIR (made again at each run).
	rm -rf "$(E2E_RELEASES_DIR)" && mkdir -p "$(E2E_RELEASES_DIR)"
	$(MAKE) --no-print-directory release VERSION=$(FIRST_RELEASE) RELEASE_SOURCE=$(FIRST_RELEASE_SOURCE) \
		RELEASE_DIR="$(E2E_RELEASES_DIR)/$(FIRST_RELEASE)" RELEASE_IMAGE_REPOSITORY=localhost:$(E2E_RELEASE_REGISTRY_PORT)/dockyard
	git show $(IN_MEMORY_RELEASE_SOURCE):metadata.yaml | awk -v v="$(IN_MEMORY_RELEASE)" $(ADD_RELEASE_SERIES) > "$(E2E_RELEASES_DIR)/metadata-$(IN_MEMORY_RELEASE).yaml"
	$(MAKE) --no-print-directory release VERSION=$(IN_MEMORY_RELEASE) RELEASE_SOURCE=$(IN_MEMORY_RELEASE_SOURCE) \
		RELEASE_DIR="$(E2E_RELEASES_DIR)/$(IN_MEMORY_RELEASE)" RELEASE_IMAGE_REPOSITORY=localhost:$(E2E_IN_MEMORY_RELEASE_REGISTRY_PORT)/dockyard \
		RELEASE_METADATA="$(E2E_RELEASES_DIR)/metadata-$(IN_MEMORY_RELEASE).yaml"
	cp "$$(go run ./test/cmd/dockyard-mgmt build | awk '$$1 == "clusterctl" {print $$2}')" "$(E2E_RELEASES_DIR)/clusterctl"

.PHONY: test-e2e-clusterctl-upgrade
test-e2e-clusterctl-upgrade: images component-images release-manifests e2e-previous-release ## Cluster API's clusterctl upgrade spec alone (part of make test-e2e-full): FIRST_RELEASE with a workload cluster of containers, and IN_MEMORY_RELEASE with an in-memory one, each installed and upgraded to this tree.
	$(MAKE) --no-print-directory test-e2e-capi-run CAPI_E2E_ENV='$(CAPI_E2E_UPGRADE_ENV)' CAPI_E2E_FLAGS='-ginkgo.focus="clusterctl upgrade" $(CAPI_E2E_FLAGS)'

# The zones of the kubernetes flavor's infrastructure cluster: the management cluster of
# make test-e2e-kubernetes gets one worker per zone.
E2E_ZONES ?= a,b,c

.PHONY: test-e2e-kubernetes
test-e2e-kubernetes: images component-images netpol-image release-manifests ## Nodes as Pods (part of make test-e2e-full): a management cluster with a worker per zone of E2E_ZONES is the infrastructure cluster of Cluster API's QuickStartSpec (3+3) and KCPRemediationSpec on the kubernetes flavor, and of a zone that goes away and comes back; and a Dockyard workload cluster as the infrastructure cluster of another, reached from outside.
	$(MAKE) --no-print-directory test-e2e-kubernetes-run

# The size of the in-memory specs (label inmemory): Cluster API's ScaleSpec makes E2E_SCALE_CLUSTERS
# clusters of one control plane and E2E_SCALE_WORKERS workers, E2E_SCALE_CONCURRENCY at a time;
# the MachinePool spec scales to E2E_POOL_INSTANCES. The suite reads them as DOCKYARD_E2E_*.
E2E_SCALE_CLUSTERS ?= 10
E2E_SCALE_WORKERS ?= 1
E2E_SCALE_CONCURRENCY ?= 5
E2E_POOL_INSTANCES ?= 100
# GOGC of the management cluster's API server (empty: Go's default, 100), with a soft memory
# limit of 8 GiB (docs/performance.md).
E2E_APISERVER_GOGC ?=
# Cluster API core's --kube-api-qps and --kube-api-burst (empty: its own, 100 and 200).
E2E_CAPI_KUBE_API_QPS ?=
E2E_CAPI_KUBE_API_BURST ?=
E2E_INMEMORY_ENV = DOCKYARD_E2E_SCALE_CLUSTERS=$(E2E_SCALE_CLUSTERS) DOCKYARD_E2E_SCALE_WORKERS=$(E2E_SCALE_WORKERS) \
	DOCKYARD_E2E_SCALE_CONCURRENCY=$(E2E_SCALE_CONCURRENCY) DOCKYARD_E2E_POOL_INSTANCES=$(E2E_POOL_INSTANCES) \
	DOCKYARD_E2E_APISERVER_GOGC=$(E2E_APISERVER_GOGC) \
	$(if $(E2E_CAPI_KUBE_API_QPS),CAPI_KUBE_API_QPS=$(E2E_CAPI_KUBE_API_QPS)) $(if $(E2E_CAPI_KUBE_API_BURST),CAPI_KUBE_API_BURST=$(E2E_CAPI_KUBE_API_BURST))
E2E_INMEMORY_ARGS = CAPI_E2E_ARTIFACTS="$(CAPI_E2E_ARTIFACTS)-inmemory" \
	CAPI_E2E_ENV='$(E2E_INMEMORY_ENV) $(CAPI_E2E_ENV)' CAPI_E2E_FLAGS="-ginkgo.label-filter=inmemory $(CAPI_E2E_FLAGS)"

.PHONY: test-e2e-inmemory
test-e2e-inmemory: images component-images release-manifests capi-test-extension ## In-memory clusters (label inmemory; part of test-e2e-full) on a management cluster of containers where Dockyard runs as Pods: Cluster API's ScaleSpec of E2E_SCALE_CLUSTERS (10) ClusterClass clusters of 1+E2E_SCALE_WORKERS (1), E2E_SCALE_CONCURRENCY (5) at a time, made at KUBERNETES_VERSION_UPGRADE_FROM, upgraded, deleted; the other in-memory specs, a MachinePool of E2E_POOL_INSTANCES (100) and a chained upgrade with Cluster API's Runtime SDK lifecycle hooks (its test extension built by make capi-test-extension); the controllers' memory and CPU in <artifacts>-inmemory/<spec>/footprint.txt, a controller restart fails. The ScaleSpec of 10 took 4 min on 2 cores.
	$(MAKE) --no-print-directory test-e2e-capi-run $(E2E_INMEMORY_ARGS)

# 10,000 in-memory Machines: 1,000 clusters of 1+9, and a MachinePool of 1,000.
test-e2e-inmemory-full: E2E_SCALE_CLUSTERS = 1000
test-e2e-inmemory-full: E2E_SCALE_WORKERS = 9
test-e2e-inmemory-full: E2E_SCALE_CONCURRENCY = 50
test-e2e-inmemory-full: E2E_APISERVER_GOGC = 400
test-e2e-inmemory-full: E2E_CAPI_KUBE_API_QPS = 300
test-e2e-inmemory-full: E2E_CAPI_KUBE_API_BURST = 450
test-e2e-inmemory-full: E2E_POOL_INSTANCES = 1000

.PHONY: test-e2e-inmemory-full
test-e2e-inmemory-full: images component-images release-manifests capi-test-extension ## make test-e2e-inmemory at the size of 10,000 Machines: ScaleSpec's 1,000 clusters of 1+9, 50 at a time, made, upgraded and deleted, and a MachinePool of 1,000; the API server's GOGC at 400 and Cluster API core's client limits at 300/450; footprint.txt states every controller's memory. For a larger host: on 2 cores the management cluster's API server holds the ScaleSpec to about 116 to 230 requests a second, five to ten hours (docs/performance.md).
	$(MAKE) --no-print-directory test-e2e-capi-run $(E2E_INMEMORY_ARGS)

.PHONY: test-e2e-kubernetes-run
test-e2e-kubernetes-run:
	$(MAKE) --no-print-directory test-e2e-capi-run CAPI_E2E_ARTIFACTS="$(CAPI_E2E_ARTIFACTS)-kubernetes" CAPI_E2E_ENV='DOCKYARD_E2E_ZONES=$(E2E_ZONES)' \
		CAPI_E2E_FLAGS="-ginkgo.label-filter=kubernetes $(CAPI_E2E_FLAGS)"

# Runs the suite with CAPI_E2E_FLAGS and CAPI_E2E_ENV as they are; the targets above build first.
.PHONY: test-e2e-capi-run
test-e2e-capi-run:
	$(CAPI_E2E_RUN) $(CAPI_E2E_FLAGS)

##@ Conformance

# Kubernetes' conformance suite (e2e.test --ginkgo.focus CONFORMANCE_FOCUS) on a 1+CONFORMANCE_WORKERS
# Dockyard cluster, with the images make conformance-images builds (hack/conformance.sh):
# specs not labelled Serial on CONFORMANCE_PARALLEL ginkgo processes, then the Serial ones.
# The whole set runs as many processes as the machine has cores: with four on two cores (load
# 16), an AdmissionWebhook spec's cleanup outlived its 30 s deleting a CRD once in 395 specs,
# and passed alone in 11 s. The focused set, which waits on the network rather than on the API
# server, keeps four.
CONFORMANCE_FOCUS ?= \[Conformance\]
CONFORMANCE_SKIP ?=
CONFORMANCE_WORKERS ?= 2
CONFORMANCE_PARALLEL ?= $(shell nproc 2>/dev/null || echo 2)
# The focused set: what a broken CNI, kube-proxy or DNS fails (pod-to-pod and node-to-pod
# traffic, Services of every type, session affinity, DNS records).
CONFORMANCE_FOCUSED ?= \[sig-network\] (DNS|Networking|Services) .*\[Conformance\]
# The images those specs run (agnhost for the servers and clients, jessie-dnsutils for the DNS
# probes, busybox and pause for the framework's helper pods): the set builds and loads these only.
CONFORMANCE_FOCUSED_IMAGES ?= agnhost jessie-dnsutils busybox pause
CONFORMANCE_ENV = DOCKYARD="$(CURDIR)/bin/dockyard" KUBECTL="$(ENVTEST_ASSETS)/kubectl" KUBERNETES_VERSION=$(KUBERNETES_VERSION) \
	CONFORMANCE_DIR="$(CONFORMANCE_DIR)" CONFORMANCE_LB_IMAGE="$(TEST_LB_IMAGE)" CONFORMANCE_NAMESPACE=$(CONFORMANCE_NAMESPACE) \
	CONFORMANCE_WORKERS=$(CONFORMANCE_WORKERS) CONFORMANCE_PARALLEL=$(CONFORMANCE_PARALLEL) CONFORMANCE_SKIP='$(CONFORMANCE_SKIP)'

.PHONY: test-conformance
test-conformance: images component-images release-manifests dockyard envtest-assets conformance-images ## Kubernetes conformance (CONFORMANCE_FOCUS, default every [Conformance] spec) on a 1+CONFORMANCE_WORKERS cluster, no registry; JUnit and summary under ~/.cache/dockyard/conformance/reports/.
	$(CONFORMANCE_ENV) CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' hack/conformance.sh

.PHONY: test-conformance-focused
test-conformance-focused: images component-images release-manifests dockyard envtest-assets conformance-images ## The conformance specs of pod networking, Services and DNS (CONFORMANCE_FOCUSED): what a broken CNI, kube-proxy or DNS fails.
	$(CONFORMANCE_ENV) CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUSED)' hack/conformance.sh
# Its prerequisite conformance-images builds, and lists in images.txt for its nodes, only the
# images its specs run.
test-conformance-focused: CONFORMANCE_IMAGES = $(CONFORMANCE_FOCUSED_IMAGES)
test-conformance-focused: CONFORMANCE_PARALLEL = 4

.PHONY: conformance-images-focused
conformance-images-focused: CONFORMANCE_IMAGES = $(CONFORMANCE_FOCUSED_IMAGES)
conformance-images-focused: conformance-images ## What make test-conformance-focused runs: e2e.test, ginkgo and CONFORMANCE_FOCUSED_IMAGES.

##@ Performance

.PHONY: measure-cold-quickstart
measure-cold-quickstart: ## make quickstart as on a fresh machine (new clone, empty caches, no engine installed), COLD_RUNS (3) times: every run's time and the median (hack/cold.sh; stops the engines the project started and purges their packages).
	hack/cold.sh quickstart

.PHONY: measure-cold-ci
measure-cold-ci: ## bash .ci/run as on a fresh machine, COLD_RUNS (1) times (hack/cold.sh).
	hack/cold.sh ci

# The quick start's own 1+1 cluster stays, so nine more make ten clusters alive at once.
DENSITY_CLUSTERS ?= 9
DENSITY_HOLD_SECONDS ?= 1800

.PHONY: density
density: envtest-assets ## DENSITY_CLUSTERS more 1+1 clusters at once beside the quick start's, held DENSITY_HOLD_SECONDS: time to every Node Ready, load, restarts in the management cluster, idle footprint per node (hack/density.sh).
	$(MAKE) --no-print-directory quickstart
	$(MAKE) --no-print-directory dockyard
	DOCKYARD="$(CURDIR)/bin/dockyard" KUBECTL="$(ENVTEST_ASSETS)/kubectl" DENSITY_LB_IMAGE="$(TEST_LB_IMAGE)" \
		DENSITY_CLUSTERS=$(DENSITY_CLUSTERS) DENSITY_HOLD_SECONDS=$(DENSITY_HOLD_SECONDS) hack/density.sh

IDLE_WINDOWS ?= 3
IDLE_SECONDS ?= 300

.PHONY: idle
idle: envtest-assets ## A 1+1 cluster beside the quick start's, left idle: CPU and commands run in each node over IDLE_WINDOWS windows of IDLE_SECONDS (hack/idle.sh).
	$(MAKE) --no-print-directory quickstart
	$(MAKE) --no-print-directory dockyard
	DOCKYARD="$(CURDIR)/bin/dockyard" KUBECTL="$(ENVTEST_ASSETS)/kubectl" IDLE_LB_IMAGE="$(TEST_LB_IMAGE)" \
		IDLE_WINDOWS=$(IDLE_WINDOWS) IDLE_SECONDS=$(IDLE_SECONDS) hack/idle.sh

# make bench: the headline figures of docs/performance.md but the cold one, written under
# $(DOCKYARD_CACHE)/bench/ (make density is its own target: it holds ten clusters for 30 minutes).
# The reconcilers' benchmark: at the shipped client limits (cmd/manager's, Cluster API v1.14's QPS 100)
# or, with BENCH_CLIENT=raised, envtest's (QPS 1000); at QPS 20 a run of 1,000 machines took 5 minutes.
BENCH_MACHINES ?= 1000
BENCH_CLIENT ?= shipped
BENCH_RECONCILER_RUNS ?= 3
BENCH_RUNS ?= 5
BENCH_SCALE_RUNS ?= 3
BENCH_DIR := $(DOCKYARD_CACHE)/bench

.PHONY: bench
bench: bench-reconcilers bench-clusters ## The reconcilers' throughput (BENCH_RECONCILER_RUNS runs of BENCH_MACHINES machines), then BENCH_RUNS 1+1 clusters to Nodes Ready with where the time goes, the last BENCH_SCALE_RUNS scaled 1 -> 3; each writes under ~/.cache/dockyard/bench/.

.PHONY: bench-reconcilers
bench-reconcilers: envtest-assets ## BenchmarkProvisionMachines, BENCH_RECONCILER_RUNS runs of BENCH_MACHINES machines (100, 1000, 3000 or 10000) at BENCH_CLIENT limits (shipped or raised), each in a fresh process: every run and the medians.
	@mkdir -p "$(BENCH_DIR)"
	@out="$(BENCH_DIR)/reconcilers-$(BENCH_CLIENT)-$(BENCH_MACHINES)-$$(date -u +%Y%m%dT%H%M%SZ)"; status=0; \
	for run in $$(seq 1 $(BENCH_RECONCILER_RUNS)); do \
		KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" go test ./controllers -run '^$$' \
			-bench 'BenchmarkProvisionMachines/client=.*/machines=$(BENCH_MACHINES)$$' -benchtime 1x -timeout 120m \
			$(if $(filter raised,$(BENCH_CLIENT)),-args -bench-raised-client-limits) >>"$$out.log" 2>&1 || { status=$$?; break; }; \
	done; \
	grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL|--- FAIL|\s+\S+_test.go)' "$$out.log" | tee "$$out.txt" || true; \
	awk -f hack/bench-median.awk "$$out.txt" | tee -a "$$out.txt"; \
	echo "written to $$out.txt (the manager's log: $$out.log)"; exit $$status

# The in-memory engine at rest: BENCH_INMEMORY_CLUSTERS clusters of 1+9 (10, 100 or 1000) booted
# through the node layer on one engine, then measured idle (docker/inmemory_bench_test.go).
BENCH_INMEMORY_CLUSTERS ?= 1000
BENCH_INMEMORY_RUNS ?= 3

.PHONY: bench-inmemory
bench-inmemory: ## BenchmarkIdleInMemoryClusters, BENCH_INMEMORY_RUNS runs of BENCH_INMEMORY_CLUSTERS in-memory clusters of 1+9, each in a fresh process: heap, goroutines, idle CPU, records, save and restore per cluster; every run, the medians and a heap profile of the last run.
	@mkdir -p "$(BENCH_DIR)"
	@out="$(BENCH_DIR)/inmemory-$(BENCH_INMEMORY_CLUSTERS)-$$(date -u +%Y%m%dT%H%M%SZ)"; status=0; \
	for run in $$(seq 1 $(BENCH_INMEMORY_RUNS)); do \
		go test ./docker -run '^$$' -bench 'BenchmarkIdleInMemoryClusters/clusters=$(BENCH_INMEMORY_CLUSTERS)$$' -benchtime 1x -timeout 60m \
			-args -bench-inmemory-heap-profile "$$out.heap" >>"$$out.log" 2>&1 || { status=$$?; break; }; \
	done; \
	grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL|--- FAIL|\s+\S+_test.go)' "$$out.log" | tee "$$out.txt" || true; \
	awk -f hack/bench-median.awk "$$out.txt" | tee -a "$$out.txt"; \
	echo "written to $$out.txt (the log: $$out.log; heap profile: $$out.heap)"; exit $$status

.PHONY: bench-clusters
bench-clusters: envtest-assets ## BENCH_RUNS 1+1 clusters one after another on the quick start's management cluster (made first); the last BENCH_SCALE_RUNS scaled 1 -> 3; each deletion timed (hack/bench-clusters.sh).
	$(MAKE) --no-print-directory quickstart
	$(MAKE) --no-print-directory dockyard
	DOCKYARD="$(CURDIR)/bin/dockyard" KUBECTL="$(ENVTEST_ASSETS)/kubectl" BENCH_LB_IMAGE="$(TEST_LB_IMAGE)" \
		BENCH_RUNS=$(BENCH_RUNS) BENCH_SCALE_RUNS=$(BENCH_SCALE_RUNS) hack/bench-clusters.sh

.PHONY: bench-kubernetes
bench-kubernetes: images component-images release-manifests dockyard envtest-assets ## Clusters of the kubernetes flavor (nodes as Pods) on a management cluster of its own with a worker per zone: BENCH_RUNS 1+1 to Nodes Ready, the last BENCH_SCALE_RUNS scaled 1 -> 3, deletions, and the idle CPU of node Pods (hack/bench-kubernetes.sh).
	DOCKYARD="$(CURDIR)/bin/dockyard" KUBECTL="$(ENVTEST_ASSETS)/kubectl" BENCH_LB_IMAGE="$(TEST_LB_IMAGE)" \
		BENCH_RUNS=$(BENCH_RUNS) BENCH_SCALE_RUNS=$(BENCH_SCALE_RUNS) hack/bench-kubernetes.sh

REGISTRY_RUNS ?= 3

.PHONY: bench-registry-quickstart
bench-registry-quickstart: images component-images registry-image dockyard ## dockyard quickstart --image-registry on an engine without its images, REGISTRY_RUNS times: the images pushed into a local registry first, removed from Docker before each run (hack/bench-registry-quickstart.sh).
	DOCKYARD="$(CURDIR)/bin/dockyard" REGISTRY_RUNS=$(REGISTRY_RUNS) DOCKYARD_CACHE="$(DOCKYARD_CACHE)" hack/bench-registry-quickstart.sh

##@ Release

.PHONY: release-manifests
release-manifests: $(KUSTOMIZE) $(HELM) templates ## Render the clusterctl repository: the components into pkg/repository/embedded/components (embedded in the dockyard command, committed), the whole repository into out/repository with out/clusterctl.yaml.
	KUSTOMIZE="$(KUSTOMIZE)" HELM="$(HELM)" VERSION="$(VERSION)" hack/release-manifests.sh

RELEASE_DIR ?= out/release/$(VERSION)
# Where a release's images are published: its components name the manager
# $(RELEASE_IMAGE_REPOSITORY)/manager:$(VERSION)@sha256:… (localhost/dockyard: in no registry).
RELEASE_IMAGE_REPOSITORY ?= localhost/dockyard
RELEASE_SOURCE ?=
# metadata.yaml of the release; empty: the released tree's.
RELEASE_METADATA ?=

.PHONY: release
release: $(KUSTOMIZE) $(HELM) $(CYCLONEDX_GOMOD) templates ## Write the release of VERSION into RELEASE_DIR (out/release/VERSION, which must not exist): the components with the manager image pinned by digest, metadata.yaml, every flavor and ClusterClass, the manager image as an OCI archive with its SBOM, SHA256SUMS. The same commit gives the same bytes. RELEASE_SOURCE=<revision> makes it of that revision's tree (hack/release.sh).
	KUSTOMIZE="$(KUSTOMIZE)" HELM="$(HELM)" CYCLONEDX_GOMOD="$(CYCLONEDX_GOMOD)" VERSION="$(VERSION)" RELEASE_DIR="$(RELEASE_DIR)" \
		RELEASE_IMAGE_REPOSITORY="$(RELEASE_IMAGE_REPOSITORY)" RELEASE_SOURCE="$(RELEASE_SOURCE)" RELEASE_METADATA="$(RELEASE_METADATA)" hack/release.sh

.PHONY: release-publish
release-publish: ## Push the images of the release in RELEASE_DIR from its archives to the registry RELEASE_IMAGE_REPOSITORY names (they keep their digests), after checking its SHA256SUMS.
	go run ./cmd/dockyard-build publish --release "$(RELEASE_DIR)"

# Dockyard's first release, the one upgrades start from, and the version this tree is released as
# by make test-clusterctl-upgrade (docs/clusterctl.md).
FIRST_RELEASE ?= v0.1.0
FIRST_RELEASE_SOURCE ?= 8c5ab79
UPGRADE_RELEASE ?= v0.2.0
RELEASES_DIR ?= $(DOCKYARD_CACHE)/releases
# The awk program that adds the series of version v (major and minor) to a metadata.yaml, at the
# contract of its newest series, as a release commit of v would.
ADD_RELEASE_SERIES = '{print} END {split(substr(v, 2), p, "."); print "- major: " p[1] "\n  minor: " p[2] "\n  contract: " c} /contract:/ {c = $$2}'

.PHONY: test-clusterctl-upgrade
test-clusterctl-upgrade: release-manifests envtest-assets mgmt-binaries ## clusterctl init of Dockyard's first release (FIRST_RELEASE, made of FIRST_RELEASE_SOURCE's tree) and clusterctl upgrade apply to this tree's (released as UPGRADE_RELEASE), on an API server; both made by make release into RELEASES_DIR.
	rm -rf "$(RELEASES_DIR)" && mkdir -p "$(RELEASES_DIR)"
	$(MAKE) --no-print-directory release VERSION=$(FIRST_RELEASE) RELEASE_SOURCE=$(FIRST_RELEASE_SOURCE) RELEASE_DIR="$(RELEASES_DIR)/$(FIRST_RELEASE)"
	@# The release commit of UPGRADE_RELEASE would add its series to metadata.yaml (at the newest
	@# series' contract); this tree lists only the series of its VERSION, so clusterctl's latest
	@# resolves to a release it holds.
	awk -v v="$(UPGRADE_RELEASE)" $(ADD_RELEASE_SERIES) metadata.yaml > "$(RELEASES_DIR)/metadata-$(UPGRADE_RELEASE).yaml"
	$(MAKE) --no-print-directory release VERSION=$(UPGRADE_RELEASE) RELEASE_DIR="$(RELEASES_DIR)/$(UPGRADE_RELEASE)" \
		RELEASE_METADATA="$(RELEASES_DIR)/metadata-$(UPGRADE_RELEASE).yaml"
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(ENVTEST_ASSETS)}" DOCKYARD_CLUSTERCTL_CONFIG="$(CURDIR)/out/clusterctl.yaml" DOCKYARD_RELEASES="$(RELEASES_DIR)" \
		go test -tags release ./test/clusterctl -run '^TestUpgradeFromTheFirstRelease$$' -count=1 -v -timeout 30m

.PHONY: test-clusterctl
test-clusterctl: release-manifests envtest-assets mgmt-binaries ## The committed clusterctl repository is what make release-manifests renders; the real clusterctl with it: offline init, every flavor generated and dry-run, ClusterClass patches, describe.
	@hack/verify-committed.sh "make release-manifests" pkg/repository/embedded/components
	hack/ensure-docker.sh
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(ENVTEST_ASSETS)}" DOCKYARD_CLUSTERCTL_CONFIG="$(CURDIR)/out/clusterctl.yaml" \
		go test ./test/clusterctl -count=1 -v -timeout 30m $(GO_TEST_FLAGS)

##@ Tools

.PHONY: ginkgo
ginkgo: ## Build Ginkgo's command line at go.mod's version (a link when nothing changed).
	go build -o $(GINKGO) github.com/onsi/ginkgo/v2/ginkgo

$(CONTROLLER_GEN):
	hack/go-install.sh sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_GEN_VER) $@

$(KUSTOMIZE):
	hack/go-install.sh sigs.k8s.io/kustomize/kustomize/v5 $(KUSTOMIZE_VER) $@

$(HELM):
	hack/go-install.sh helm.sh/helm/v3/cmd/helm $(HELM_VER) $@

$(CYCLONEDX_GOMOD):
	hack/go-install.sh github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod $(CYCLONEDX_GOMOD_VER) $@

$(GOLANGCI_LINT):
	hack/go-install.sh github.com/golangci/golangci-lint/v2/cmd/golangci-lint $(GOLANGCI_LINT_VER) $@
