//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	capispecs "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/test/capie2e"
)

// Cluster API's ClusterctlUpgradeSpec from Dockyard's previous release to this tree, as a user
// moves a running installation: a cluster of the bootstrap cluster (the
// clusterctl-upgrade-management flavor: it hosts providers) becomes a management cluster,
// initialized by clusterctl with the previous release (DOCKYARD_PREVIOUS_RELEASE, made by make
// release of its tag) and Cluster API's providers; it creates a workload cluster with that
// release's default flavor; `clusterctl upgrade apply` moves Dockyard to this tree; the spec
// then checks that no Machine rolled, that the objects settle, and scales the MachineDeployment
// with the new manager.
var _ = Describe("clusterctl upgrade from Dockyard's previous release", full, func() {
	upgradeSpec(upgradeFrom{
		releaseEnv: previousReleaseEnv, registryPortEnv: "DOCKYARD_RELEASE_REGISTRY_PORT", registry: "dockyard-e2e-release",
		preWaitForWorkload: func(management docker.ClusterKey, namespace, name string) {
			// v0.1.0's manager attaches no management node to the networks it makes when it
			// runs in a cluster Dockyard made (it looked for its node's container by the node's
			// name, not "<node>.<namespace>"), so Cluster API there could not reach the
			// cluster's API server: the spec attaches them, as the manager of this tree does
			// itself.
			By(fmt.Sprintf("Attaching the nodes of %s to the network of %s/%s, which v0.1.0 does not", management, namespace, name))
			Expect(capie2e.ConnectManagementNodes(ctx, runtimes.Config{}, management,
				docker.ClusterKey{Namespace: namespace, Name: name}, 5*time.Minute)).To(Succeed())
		},
	})
})

// The same spec from the first release with the in-memory engine (DOCKYARD_IN_MEMORY_RELEASE),
// the workload cluster made with that release's in-memory flavor, as Cluster API runs it on its
// own in-memory backend: the cluster's nodes and API server live in the old manager's Pod, and
// must be served again, unchanged, by the new manager that clusterctl upgrade puts in its
// place (the cluster's record in its Secret), then grow a worker and lose it.
var _ = Describe("clusterctl upgrade from Dockyard's first release with in-memory clusters, the workload cluster in memory", full, func() {
	upgradeSpec(upgradeFrom{
		releaseEnv: inMemoryReleaseEnv, registryPortEnv: "DOCKYARD_IN_MEMORY_RELEASE_REGISTRY_PORT", registry: "dockyard-e2e-release-in-memory",
		workloadFlavor: "in-memory",
		// The workload cluster's API server is served in the management cluster's manager Pod:
		// the framework reads its Pods and Nodes (when it dumps them) through a port-forward.
		bootstrap: inMemoryProxy,
	})
})

// upgradeFrom is one clusterctl upgrade spec: the release it starts from, and where its images
// are published.
type upgradeFrom struct {
	// releaseEnv names the variable holding the release's directory.
	releaseEnv string
	// registryPortEnv names the variable holding the host port of the local registry the
	// release's images are named for (make release RELEASE_IMAGE_REPOSITORY=localhost:<port>/…).
	registryPortEnv string
	// registry is the name of that registry's container.
	registry string
	// workloadFlavor is the release's flavor of the workload cluster; its default when empty.
	workloadFlavor string
	// preWaitForWorkload, when set, runs once the workload cluster is applied, before the spec
	// waits for it, with the key of the management cluster that holds it.
	preWaitForWorkload func(management docker.ClusterKey, namespace, name string)
	// bootstrap, when set, gives the proxy of the suite's management cluster the spec gets.
	bootstrap func() framework.ClusterProxy
}

// upgradeSpec runs Cluster API's ClusterctlUpgradeSpec from u's release. The release's
// components name its manager by digest, so its images are published into a local registry
// standing in for a public one, which the management cluster's nodes pull from. The old
// clusterctl is served to the framework, which downloads it, on the loopback
// (DOCKYARD_INIT_CLUSTERCTL: the suite's clusterctl, of the same Cluster API version).
func upgradeSpec(u upgradeFrom) {
	var clusterctlURL string
	var management docker.ClusterKey
	registry := capie2e.ReleaseRegistry{Name: u.registry, HostPort: envPort(u.registryPortEnv)}

	BeforeEach(func() {
		Expect(previousReleases[u.releaseEnv]).NotTo(BeEmpty(),
			"no release to upgrade from: make test-e2e-full makes it and sets %s", u.releaseEnv)
		Expect(registry.HostPort).To(BeNumerically(">", 0),
			"%s names the port of the registry the release's images are named for (make test-e2e-full sets it)", u.registryPortEnv)
		bin := os.Getenv("DOCKYARD_INIT_CLUSTERCTL")
		Expect(bin).To(BeAnExistingFile(), "DOCKYARD_INIT_CLUSTERCTL names the clusterctl binary to initialize with (make test-e2e-full sets it)")
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/clusterctl" {
				http.NotFound(w, r)
				return
			}
			http.ServeFile(w, r, bin)
		}))
		DeferCleanup(server.Close)
		clusterctlURL = server.URL + "/clusterctl"
		DeferCleanup(func(ctx SpecContext) {
			if skipCleanup {
				return
			}
			Expect(registry.Remove(ctx)).To(Succeed())
		})
	})

	capispecs.ClusterctlUpgradeSpec(ctx, func() capispecs.ClusterctlUpgradeSpecInput {
		// The management flavor's DockyardCluster names the registry its nodes pull from.
		Expect(os.Setenv("DOCKYARD_RELEASE_REGISTRY", registry.Name)).To(Succeed())
		release := previousReleases[u.releaseEnv]
		bootstrap := bootstrapClusterProxy
		if u.bootstrap != nil {
			bootstrap = u.bootstrap()
		}
		return capispecs.ClusterctlUpgradeSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrap,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			InitWithBinary:                  clusterctlURL,
			InitWithKubernetesVersion:       e2eConfig.MustGetVariable("KUBERNETES_VERSION_MANAGEMENT"),
			InitWithInfrastructureProviders: []string{"dockyard:" + release},
			MgmtFlavor:                      "clusterctl-upgrade-management",
			WorkloadFlavor:                  u.workloadFlavor,
			PreWaitForCluster: func(proxy framework.ClusterProxy, namespace, name string) {
				// First for the management cluster, in the bootstrap cluster; then for the
				// workload cluster the release makes.
				if proxy.GetName() == bootstrapClusterProxy.GetName() {
					management = docker.ClusterKey{Namespace: namespace, Name: name}
					return
				}
				if u.preWaitForWorkload != nil {
					u.preWaitForWorkload(management, namespace, name)
				}
			},
			PostNamespaceCreated: func(proxy framework.ClusterProxy, namespace string) {
				// Called for the bootstrap cluster's namespace of the management cluster, then
				// for the workload cluster's namespace in the management cluster.
				if proxy.GetName() != bootstrapClusterProxy.GetName() {
					return
				}
				By(fmt.Sprintf("Publishing release %s into the local registry %s, serving namespace %s", release, registry.Host(), namespace))
				pushed, err := registry.Serve(ctx, os.Getenv(u.releaseEnv), namespace)
				Expect(err).NotTo(HaveOccurred())
				for _, p := range pushed {
					fmt.Fprintf(GinkgoWriter, "pushed %s@%s\n", p.Ref, p.Digest)
				}
			},
		}
	})
}

// envPort is the port the variable env holds, 0 when it holds none.
func envPort(env string) int {
	port, err := strconv.Atoi(os.Getenv(env))
	if err != nil {
		return 0
	}
	return port
}
