//go:build e2e

package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

var _ = Describe("Dockyard's manager restarting in the middle of a quick start", Ordered, func() {
	c := clusterSpec{name: "e2e-rs", namespace: testNamespacePrefix + "-rs", controlPlane: 1, workers: 1}

	It("still brings the cluster up, and kubeadm ran exactly once on every node", func(ctx SpecContext) {
		start := time.Now()
		createCluster(ctx, c)

		// waitBootstrapRunning returns the DockyardMachine of a control plane (or worker)
		// machine once its bootstrap runs inside the node.
		waitBootstrapRunning := func(controlPlane bool) string {
			var name string
			Eventually(func(g Gomega) {
				ms := machines(ctx, c, controlPlane)
				g.Expect(ms).NotTo(BeEmpty())
				dm := &infrav1.DockyardMachine{}
				g.Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: ms[0].Spec.InfrastructureRef.Name}, dm)).To(Succeed())
				g.Expect(conditions.GetReason(dm, infrav1.BootstrapSucceededCondition)).To(Equal(infrav1.BootstrapRunningReason))
				name = dm.Name
			}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
			return name
		}

		cp := waitBootstrapRunning(true)
		By(fmt.Sprintf("killing Dockyard's manager while kubeadm init runs in %s", cp))
		Expect(plane.KillDockyard()).To(Succeed())
		time.Sleep(3 * time.Second)
		Expect(plane.StartDockyard(ctx)).To(Succeed())

		worker := waitBootstrapRunning(false)
		By(fmt.Sprintf("restarting Dockyard's manager while kubeadm join runs in %s", worker))
		Expect(plane.RestartDockyard(ctx)).To(Succeed())

		waitMachinesRunning(ctx, c, 1, 1)
		whenDone("quick start with two manager restarts: to all Nodes Ready (1+1)", start)

		By("kubeadm ran exactly once in every node")
		expectBootstrappedOnce(ctx, c)

		deleteOn(ctx, plane, c)
	})
})
