//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// inMemoryAddress is where the plane's manager serves in-memory clusters: a loopback address of
// their own.
const inMemoryAddress = "127.0.0.2"

// inMemoryClusters is how many in-memory clusters the spec makes at once:
// DOCKYARD_E2E_INMEMORY_CLUSTERS, by default 10, a slice of what the in-memory engine is for,
// small enough for CI.
func inMemoryClusters() int {
	n, err := strconv.Atoi(envOr("DOCKYARD_E2E_INMEMORY_CLUSTERS", "10"))
	Expect(err).NotTo(HaveOccurred(), "DOCKYARD_E2E_INMEMORY_CLUSTERS")
	return n
}

// In-memory clusters (the in-memory flavor) with Cluster API's own controllers: each comes up
// Available, its control plane initialized by KubeadmControlPlane through the API server the
// manager serves, its Machines Running with their Nodes Ready and carrying their providerIDs;
// deleting them stops their API servers and leaves nothing. Nothing runs on the engine.
var _ = Describe("In-memory clusters", Label("inmemory"), func() {
	It("come up with Cluster API's controllers, Available with Machines Running, and go when deleted", func(ctx SpecContext) {
		const workers = 2
		ns := testNamespacePrefix + "-mem"
		count := inMemoryClusters()
		cs := make([]clusterSpec, count)
		for i := range cs {
			cs[i] = clusterSpec{name: fmt.Sprintf("mem-%d", i), namespace: ns, controlPlane: 1, workers: workers, template: "cluster-template-in-memory.yaml"}
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range cs {
				cleanupCluster(ctx, c, c.name)
			}
		})

		start := time.Now()
		for _, c := range cs {
			createCluster(ctx, c)
		}
		for _, c := range cs {
			waitClusterAvailable(ctx, c, clusterTimeout)
			waitMachinesRunning(ctx, c, 1, workers)
		}
		whenDone(fmt.Sprintf("in memory: %d clusters of 1+%d Available, Machines Running, Nodes Ready", count, workers), start)
		fmt.Fprintf(GinkgoWriter, "the manager's resident memory with %d in-memory clusters of 1+%d: %d MiB\n", count, workers, plane.ResidentMemory(framework.DockyardManager)>>20)

		var endpoints []string
		for _, c := range cs {
			dc := &infrav1.DockyardCluster{}
			Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc)).To(Succeed())
			Expect(dc.Status.Engine).To(Equal(infrav1.EngineInMemory), "DockyardCluster %s", c.name)
			Expect(dc.Spec.ControlPlaneEndpoint.Host).To(Equal(inMemoryAddress), "DockyardCluster %s's endpoint", c.name)
			endpoints = append(endpoints, net.JoinHostPort(dc.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(dc.Spec.ControlPlaneEndpoint.Port))))
		}
		deleted := time.Now()
		deleteOn(ctx, plane, cs...)
		whenDone(fmt.Sprintf("in memory: %d clusters deleted", count), deleted)
		for _, endpoint := range endpoints {
			conn, err := net.DialTimeout("tcp", endpoint, 2*time.Second)
			if err == nil {
				_ = conn.Close()
			}
			Expect(err).To(HaveOccurred(), "a deleted in-memory cluster's API server still listens on %s", endpoint)
		}
	})
})
