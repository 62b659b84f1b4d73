//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/container"
)

// sharedNetworkLabel marks the network this spec creates, the way a user creates one, so the
// spec can remove what an earlier run left.
const sharedNetworkLabel = "dockyard.x-k8s.io/e2e-shared-network"

// sharedNetwork is the network of the user's that the suite's manager allows clusters to join
// (--allowed-networks).
const sharedNetwork = cctlNamespacePrefix + "-shared"

// Two clusters of the default flavor on one network the user created (DOCKYARD_NETWORK, that
// is spec.network.existing.name): a cluster asked for before the network exists waits, saying
// NetworkNotFound; both then come up side by side; deleting one leaves the other working and
// the network in place, and Dockyard never removes the network.
var _ = Describe("Two clusters on one network the user created", Ordered, func() {
	const network = sharedNetwork
	// Namespaces of their own: deleteOn waits until a namespace has no cluster objects left.
	one := clusterSpec{name: "cctl-net-one", namespace: cctlNamespacePrefix + "-net-one", controlPlane: 1, workers: 0}
	two := clusterSpec{name: "cctl-net-two", namespace: cctlNamespacePrefix + "-net-two", controlPlane: 1, workers: 0}
	vars := map[string]string{
		"DOCKYARD_NODE_IMAGE": nodeImageRepo + ":" + kubernetesVersion,
		"DOCKYARD_LB_IMAGE":   lbImage,
		"DOCKYARD_NETWORK":    network,
	}
	removeNetwork := func(ctx context.Context) {
		ns, _ := engine.ListNetworks(ctx, map[string]string{sharedNetworkLabel: ""})
		for _, n := range ns {
			_ = engine.RemoveNetwork(ctx, n.Name)
		}
	}

	BeforeAll(func(ctx SpecContext) {
		removeNetwork(ctx)
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range []clusterSpec{one, two} {
				cleanupCluster(ctx, c, cctlNamespacePrefix+"-net-")
			}
			removeNetwork(ctx)
		}, NodeTimeout(6*time.Minute))
	})

	It("waits for the network, then brings both clusters up on it side by side", func(ctx SpecContext) {
		By("a cluster asked for before its network exists says NetworkNotFound")
		createObjects(ctx, plane.Client(), two.namespace, generateFromTemplate(ctx, "cluster-template.yaml", two, vars))
		Eventually(func(g Gomega) {
			dc := &infrav1.DockyardCluster{}
			g.Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: two.namespace, Name: two.name}, dc)).To(Succeed())
			cond := conditions.Get(dc, infrav1.LoadBalancerAvailableCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(infrav1.NetworkNotFoundReason), "condition %+v", cond)
			g.Expect(cond.Message).To(ContainSubstring(network))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())

		By("the user creates the network; both clusters come up on it")
		start := time.Now()
		Expect(engine.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: map[string]string{sharedNetworkLabel: "true"}})).To(Succeed())
		createObjects(ctx, plane.Client(), one.namespace, generateFromTemplate(ctx, "cluster-template.yaml", one, vars))
		var wg sync.WaitGroup
		for _, c := range []clusterSpec{one, two} {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				verifyRunningOn(ctx, plane, c, 1, 0)
			}()
		}
		wg.Wait()
		whenDone("shared network: two 1+0 clusters to Nodes Ready on one network", start)
		for _, c := range []clusterSpec{one, two} {
			waitClusterAvailable(ctx, c, clusterTimeout)
		}

		By("every container of both clusters is on the shared network, and nothing else was created")
		for _, c := range []clusterSpec{one, two} {
			cs := clusterContainers(ctx, c)
			Expect(cs).To(HaveLen(2), "cluster %s: a load balancer and a control plane node", c.name)
			for name := range cs {
				info, err := engine.InspectContainer(ctx, name)
				Expect(err).NotTo(HaveOccurred())
				Expect(info.Networks).To(HaveKey(network), "container %s", name)
			}
			ns, err := engine.ListNetworks(ctx, c.key().ClusterLabels())
			Expect(err).NotTo(HaveOccurred())
			Expect(ns).To(BeEmpty(), "cluster %s: Dockyard created a network of its own", c.name)
		}
		for _, c := range []clusterSpec{one, two} {
			_, kubeconfig := workloadClient(ctx, c)
			out, err := kubectl(kubeconfig, "get", "nodes")
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(ContainSubstring(c.name), "cluster %s answers through its own load balancer", c.name)
		}
	})

	It("deletes one cluster, leaving the other working and the network in place", func(ctx SpecContext) {
		start := time.Now()
		deleteOn(ctx, plane, one)
		whenDone("shared network: delete one cluster", start)
		_, err := engine.InspectNetwork(ctx, network)
		Expect(err).NotTo(HaveOccurred(), "the shared network after deleting a cluster on it")
		// Available, waited for: Cluster API computes it from health checks (etcd, the
		// control plane's Pods, a remote probe) that may lag while the engine is busy.
		waitClusterAvailable(ctx, two, 3*time.Minute)
		_, kubeconfig := workloadClient(ctx, two)
		out, err := kubectl(kubeconfig, "get", "nodes")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(strings.Count(out, " Ready ")).To(Equal(1), out)

		deleteOn(ctx, plane, two)
		_, err = engine.InspectNetwork(ctx, network)
		Expect(err).NotTo(HaveOccurred(), "Dockyard removed a network it did not create")
		Expect(apierrors.IsNotFound(plane.Client().Get(ctx, client.ObjectKey{Namespace: two.namespace, Name: two.name}, &clusterv1.Cluster{}))).To(BeTrue())
	})
})
