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
// with the new manager. The release's components name its manager by digest, so its images are
// published into a local registry standing in for a public one, which the management cluster's
// nodes pull from. The old clusterctl is served to the framework, which downloads it, on the
// loopback (DOCKYARD_INIT_CLUSTERCTL: the suite's clusterctl, of the same Cluster API version).
var _ = Describe("clusterctl upgrade from Dockyard's previous release", full, func() {
	var clusterctlURL string
	registry := capie2e.ReleaseRegistry{Name: "dockyard-e2e-release", HostPort: releaseRegistryPort()}

	BeforeEach(func() {
		Expect(previousRelease).NotTo(BeEmpty(),
			"no previous release to upgrade from: make test-e2e-full makes it and sets DOCKYARD_PREVIOUS_RELEASE")
		Expect(registry.HostPort).To(BeNumerically(">", 0),
			"DOCKYARD_RELEASE_REGISTRY_PORT names the port of the registry the previous release's images are named for (make test-e2e-full sets it)")
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
		Expect(os.Setenv("DOCKYARD_RELEASE_REGISTRY", registry.Name)).To(Succeed())
		var management docker.ClusterKey
		return capispecs.ClusterctlUpgradeSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			InitWithBinary:                  clusterctlURL,
			InitWithKubernetesVersion:       e2eConfig.MustGetVariable("KUBERNETES_VERSION_MANAGEMENT"),
			InitWithInfrastructureProviders: []string{"dockyard:" + previousRelease},
			MgmtFlavor:                      "clusterctl-upgrade-management",
			PreWaitForCluster: func(proxy framework.ClusterProxy, namespace, name string) {
				// First for the management cluster, in the bootstrap cluster; then for the workload
				// cluster v0.1.0 makes. v0.1.0's manager attaches no management node to the networks
				// it makes when it runs in a cluster Dockyard made (it looked for its node's
				// container by the node's name, not "<node>.<namespace>"), so Cluster API there
				// could not reach the cluster's API server: the spec attaches them, as the manager
				// of this tree does itself.
				if proxy.GetName() == bootstrapClusterProxy.GetName() {
					management = docker.ClusterKey{Namespace: namespace, Name: name}
					return
				}
				By(fmt.Sprintf("Attaching the nodes of %s to the network of %s/%s, which v0.1.0 does not", management, namespace, name))
				Expect(capie2e.ConnectManagementNodes(ctx, runtimes.Config{}, management,
					docker.ClusterKey{Namespace: namespace, Name: name}, 5*time.Minute)).To(Succeed())
			},
			PostNamespaceCreated: func(proxy framework.ClusterProxy, namespace string) {
				// Called for the bootstrap cluster's namespace of the management cluster, then
				// for the workload cluster's namespace in the management cluster.
				if proxy.GetName() != bootstrapClusterProxy.GetName() {
					return
				}
				By(fmt.Sprintf("Publishing release %s into the local registry %s, serving namespace %s", previousRelease, registry.Host(), namespace))
				pushed, err := registry.Serve(ctx, os.Getenv("DOCKYARD_PREVIOUS_RELEASE"), namespace)
				Expect(err).NotTo(HaveOccurred())
				for _, p := range pushed {
					fmt.Fprintf(GinkgoWriter, "pushed %s@%s\n", p.Ref, p.Digest)
				}
			},
		}
	})
})

// releaseRegistryPort is the host port of the registry the previous release is published into:
// DOCKYARD_RELEASE_REGISTRY_PORT, which its images were named for (make release
// RELEASE_IMAGE_REPOSITORY=localhost:<port>/dockyard).
func releaseRegistryPort() int {
	port, err := strconv.Atoi(os.Getenv("DOCKYARD_RELEASE_REGISTRY_PORT"))
	if err != nil {
		return 0
	}
	return port
}
