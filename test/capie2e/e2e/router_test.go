//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// The management cluster's nodes join every workload cluster's network, and a Kubernetes node
// forwards. What a team's root in a workload node could do with that (route the management
// cluster's Service range through a management node's address and reach its API server, or
// reach that node's kubelet) is tried from a container on a workload network, and fails; what
// the management cluster needs (its connections into the workload network, and their replies)
// still works.
var _ = Describe("The management cluster's nodes are no routers for workload networks", blocking, func() {
	It("answers nothing a workload network sends them but replies", func(ctx SpecContext) {
		c := bootstrapClusterProxy.GetClient()
		ns := "router-" + rand.String(6)
		name := "router"
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			_ = c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			Eventually(func() error {
				return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &clusterv1.Cluster{})
			}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).ShouldNot(Succeed())
			_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}, NodeTimeout(5*time.Minute))

		By("a cluster with no machines: its network (which the management nodes join) and its load balancer")
		Expect(c.Create(ctx, &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: infrav1.DockyardClusterSpec{LoadBalancer: infrav1.LoadBalancerSpec{Image: e2eConfig.MustGetVariable("DOCKYARD_LB_IMAGE")}}})).To(Succeed())
		Expect(c.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: name}}})).To(Succeed())
		dc := &infrav1.DockyardCluster{}
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dc)).To(Succeed())
			g.Expect(conditions.IsTrue(dc, infrav1.LoadBalancerAvailableCondition)).To(BeTrue(), "%+v", dc.Status.Conditions)
			// Cluster API's patch helper writes conditions before the spec: the condition can be
			// True a moment before the endpoint is there.
			g.Expect(dc.Spec.ControlPlaneEndpoint.Host).NotTo(BeEmpty(), "the DockyardCluster has no endpoint yet")
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		key := docker.ClusterKey{Namespace: ns, Name: name}
		network := docker.DefaultNetworkName(key)
		lb := dc.Spec.ControlPlaneEndpoint.Host

		rt, err := runtimes.New(runtimes.FromEnv())
		Expect(err).NotTo(HaveOccurred())
		defer rt.Close()
		nodes := docker.NewManager(rt, docker.ManagerOptions{})
		var mgmtNode, via string
		Eventually(func(g Gomega) {
			mgmt, err := nodes.Nodes(ctx, docker.ClusterKey{Name: e2eConfig.ManagementClusterName}, "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mgmt).NotTo(BeEmpty(), "no node of management cluster %s on the engine", e2eConfig.ManagementClusterName)
			mgmtNode, via = mgmt[0].Name, mgmt[0].Address(network)
			g.Expect(via).NotTo(BeEmpty(), "management node %s is not on %s", mgmtNode, network)
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		apiService := &corev1.Service{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, apiService)).To(Succeed())
		serviceIP := apiService.Spec.ClusterIP

		By("a workload node's stand-in: a container on the cluster's network with NET_ADMIN")
		probe := "router-probe-" + rand.String(6)
		Expect(rt.CreateContainer(ctx, container.ContainerSpec{
			Name: probe, Image: e2eConfig.MustGetVariable("DOCKYARD_NODE_IMAGE_REPOSITORY") + ":" + e2eConfig.MustGetVariable("KUBERNETES_VERSION"),
			Labels: key.ClusterLabels(), Network: network, Entrypoint: []string{"sleep"}, Cmd: []string{"infinity"},
			Security: container.SecuritySpec{CapAdd: []string{"NET_ADMIN"}},
		})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = rt.RemoveContainer(ctx, probe) })
		Expect(rt.StartContainer(ctx, probe)).To(Succeed())
		run := func(name string, cmd string) (int, string) {
			var out bytes.Buffer
			code, err := rt.Exec(ctx, name, container.ExecOptions{Cmd: []string{"bash", "-c", cmd}, Stdout: &out, Stderr: &out})
			Expect(err).NotTo(HaveOccurred())
			return code, out.String()
		}
		connects := func(name, ip string, port int) bool {
			code, _ := run(name, fmt.Sprintf("timeout 3 bash -c '</dev/tcp/%s/%d'", ip, port))
			return code == 0
		}

		By(fmt.Sprintf("routing the management cluster's API Service (%s) through the management node's address %s", serviceIP, via))
		code, out := run(probe, fmt.Sprintf("ip route add %s/32 via %s", serviceIP, via))
		Expect(code).To(BeZero(), out)
		Expect(connects(probe, serviceIP, 443)).To(BeFalse(), "the management cluster's API Service answered a workload network")
		By("the management node's own API server and kubelet on its address there")
		// The suite's configuration opens the API server's port (KCPRemediationSpec's nodes read
		// the management cluster), and nothing else: the kubelet's stays closed.
		Expect(connects(probe, via, 6443)).To(BeTrue(), "the management node's API server, opened by DOCKYARD_MANAGEMENT_PORTS_OPEN_TO_WORKLOADS, did not answer a workload network")
		Expect(connects(probe, via, 10250)).To(BeFalse(), "the management node's kubelet answered a workload network")

		By("the management node still reaches the cluster's load balancer, and gets the replies")
		Expect(connects(mgmtNode, lb, int(dc.Spec.ControlPlaneEndpoint.Port))).To(BeTrue(), "the management node cannot reach the load balancer at %s", lb)
		_, rules := run(mgmtNode, "iptables -t raw -S DOCKYARD-ISOLATION; iptables -t mangle -S DOCKYARD-ISOLATION")
		fmt.Fprintf(GinkgoWriter, "isolation rules in %s:\n%s\n", mgmtNode, rules)
		Expect(strings.Count(rules, "-j DROP")).To(BeNumerically(">=", 2))
	})
})
