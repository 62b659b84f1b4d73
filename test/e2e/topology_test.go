//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The topology flavor for real: templates/clusterclass-dockyard-quick-start.yaml and
// templates/cluster-template-topology.yaml rendered by clusterctl, a 1+1 cluster whose nodes
// come from the ClusterClass's patches (image from the repository variable and the version,
// worker CPU and memory limits, Pod Security admission), then deleted without a trace.
var _ = Describe("Topology flavor (ClusterClass dockyard-quick-start)", Ordered, func() {
	c := clusterSpec{name: "cctl-topo", namespace: cctlNamespacePrefix + "-topology", controlPlane: 1, workers: 1}
	vars := map[string]string{
		"DOCKYARD_NODE_IMAGE_REPOSITORY": nodeImageRepo,
		"DOCKYARD_LB_IMAGE":              lbImage,
		"DOCKYARD_WORKER_CPU":            "1",
		"DOCKYARD_WORKER_MEMORY":         "2Gi",
	}

	BeforeAll(func(ctx SpecContext) {
		sweepEngine(ctx, cctlNamespacePrefix)
		DeferCleanup(func(ctx SpecContext) { cleanupCluster(ctx, c, cctlNamespacePrefix) }, NodeTimeout(6*time.Minute))
	})

	It("brings up 1 control plane and 1 worker from the ClusterClass, with its patches applied", func(ctx SpecContext) {
		start := time.Now()
		By("creating the ClusterClass and the Cluster, both rendered by clusterctl")
		class := generateFromTemplate(ctx, "clusterclass-dockyard-quick-start.yaml", clusterSpec{}, nil)
		createObjects(ctx, plane.Client(), c.namespace, class)
		cluster := generateFromTemplate(ctx, "cluster-template-topology.yaml", c, vars)
		createObjects(ctx, plane.Client(), c.namespace, cluster)

		dms := verifyRunningOn(ctx, plane, c, 1, 1)
		whenDone("topology flavor: to all Machines Running and Nodes Ready (1+1)", start)

		By("every node runs the node image built from imageRepository and the version")
		for _, dm := range dms {
			Expect(dm.Spec.Image).To(Equal(nodeImageRepo+":"+kubernetesVersion), "DockyardMachine %s", dm.Name)
		}

		By("the worker's container is limited to the workerResources, as its cgroup shows")
		var worker string
		for _, m := range machines(ctx, c, false) {
			dm := dms[m.Spec.InfrastructureRef.Name]
			Expect(dm).NotTo(BeNil())
			Expect(dm.Spec.Resources.CPU).NotTo(BeNil())
			Expect(dm.Spec.Resources.CPU.Cmp(resource.MustParse("1"))).To(BeZero(), "cpu %s", dm.Spec.Resources.CPU)
			Expect(dm.Spec.Resources.Memory).NotTo(BeNil())
			Expect(dm.Spec.Resources.Memory.Cmp(resource.MustParse("2Gi"))).To(BeZero(), "memory %s", dm.Spec.Resources.Memory)
			worker = nodeContainer(m)
		}
		limits, code := execInNode(ctx, worker, "sh", "-c",
			"cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max")
		Expect(code).To(Equal(0), limits)
		fields := strings.Fields(limits)
		Expect(fields).To(HaveLen(3), limits)
		Expect(fields[0]).To(Equal(fmt.Sprint(2<<30)), "memory limit of node %s", worker)
		Expect(fields[1]).To(Equal(fields[2]), "CPU quota of node %s: one CPU is one period", worker)
		for _, m := range machines(ctx, c, true) {
			Expect(dms[m.Spec.InfrastructureRef.Name].Spec.Resources.CPU).To(BeNil(), "control plane nodes have no limits")
		}

		By("the API server enforces the baseline Pod Security level")
		cp := nodeContainer(machines(ctx, c, true)[0])
		manifest, code := execInNode(ctx, cp, "cat", "/etc/kubernetes/manifests/kube-apiserver.yaml")
		Expect(code).To(Equal(0), manifest)
		Expect(manifest).To(ContainSubstring("--admission-control-config-file=/etc/kubernetes/dockyard/admission.yaml"))
		wl, _ := workloadClient(ctx, c)
		Expect(wl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pss-check"}})).To(Succeed())
		privileged := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: "pss-check"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: flannelImage(), ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}}},
		}
		err := wl.Create(ctx, privileged)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a privileged pod was not refused: %v", err)
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "baseline:latest"`))

		By("the ClusterClass's MachineHealthChecks watch the control plane and the workers")
		Eventually(func(g Gomega) {
			mhcs := &clusterv1.MachineHealthCheckList{}
			g.Expect(plane.Client().List(ctx, mhcs, client.InNamespace(c.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
			g.Expect(mhcs.Items).To(HaveLen(2))
			for _, mhc := range mhcs.Items {
				g.Expect(ptr.Deref(mhc.Status.ExpectedMachines, 0)).To(BeEquivalentTo(1), "MachineHealthCheck %s", mhc.Name)
				g.Expect(ptr.Deref(mhc.Status.CurrentHealthy, 0)).To(BeEquivalentTo(1), "MachineHealthCheck %s", mhc.Name)
			}
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())

		By("clusterctl describe shows Dockyard's conditions for the cluster and each machine")
		var nodes []string
		for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
			nodes = append(nodes, nodeContainer(m))
		}
		expectDescribeHealthy(ctx, plane, c, nodes)
	})

	It("deletes the cluster and leaves nothing on the engine", func(ctx SpecContext) {
		start := time.Now()
		deleteOn(ctx, plane, c)
		Expect(clusterContainers(ctx, c)).To(BeEmpty())
		whenDone("topology flavor: delete until nothing is left", start)
	})
})
