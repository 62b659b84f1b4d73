//go:build e2e

package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// dockyard upgrade cluster, which kind cannot do (kind#3362): a 1+1 cluster made at the version
// upgrades start from and moved to the suite's version by the command line, from a directory
// that holds only the binary; every node is replaced and Ready at the new version. It needs a
// node image of each version carrying the other's add-ons: make test-e2e-release builds them and
// runs the specs labelled release (make test-e2e leaves them out).
var _ = Describe("Upgrading a cluster with dockyard upgrade cluster", Ordered, Label("release"), func() {
	from := envOr("E2E_KUBERNETES_VERSION_UPGRADE_FROM", "")
	c := clusterSpec{name: "e2e-upgrade", namespace: testNamespacePrefix + "-upgrade", controlPlane: 1, workers: 1}

	It("creates a cluster at the version upgrades start from, upgrades it, scales it and deletes it", func(ctx SpecContext) {
		Expect(from).NotTo(BeEmpty(), "E2E_KUBERNETES_VERSION_UPGRADE_FROM names the version to upgrade from (make test-e2e-release sets it)")
		cli := newDockyardCLI(ctx)
		start := time.Now()
		cli.run(ctx, "create", "cluster", c.name, "-n", c.namespace, "--kubernetes-version", from, "--workers", "1",
			"--var", "DOCKYARD_LB_IMAGE="+lbImage)
		whenDone("upgrade: dockyard create cluster at "+from+" (1+1, waits for Ready nodes)", start)
		wl, _ := workloadClient(ctx, c)
		before := sets.New[string]()
		list := &corev1.NodeList{}
		Expect(wl.List(ctx, list)).To(Succeed())
		for _, n := range list.Items {
			Expect(n.Status.NodeInfo.KubeletVersion).To(Equal(from))
			before.Insert(n.Name)
		}
		Expect(before).To(HaveLen(2))

		By("upgrading it to " + kubernetesVersion + ": the control plane, then the workers")
		start = time.Now()
		cli.run(ctx, "upgrade", "cluster", c.name, "-n", c.namespace, "--kubernetes-version", kubernetesVersion)
		whenDone("upgrade: dockyard upgrade cluster "+from+" → "+kubernetesVersion+" (1+1, waits for Ready nodes)", start)
		Eventually(func(g Gomega) {
			list := &corev1.NodeList{}
			g.Expect(wl.List(ctx, list)).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2), "the replaced nodes are gone")
			for _, n := range list.Items {
				g.Expect(before.Has(n.Name)).To(BeFalse(), "node %s was not replaced", n.Name)
				g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal(kubernetesVersion), "node %s", n.Name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(5 * time.Second).Should(Succeed())

		By("scaling the upgraded cluster's workers to 2")
		cli.run(ctx, "scale", "cluster", c.name, "-n", c.namespace, "--workers", "2")
		waitMachinesRunning(ctx, c, 1, 2)

		cli.deleteCluster(ctx, c)
	})

	AfterAll(func(ctx SpecContext) {
		cleanupCluster(ctx, c, c.namespace)
	}, NodeTimeout(10*time.Minute))
})
