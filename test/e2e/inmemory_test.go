//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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

// In-memory clusters (the in-memory flavor) with Cluster API's own controllers, as one scenario
// so that CI pays for the clusters once:
//   - each comes up Available, its control plane initialized by KubeadmControlPlane through the
//     API server the manager serves, its Machines Running with their Nodes Ready and carrying
//     their providerIDs; nothing runs on the engine;
//   - the manager restarted, every cluster is served again on its endpoint from its record;
//   - a fault (the stop annotation) stops a node's kubelet: Cluster API's MachineHealthChecks
//     see its Node Unknown and the MachineDeployment, then KubeadmControlPlane (three control
//     plane machines, so etcd keeps its quorum), replace the machine, whose successor joins
//     through the restored API server;
//   - clusterctl move takes one of them, in a namespace of its own, to a second management
//     plane: its record goes with it, and that plane's manager serves it on the same endpoint;
//   - deleting them stops their API servers and removes their records.
var _ = Describe("In-memory clusters", Label("inmemory"), func() {
	It("come up with Cluster API's controllers, outlive a restart of the manager and clusterctl move, are remediated when a fault stops a kubelet, and go when deleted", func(ctx SpecContext) {
		const workers = 2
		ns := testNamespacePrefix + "-mem"
		count := inMemoryClusters()
		Expect(count).To(BeNumerically(">=", 2), "DOCKYARD_E2E_INMEMORY_CLUSTERS: one cluster is remediated, another moved")
		cs := make([]clusterSpec, count)
		for i := range cs {
			cs[i] = clusterSpec{name: fmt.Sprintf("mem-%d", i), namespace: ns, controlPlane: 1, workers: workers, template: "cluster-template-in-memory.yaml"}
		}
		// The one remediated: three control plane machines.
		healed := &cs[0]
		healed.controlPlane = 3
		// The one moved: clusterctl move takes a whole namespace.
		moved := &cs[count-1]
		moved.namespace = ns + "-move"
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range cs {
				cleanupCluster(ctx, c, c.name)
			}
		})

		start := time.Now()
		for _, c := range cs {
			createCluster(ctx, c)
		}
		for _, mhc := range []*clusterv1.MachineHealthCheck{
			remediatingHealthCheck(*healed, "control-plane", map[string]string{clusterv1.MachineControlPlaneLabel: ""}),
			remediatingHealthCheck(*healed, "workers", map[string]string{clusterv1.MachineDeploymentNameLabel: healed.name + "-md-0"}),
		} {
			Expect(plane.Client().Create(ctx, mhc)).To(Succeed())
		}
		for _, c := range cs {
			waitClusterAvailable(ctx, c, clusterTimeout)
			waitMachinesRunning(ctx, c, c.controlPlane, workers)
		}
		whenDone(fmt.Sprintf("in memory: %d clusters (one of 3+%d, the others 1+%d) Available, Machines Running, Nodes Ready", count, workers, workers), start)
		fmt.Fprintf(GinkgoWriter, "the manager's resident memory with %d in-memory clusters: %d MiB\n", count, plane.ResidentMemory(framework.DockyardManager)>>20)

		var endpoints []string
		for _, c := range cs {
			dc := &infrav1.DockyardCluster{}
			Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc)).To(Succeed())
			Expect(dc.Status.Engine).To(Equal(infrav1.EngineInMemory), "DockyardCluster %s", c.name)
			Expect(dc.Spec.ControlPlaneEndpoint.Host).To(Equal(inMemoryAddress), "DockyardCluster %s's endpoint", c.name)
			endpoints = append(endpoints, net.JoinHostPort(dc.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(dc.Spec.ControlPlaneEndpoint.Port))))
			Eventually(func() error {
				return plane.Client().Get(ctx, inMemoryRecord(c), &corev1.Secret{})
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed(), "the record of in-memory cluster %s", c.name)
		}

		By("restarting the manager: it stops gracefully, saving what changed, and takes every cluster in again")
		restarted := time.Now()
		Expect(plane.RestartDockyard(ctx)).To(Succeed())
		for _, c := range cs {
			Eventually(func(g Gomega) {
				wl, _ := workloadClient(ctx, c)
				nodes := &corev1.NodeList{}
				g.Expect(wl.List(ctx, nodes)).To(Succeed(), "in-memory cluster %s after the restart", c.name)
				g.Expect(nodes.Items).To(HaveLen(c.controlPlane+workers), "in-memory cluster %s's Nodes after the restart", c.name)
			}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
		}
		whenDone(fmt.Sprintf("in memory: the manager restarted, %d clusters served again", count), restarted)

		for _, controlPlane := range []bool{false, true} {
			faulty := machines(ctx, *healed, controlPlane)[0]
			By("stopping the kubelet of " + faulty.Name)
			injected := time.Now()
			dm := &infrav1.DockyardMachine{}
			Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: healed.namespace, Name: faulty.Spec.InfrastructureRef.Name}, dm)).To(Succeed())
			patch := client.MergeFrom(dm.DeepCopy())
			dm.Annotations = map[string]string{infrav1.StopAnnotation: "kubelet"}
			Expect(plane.Client().Patch(ctx, dm, patch)).To(Succeed())
			Eventually(func(g Gomega) {
				got := &clusterv1.Machine{}
				err := plane.Client().Get(ctx, client.ObjectKeyFromObject(&faulty), got)
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "machine %s with its kubelet stopped is still there: %v", faulty.Name, conditionsOf(got))
			}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
			waitMachinesRunning(ctx, *healed, 3, workers)
			whenDone(fmt.Sprintf("in memory: kubelet stopped in %s, replaced and the cluster whole again", faulty.Name), injected)
		}

		moveInMemoryCluster(ctx, moved, workers, endpoints[count-1])

		deleted := time.Now()
		deleteOn(ctx, plane, cs[:count-1]...)
		deleteWith(ctx, moved.client(), *moved)
		whenDone(fmt.Sprintf("in memory: %d clusters deleted", count), deleted)
		for i, endpoint := range endpoints {
			conn, err := net.DialTimeout("tcp", endpoint, 2*time.Second)
			if err == nil {
				_ = conn.Close()
			}
			Expect(err).To(HaveOccurred(), "a deleted in-memory cluster's API server still listens on %s", endpoint)
			Eventually(func() bool {
				return apierrors.IsNotFound(cs[i].client().Get(ctx, inMemoryRecord(cs[i]), &corev1.Secret{}))
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(BeTrue(), "the record of %s outlived its cluster", cs[i].name)
		}
	})
})

// inMemoryRecord is where an in-memory cluster is kept: a Secret of its namespace.
func inMemoryRecord(c clusterSpec) client.ObjectKey {
	return client.ObjectKey{Namespace: c.namespace, Name: c.name + "-in-memory-state"}
}

// remediatingHealthCheck is a MachineHealthCheck of a cluster's machines matching labels that
// remediates a machine whose Node has been Ready Unknown for 10 s.
func remediatingHealthCheck(c clusterSpec, name string, labels map[string]string) *clusterv1.MachineHealthCheck {
	labels[clusterv1.ClusterNameLabel] = c.name
	return &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name + "-" + name},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: c.name,
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](10)},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](10)},
			}},
		},
	}
}

// conditionsOf is a Machine's conditions, as type=status reason, for a failure's message.
func conditionsOf(m *clusterv1.Machine) []string {
	var out []string
	for _, c := range m.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
	}
	return out
}

// moveInMemoryCluster moves an in-memory cluster's namespace with clusterctl move to a second
// management plane, started for it (stopped when the spec ends, its clusters deleted first),
// and waits until that plane's controllers see the cluster whole: Available, its Machines
// Running with their Nodes Ready, through the API server the second plane's manager now serves
// on the cluster's unchanged endpoint; the first plane keeps nothing of it. c.mgmt becomes the
// second plane's client.
func moveInMemoryCluster(ctx context.Context, c *clusterSpec, workers int, endpoint string) {
	By("moving " + c.name + " to a second management plane with clusterctl move")
	began := time.Now()
	dir := filepath.Join(artifacts, planeDirName(GinkgoParallelProcess())+"-move-target")
	Expect(os.RemoveAll(dir)).To(Succeed())
	opts := planeOptions(dir)
	opts.ClusterctlInventory = true
	target, err := framework.Start(ctx, opts)
	Expect(err).NotTo(HaveOccurred(), "starting clusterctl move's target plane")
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			target.Dump(ctx, GinkgoWriter)
			target.KeepWorkDir()
		}
		deleteWith(ctx, target.Client(), *c)
		Expect(target.Stop(ctx)).To(Succeed())
	})
	Expect(plane.InstallClusterctlInventory(ctx)).To(Succeed())
	whenDone("in memory: clusterctl move's target plane started", began)

	moving := time.Now()
	clusterctl(ctx, nil, "move", "--kubeconfig", plane.Kubeconfig(), "--to-kubeconfig", target.Kubeconfig(), "--namespace", c.namespace)
	c.mgmt = target.Client()
	waitClusterAvailable(ctx, *c, clusterTimeout)
	waitMachinesRunning(ctx, *c, c.controlPlane, workers)
	dc := &infrav1.DockyardCluster{}
	Expect(target.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc)).To(Succeed())
	Expect(net.JoinHostPort(dc.Spec.ControlPlaneEndpoint.Host, strconv.Itoa(int(dc.Spec.ControlPlaneEndpoint.Port)))).To(Equal(endpoint), "the moved cluster's endpoint")
	Expect(target.Client().Get(ctx, inMemoryRecord(*c), &corev1.Secret{})).To(Succeed(), "the moved cluster's record on the target")
	for _, obj := range []client.Object{&infrav1.DockyardCluster{}, &corev1.Secret{}} {
		key := client.ObjectKey{Namespace: c.namespace, Name: c.name}
		if _, ok := obj.(*corev1.Secret); ok {
			key = inMemoryRecord(*c)
		}
		err := plane.Client().Get(ctx, key, obj)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s left on the plane it was moved from: %v", obj, key, err)
	}
	whenDone("in memory: "+c.name+" moved by clusterctl move, Available and served by the target's manager", moving)
}
