//go:build e2e

package e2e

import (
	"os"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	capispecs "sigs.k8s.io/cluster-api/test/e2e"
)

// inMemory labels the specs of in-memory clusters (make test-e2e-inmemory).
var inMemory = Label("inmemory")

// scaleClusters is how many clusters Cluster API's ScaleSpec makes on the in-memory flavor:
// DOCKYARD_E2E_SCALE_CLUSTERS, 10 by default.
func scaleClusters() int64 {
	n, err := strconv.ParseInt(envOrDefault("DOCKYARD_E2E_SCALE_CLUSTERS", "10"), 10, 64)
	Expect(err).NotTo(HaveOccurred(), "DOCKYARD_E2E_SCALE_CLUSTERS")
	return n
}

func envOrDefault(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Cluster API's scale spec on in-memory clusters: ClusterClass clusters of one control plane
// and a worker whose nodes exist in the manager's memory, the manager serving each cluster's
// API server to Cluster API's controllers; made, upgraded and deleted, a few at a time.
var _ = Describe("Scale, in-memory clusters", inMemory, func() {
	capispecs.ScaleSpec(ctx, func() capispecs.ScaleSpecInput {
		return capispecs.ScaleSpecInput{
			E2EConfig:                       e2eConfig,
			ClusterctlConfigPath:            clusterctlConfigPath,
			BootstrapClusterProxy:           bootstrapClusterProxy,
			ArtifactFolder:                  artifactFolder,
			SkipCleanup:                     skipCleanup,
			InfrastructureProvider:          ptr.To("dockyard"),
			Flavor:                          ptr.To("in-memory"),
			ClusterClassName:                "dockyard-quick-start",
			ClusterCount:                    ptr.To(scaleClusters()),
			Concurrency:                     ptr.To(int64(5)),
			ControlPlaneMachineCount:        ptr.To(int64(1)),
			MachineDeploymentCount:          ptr.To(int64(1)),
			WorkerPerMachineDeploymentCount: ptr.To(int64(1)),
			// Made at KUBERNETES_VERSION_UPGRADE_FROM, upgraded to KUBERNETES_VERSION_UPGRADE_TO
			// through the ClusterClass's version: KubeadmControlPlane's rollout, then the
			// MachineDeployment's, on simulated nodes.
			SkipUpgrade: false,
		}
	})
})
