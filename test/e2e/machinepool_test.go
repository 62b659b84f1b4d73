//go:build e2e

package e2e

import (
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// The machinepool flavor for real: templates/cluster-template-machinepool.yaml rendered by
// clusterctl, a control plane and a MachinePool on a DockyardMachinePool that Cluster API's
// MachinePool controller turns into one Machine per DockyardMachine (MachinePool Machines);
// scaled 0 → 3 → 1 (the newest instances go first), a killed instance replaced through its
// MachineHealthCheck, then deleted without a trace.
var _ = Describe("MachinePool flavor (DockyardMachinePool, MachinePool Machines)", Ordered, func() {
	c := clusterSpec{name: "cctl-pool", namespace: cctlNamespacePrefix + "-pool", controlPlane: 1, workers: 0}
	poolKey := client.ObjectKey{Namespace: c.namespace, Name: c.name + "-mp-0"}

	BeforeAll(func(ctx SpecContext) {
		DeferCleanup(func(ctx SpecContext) { cleanupCluster(ctx, c, c.namespace) }, NodeTimeout(6*time.Minute))
	})

	scale := func(ctx SpecContext, replicas int32) {
		mp := &clusterv1.MachinePool{}
		Expect(plane.Client().Get(ctx, poolKey, mp)).To(Succeed())
		patch := client.MergeFrom(mp.DeepCopy())
		mp.Spec.Replicas = ptr.To(replicas)
		Expect(plane.Client().Patch(ctx, mp, patch)).To(Succeed())
	}
	// expectProviderIDs waits until the DockyardMachinePool and the MachinePool both list the
	// providerIDs of exactly the given DockyardMachines, sorted.
	expectProviderIDs := func(ctx SpecContext, dms map[string]*infrav1.DockyardMachine) {
		var want []string
		for _, dm := range dms {
			want = append(want, dm.Spec.ProviderID)
		}
		sort.Strings(want)
		Eventually(func(g Gomega) {
			pool := &infrav1.DockyardMachinePool{}
			g.Expect(plane.Client().Get(ctx, poolKey, pool)).To(Succeed())
			if len(want) == 0 {
				g.Expect(pool.Spec.ProviderIDList).To(BeEmpty(), "DockyardMachinePool providerIDList")
			} else {
				g.Expect(pool.Spec.ProviderIDList).To(Equal(want), "DockyardMachinePool providerIDList")
			}
			g.Expect(conditions.IsTrue(pool, clusterv1.ReadyCondition)).To(BeTrue(), "DockyardMachinePool conditions %+v", pool.Status.Conditions)
			mp := &clusterv1.MachinePool{}
			g.Expect(plane.Client().Get(ctx, poolKey, mp)).To(Succeed())
			g.Expect(mp.Spec.ProviderIDList).To(HaveLen(len(want)), "MachinePool providerIDList")
			for _, id := range want {
				g.Expect(mp.Spec.ProviderIDList).To(ContainElement(id), "MachinePool providerIDList")
			}
			g.Expect(ptr.Deref(mp.Status.Replicas, -1)).To(BeEquivalentTo(len(want)), "MachinePool status.replicas")
			g.Expect(ptr.Deref(mp.Status.ReadyReplicas, -1)).To(BeEquivalentTo(len(want)), "MachinePool status.readyReplicas")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
	}
	poolMachines := func(dms map[string]*infrav1.DockyardMachine) map[string]*infrav1.DockyardMachine {
		out := map[string]*infrav1.DockyardMachine{}
		for name, dm := range dms {
			if dm.Labels[clusterv1.MachinePoolNameLabel] == poolKey.Name {
				out[name] = dm
			}
		}
		return out
	}

	// Scaling itself is Cluster API's MachinePoolSpec (test/capie2e); these specs prove what only
	// Dockyard decides: which instances a scale-down removes, and pool remediation.
	var threeDMs map[string]*infrav1.DockyardMachine
	It("brings up 1 control plane and a MachinePool of 3: Machines Running, their Nodes Ready", func(ctx SpecContext) {
		start := time.Now()
		pool := c
		pool.workers = 3
		objs := generateFromTemplate(ctx, "cluster-template-machinepool.yaml", pool, map[string]string{
			"DOCKYARD_NODE_IMAGE": nodeImageRepo + ":" + kubernetesVersion,
			"DOCKYARD_LB_IMAGE":   lbImage,
		})
		createObjects(ctx, plane.Client(), c.namespace, objs)
		waitMachinesRunning(ctx, c, 1, 3)
		threeDMs = poolMachines(verifyRunningOn(ctx, plane, c, 1, 3))
		Expect(threeDMs).To(HaveLen(3))
		for _, m := range machines(ctx, c, false) {
			Expect(m.Labels).To(HaveKeyWithValue(clusterv1.MachinePoolNameLabel, poolKey.Name), "Machine %s", m.Name)
			owner := metav1.GetControllerOf(&m)
			Expect(owner).NotTo(BeNil(), "Machine %s has no controller", m.Name)
			Expect(owner.Kind).To(Equal("MachinePool"), "Machine %s", m.Name)
		}
		expectProviderIDs(ctx, threeDMs)
		whenDone("machine pool: 1 control plane and a pool of 3, Machines Running and Nodes Ready", start)
	})

	It("scales the MachinePool 3 → 1: the two newest Machines and their Nodes go", func(ctx SpecContext) {
		start := time.Now()
		// The documented order for Ready instances: newest first (then by name), so the oldest
		// stays.
		var names []string
		for name := range threeDMs {
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool {
			ti, tj := threeDMs[names[i]].CreationTimestamp, threeDMs[names[j]].CreationTimestamp
			if !ti.Equal(&tj) {
				return ti.Before(&tj)
			}
			return names[i] < names[j]
		})
		keep := names[0]
		var goneNodes []string
		for _, m := range machines(ctx, c, false) {
			if m.Name != keep {
				goneNodes = append(goneNodes, m.Status.NodeRef.Name)
			}
		}
		Expect(goneNodes).To(HaveLen(2))

		scale(ctx, 1)
		waitMachinesRunning(ctx, c, 1, 1)
		one := poolMachines(verifyRunningOn(ctx, plane, c, 1, 1))
		Expect(one).To(HaveKey(keep), "the oldest instance stays")
		expectProviderIDs(ctx, one)
		wl, _ := workloadClient(ctx, c)
		for _, n := range goneNodes {
			Expect(apierrors.IsNotFound(wl.Get(ctx, client.ObjectKey{Name: n}, &corev1.Node{}))).To(BeTrue(), "Node %s still exists", n)
		}
		containers := clusterContainers(ctx, c)
		for name, dm := range threeDMs {
			node := strings.TrimPrefix(dm.Spec.ProviderID, infrav1.ProviderIDPrefix)
			if name == keep {
				Expect(containers).To(HaveKey(node), "the kept instance's container")
			} else {
				Expect(containers).NotTo(HaveKey(node), "the container of deleted instance %s", name)
			}
		}
		whenDone("machine pool: scale 3 → 1, two Machines and Nodes gone", start)
	})

	It("replaces a killed instance: its MachineHealthCheck marks it, the pool deletes it and makes a new one", func(ctx SpecContext) {
		mhc := &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name + "-pool"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: c.name,
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachinePoolNameLabel: poolKey.Name}},
				Checks: clusterv1.MachineHealthCheckChecks{
					UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{
						{Type: clusterv1.InfrastructureReadyCondition, Status: metav1.ConditionFalse, TimeoutSeconds: ptr.To[int32](20)},
					},
				},
			},
		}
		Expect(plane.Client().Create(ctx, mhc)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &clusterv1.MachineHealthCheck{}
			g.Expect(plane.Client().Get(ctx, client.ObjectKeyFromObject(mhc), got)).To(Succeed())
			g.Expect(ptr.Deref(got.Status.CurrentHealthy, 0)).To(BeEquivalentTo(1), "MachineHealthCheck status %+v", got.Status)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())

		old := machines(ctx, c, false)[0]
		killed := time.Now()
		Expect(engine.SignalContainer(ctx, nodeContainer(old), "SIGKILL")).To(Succeed())
		Eventually(func(g Gomega) {
			ws := machines(ctx, c, false)
			g.Expect(ws).To(HaveLen(1))
			g.Expect(ws[0].Name).NotTo(Equal(old.Name), "the killed instance's Machine is still there")
		}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
		waitMachinesRunning(ctx, c, 1, 1)
		expectProviderIDs(ctx, poolMachines(verifyRunningOn(ctx, plane, c, 1, 1)))
		whenDone("machine pool: instance killed → replaced by the MachineHealthCheck, new Node Ready (timeout 20s)", killed)
		Expect(clusterContainers(ctx, c)).NotTo(HaveKey(nodeContainer(old)), "the killed instance's container is removed with its Machine")
	})

	It("deletes the cluster and leaves nothing on the engine", func(ctx SpecContext) {
		start := time.Now()
		deleteOn(ctx, plane, c)
		pools := &infrav1.DockyardMachinePoolList{}
		Expect(plane.Client().List(ctx, pools, client.InNamespace(c.namespace))).To(Succeed())
		Expect(pools.Items).To(BeEmpty())
		Expect(clusterContainers(ctx, c)).To(BeEmpty())
		whenDone("machine pool: delete until nothing is left", start)
	})
})
