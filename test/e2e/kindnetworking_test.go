//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// kind's networking settings that leave the network to the user, as for a CNI that replaces
// kube-proxy: no default CNI (disableDefaultCNI) and no kube-proxy (kubeProxyMode none). dockyard
// create cluster waits for the nodes, not for them to be Ready, which needs the user's CNI.
var _ = Describe("A cluster from kind's configuration without the default CNI and kube-proxy", Ordered, Label("release"), func() {
	c := clusterSpec{name: "e2e-nocni", namespace: testNamespacePrefix + "-nocni", controlPlane: 1}

	It("comes up with a node that waits for a CNI, runs no kube-proxy, and is deleted", func(ctx SpecContext) {
		cli := newDockyardCLI(ctx)
		config := filepath.Join(cli.dir, "kind.yaml")
		Expect(os.WriteFile(config, []byte(`kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true
  kubeProxyMode: none
`), 0o600)).To(Succeed())
		start := time.Now()
		cli.run(ctx, "create", "cluster", c.name, "-n", c.namespace, "--config", config, "--kubernetes-version", kubernetesVersion,
			"--var", "DOCKYARD_LB_IMAGE="+lbImage)
		whenDone("kind networking: dockyard create cluster without CNI and kube-proxy (1 node, waits for it)", start)
		wl, _ := workloadClient(ctx, c)
		list := &corev1.NodeList{}
		Expect(wl.List(ctx, list)).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		for _, cond := range list.Items[0].Status.Conditions {
			if cond.Type == corev1.NodeReady {
				Expect(cond.Status).To(Equal(corev1.ConditionFalse), "a node without a CNI is not Ready: %s", cond.Message)
			}
		}
		daemonSets := &appsv1.DaemonSetList{}
		Expect(wl.List(ctx, daemonSets)).To(Succeed())
		Expect(daemonSets.Items).To(BeEmpty(), "neither kube-proxy nor the node image's CNI runs")

		cli.deleteCluster(ctx, c)
	})

	AfterAll(func(ctx SpecContext) {
		cleanupCluster(ctx, c, c.namespace)
	}, NodeTimeout(10*time.Minute))
})
