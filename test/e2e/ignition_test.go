//go:build e2e

package e2e

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// The ignition flavor booted for real, as CAPD's suite does: templates/cluster-template-ignition.yaml
// rendered by clusterctl, Cluster API's kubeadm providers (feature gate
// KubeadmBootstrapFormatIgnition) writing Ignition instead of cloud-config, and Dockyard's
// bootstrap running it in the nodes: files, then the kubeadm unit, as Ignition and systemd
// would at first boot.
var _ = Describe("Ignition flavor (the kubeadm bootstrap provider writing Ignition)", Ordered, func() {
	c := clusterSpec{name: "cctl-ign", namespace: cctlNamespacePrefix + "-ignition", controlPlane: 1, workers: 1}

	BeforeAll(func(ctx SpecContext) {
		DeferCleanup(func(ctx SpecContext) { cleanupCluster(ctx, c, c.namespace) }, NodeTimeout(6*time.Minute))
	})

	It("brings up 1 control plane and 1 worker bootstrapped from Ignition", func(ctx SpecContext) {
		start := time.Now()
		objs := generateFromTemplate(ctx, "cluster-template-ignition.yaml", c, map[string]string{
			"DOCKYARD_NODE_IMAGE": nodeImageRepo + ":" + kubernetesVersion,
			"DOCKYARD_LB_IMAGE":   lbImage,
		})
		createObjects(ctx, plane.Client(), c.namespace, objs)
		verifyRunningOn(ctx, plane, c, 1, 1)
		whenDone("ignition flavor: to all Machines Running and Nodes Ready (1+1)", start)

		By("every node's bootstrap data is Ignition")
		for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
			config := &bootstrapv1.KubeadmConfig{}
			Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: m.Spec.Bootstrap.ConfigRef.Name}, config)).To(Succeed())
			Expect(config.Spec.Format).To(Equal(bootstrapv1.Ignition), "KubeadmConfig %s", config.Name)
			secret := &corev1.Secret{}
			Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: *m.Spec.Bootstrap.DataSecretName}, secret)).To(Succeed())
			Expect(string(secret.Data["format"])).To(Equal("ignition"), "bootstrap data of machine %s", m.Name)

			By("node " + nodeContainer(m) + " ran kubeadm from Ignition's unit, once and successfully")
			out, code := execInNode(ctx, nodeContainer(m), "systemctl", "show", "kubeadm.service", "-p", "Result", "-p", "UnitFileState")
			Expect(code).To(Equal(0), out)
			Expect(out).To(ContainSubstring("Result=success"), "kubeadm.service in %s", nodeContainer(m))
			Expect(out).To(ContainSubstring("UnitFileState=enabled"), "kubeadm.service in %s", nodeContainer(m))
			out, code = execInNode(ctx, nodeContainer(m), "sh", "-c", "test -f /etc/kubeadm.sh && test ! -e /etc/kubeadm.yml && cat /run/cluster-api/bootstrap-success.complete")
			Expect(code).To(Equal(0), "node %s: the Ignition script, its consumed config and the success sentinel: %s", nodeContainer(m), out)
			Expect(strings.TrimSpace(out)).To(Equal("success"))
		}
	})

	It("deletes the cluster and leaves nothing on the engine", func(ctx SpecContext) {
		start := time.Now()
		deleteOn(ctx, plane, c)
		Expect(clusterContainers(ctx, c)).To(BeEmpty())
		whenDone("ignition flavor: delete until nothing is left", start)
	})
})
