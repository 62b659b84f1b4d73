//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	capispecs "sigs.k8s.io/cluster-api/test/e2e"

	"github.com/dockyard-dev/dockyard/test/capie2e"
)

// inMemory labels the specs of in-memory clusters (make test-e2e-inmemory).
var inMemory = Label("inmemory")

// envCount is the count the environment variable key holds, def when it is unset or empty; a
// spec that reads anything but a whole number of at least least fails, naming key.
func envCount(key string, def, least int64) int64 {
	v := envOrDefault(key, strconv.FormatInt(def, 10))
	n, err := strconv.ParseInt(v, 10, 64)
	Expect(err).NotTo(HaveOccurred(), "%s=%q: a whole number of at least %d was expected", key, v, least)
	Expect(n).To(BeNumerically(">=", least), "%s=%q: a whole number of at least %d was expected", key, v, least)
	return n
}

func envOrDefault(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// watchControllers has every spec of the container it is called in watched by a
// capie2e.Footprint: the memory and CPU of the management cluster's controllers (Dockyard's
// manager, Cluster API's core, kubeadm bootstrap and control plane), of the management
// cluster's own Pods and nodes, sampled every 15 s while the spec runs, including its
// clean-up, and the host's CPU and load, written to <artifacts>/<name>/footprint.txt; and the
// spec fails when one of those Pods restarted during it. Call it in the container before the
// shared spec, so the sampling starts before the spec's own BeforeEach.
func watchControllers(name string) {
	BeforeEach(func() {
		fp, err := capie2e.StartFootprint(ctx, capie2e.FootprintInput{ClientSet: bootstrapClusterProxy.GetClientSet()})
		Expect(err).NotTo(HaveOccurred(), "starting to sample the controllers' footprint")
		// A clean-up registered here runs after the spec's AfterEach: the footprint covers the
		// deletion of its clusters too.
		DeferCleanup(func(ctx SpecContext) {
			report, err := fp.Stop(ctx)
			Expect(err).NotTo(HaveOccurred(), "ending the sampling of the controllers' footprint")
			path, err := report.WriteFile(filepath.Join(artifactFolder, name))
			Expect(err).NotTo(HaveOccurred())
			AddReportEntry("footprint", report.String())
			By("The controllers' footprint is in " + path)
			Expect(report.Restarts).To(BeEmpty(), "controllers of the management cluster restarted during the spec (%s)", path)
		})
	})
}

// Cluster API's scale spec on in-memory clusters: ClusterClass clusters whose nodes exist in the
// manager's memory, the manager serving each cluster's API server to Cluster API's
// controllers; made, upgraded and deleted, some at a time. Sized by DOCKYARD_E2E_SCALE_CLUSTERS
// (10) clusters of one control plane and DOCKYARD_E2E_SCALE_WORKERS (1) workers,
// DOCKYARD_E2E_SCALE_CONCURRENCY (5) at a time; make test-e2e-inmemory-full runs
// 1,000 clusters of 1+9, 50 at a time.
var _ = Describe("Scale, in-memory clusters", inMemory, func() {
	watchControllers("scale")
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
			ClusterCount:                    ptr.To(envCount("DOCKYARD_E2E_SCALE_CLUSTERS", 10, 1)),
			Concurrency:                     ptr.To(envCount("DOCKYARD_E2E_SCALE_CONCURRENCY", 5, 1)),
			ControlPlaneMachineCount:        ptr.To(int64(1)),
			MachineDeploymentCount:          ptr.To(int64(1)),
			WorkerPerMachineDeploymentCount: ptr.To(envCount("DOCKYARD_E2E_SCALE_WORKERS", 1, 0)),
			// Made at KUBERNETES_VERSION_UPGRADE_FROM, upgraded to KUBERNETES_VERSION_UPGRADE_TO
			// through the ClusterClass's version: KubeadmControlPlane's rollout, then the
			// MachineDeployment's, on simulated nodes.
			SkipUpgrade: false,
		}
	})
})
