//go:build e2e

package e2e

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// The infrastructure cluster is not the management cluster: a Dockyard workload cluster on the
// engine (whose Services of type LoadBalancer Dockyard serves, as a cloud would) holds the nodes
// of a kubernetes flavor cluster, named by the kubeconfig Secret Cluster API keeps for it. The
// management cluster reaches that cluster's API only through the load balancer's address, not
// through the infrastructure cluster's Service range.
var _ = Describe("Nodes as Pods of a cluster the management cluster reaches from outside", kubernetesInfra, func() {
	It("puts the endpoint on a load balancer address of the infrastructure cluster and leaves nothing there", func(specCtx SpecContext) {
		mgmt := bootstrapClusterProxy
		c := mgmt.GetClient()
		namespace := "elsewhere-" + rand.String(6)
		infraName, clusterName := "infra-"+rand.String(6), "pods-"+rand.String(6)
		framework.CreateNamespace(specCtx, framework.CreateNamespaceInput{Creator: c, Name: namespace})
		deletePods := func(ctx SpecContext) {
			cluster := &clusterv1.Cluster{}
			err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, cluster)
			if apierrors.IsNotFound(err) {
				return
			}
			Expect(err).NotTo(HaveOccurred())
			framework.DeleteCluster(ctx, framework.DeleteClusterInput{Deleter: c, Cluster: cluster})
			framework.WaitForClusterDeleted(ctx, framework.WaitForClusterDeletedInput{ClusterProxy: mgmt, Cluster: cluster, ClusterctlConfigPath: clusterctlConfigPath, ArtifactFolder: artifactFolder},
				e2eConfig.GetIntervals("default", "wait-delete-cluster")...)
		}
		DeferCleanup(func(ctx SpecContext) {
			if skipCleanup {
				return
			}
			// The cluster on the infrastructure cluster goes first: without it, its Pods could
			// not be removed.
			deletePods(ctx)
			framework.DeleteAllClustersAndWait(ctx, framework.DeleteAllClustersAndWaitInput{ClusterProxy: mgmt, ClusterctlConfigPath: clusterctlConfigPath, Namespace: namespace},
				e2eConfig.GetIntervals("default", "wait-delete-cluster")...)
			framework.DeleteNamespace(ctx, framework.DeleteNamespaceInput{Deleter: c, Name: namespace})
		}, NodeTimeout(20*time.Minute))

		By("An infrastructure cluster: a workload cluster of the engine, 1 control plane and 1 worker")
		createCluster(specCtx, mgmt, "", namespace, infraName, 1, 1, nil)

		By("The node image loaded into its nodes (spec.loadImages, as dockyard load image does)")
		nodeImage := e2eConfig.MustGetVariable("DOCKYARD_NODE_IMAGE_REPOSITORY") + ":" + e2eConfig.MustGetVariable("KUBERNETES_VERSION")
		dc := &infrav1.DockyardCluster{}
		Expect(c.Get(specCtx, client.ObjectKey{Namespace: namespace, Name: infraName}, dc)).To(Succeed())
		patch := client.MergeFrom(dc.DeepCopy())
		dc.Spec.LoadImages = append(dc.Spec.LoadImages, nodeImage)
		Expect(c.Patch(specCtx, dc, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			var dms infrav1.DockyardMachineList
			g.Expect(c.List(specCtx, &dms, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: infraName})).To(Succeed())
			g.Expect(dms.Items).To(HaveLen(2))
			for _, dm := range dms.Items {
				g.Expect(dm.Status.LoadedImages).To(ContainElement(nodeImage), "machine %s", dm.Name)
			}
		}).WithTimeout(10 * time.Minute).WithPolling(3 * time.Second).Should(Succeed())

		infra := mgmt.GetWorkloadCluster(specCtx, namespace, infraName)
		ic := infra.GetClient()
		framework.CreateNamespace(specCtx, framework.CreateNamespaceInput{Creator: ic, Name: namespace})

		By("A kubernetes flavor cluster on it, named by the kubeconfig Secret Cluster API keeps")
		start := time.Now()
		createCluster(specCtx, mgmt, "kubernetes", namespace, clusterName, 1, 1,
			map[string]string{"DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET": infraName + "-kubeconfig"})
		report("1+1 cluster of nodes as Pods of another cluster Ready in %s", time.Since(start).Round(time.Second))

		By("Its endpoint is the address of a Service of type LoadBalancer of the infrastructure cluster")
		Expect(c.Get(specCtx, client.ObjectKey{Namespace: namespace, Name: clusterName}, dc)).To(Succeed())
		var svcs corev1.ServiceList
		Expect(ic.List(specCtx, &svcs, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/managed-by": "dockyard"})).To(Succeed())
		var ingress []string
		for _, s := range svcs.Items {
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
				for _, in := range s.Status.LoadBalancer.Ingress {
					ingress = append(ingress, in.IP)
				}
			}
		}
		Expect(ingress).To(ContainElement(dc.Spec.ControlPlaneEndpoint.Host),
			"the endpoint %s is the load balancer's address", dc.Spec.ControlPlaneEndpoint.Host)
		Expect(isTrue(dc.Status.Conditions, infrav1.LoadBalancerAvailableCondition)).To(BeTrue())

		By("The management cluster's view of it: every node Ready, through that address")
		workload := mgmt.GetWorkloadCluster(specCtx, namespace, clusterName)
		Eventually(func(g Gomega) {
			var nodes corev1.NodeList
			g.Expect(workload.GetClient().List(specCtx, &nodes)).To(Succeed())
			g.Expect(nodes.Items).To(HaveLen(2))
			for _, n := range nodes.Items {
				g.Expect(slices.ContainsFunc(n.Status.Conditions, func(cond corev1.NodeCondition) bool {
					return cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
				})).To(BeTrue(), "node %s Ready", n.Name)
			}
		}).WithTimeout(5 * time.Minute).WithPolling(3 * time.Second).Should(Succeed())

		By("Deleting it leaves nothing in the infrastructure cluster")
		deleted := time.Now()
		deletePods(specCtx)
		report("deletion of a cluster of nodes as Pods of another cluster: %s", time.Since(deleted).Round(time.Second))
		expectNothingLeft(specCtx, ic, namespace)
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(ic.List(specCtx, &pods, client.InNamespace(namespace))).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty(), "Pods left")
		}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	})
})
