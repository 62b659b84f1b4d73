//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capispecs "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/cmd/tools/mgmt"
	"github.com/dockyard-dev/dockyard/test/capie2e"
)

// Specs of the kubernetes flavor: the management cluster (one control plane and a worker per
// zone of DOCKYARD_E2E_ZONES, make test-e2e-kubernetes) is the infrastructure cluster, whose
// Pods the workload clusters' nodes are and whose zones are their failure domains. They run in
// make test-e2e-kubernetes (part of make test-e2e-full), on a management cluster of their own.
var kubernetesInfra = Label("kubernetes")

// infrastructure is the management cluster as the kubernetes flavor's clusters need it: their
// endpoints, Services of the management cluster, reached through its nodes.
func infrastructure() framework.ClusterProxy {
	return capie2e.InfrastructureProxy{ClusterProxy: bootstrapClusterProxy}
}

func requireZones() {
	Expect(infrastructureZones()).To(HaveLen(3),
		"DOCKYARD_E2E_ZONES names the management cluster's three zones (make test-e2e-kubernetes sets a,b,c)")
}

var _ = Describe("QuickStart, nodes as Pods over three zones", kubernetesInfra, func() {
	BeforeEach(requireZones)
	capispecs.QuickStartSpec(ctx, func() capispecs.QuickStartSpecInput {
		return capispecs.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: infrastructure(),
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("kubernetes"),
			ControlPlaneMachineCount: ptr.To[int64](3), WorkerMachineCount: ptr.To[int64](3),
			PostMachinesProvisioned: func(proxy framework.ClusterProxy, namespace, clusterName string) {
				expectOnePerZone(proxy.GetClient(), namespace, clusterName)
			},
		}
	})
})

var _ = Describe("KubeadmControlPlane remediation, nodes as Pods", kubernetesInfra, func() {
	BeforeEach(requireZones)
	capispecs.KCPRemediationSpec(ctx, func() capispecs.KCPRemediationSpecInput {
		return capispecs.KCPRemediationSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: infrastructure(),
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("kcp-remediation-kubernetes"),
		}
	})
})

// zoneOf returns the zone of each of a cluster's machines: the zone of the infrastructure node
// its Pod runs on; machines without a running Pod are left out.
func zoneOf(c client.Client, namespace, clusterName string) map[string]string {
	var machines clusterv1.MachineList
	Expect(c.List(ctx, &machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})).To(Succeed())
	var nodes corev1.NodeList
	Expect(c.List(ctx, &nodes)).To(Succeed())
	nodeZone := map[string]string{}
	for _, n := range nodes.Items {
		nodeZone[n.Name] = n.Labels[mgmt.ZoneLabel]
	}
	var pods corev1.PodList
	Expect(c.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
	out := map[string]string{}
	for _, m := range machines.Items {
		if m.Spec.InfrastructureRef.Name == "" {
			continue
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, m.Spec.InfrastructureRef.Name+".") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				out[m.Name] = nodeZone[p.Spec.NodeName]
			}
		}
	}
	return out
}

// expectOnePerZone checks a 3+3 cluster's machines: the control plane machines have the three
// zones as failure domains and their Pods run there, and the workers are spread one per zone.
func expectOnePerZone(c client.Client, namespace, clusterName string) {
	var machines clusterv1.MachineList
	Expect(c.List(ctx, &machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})).To(Succeed())
	zones := zoneOf(c, namespace, clusterName)
	var cps, workers []string
	for _, m := range machines.Items {
		z := zones[m.Name]
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			Expect(z).To(Equal(m.Spec.FailureDomain), "control plane machine %s has failure domain %q and runs in zone %q", m.Name, m.Spec.FailureDomain, z)
			cps = append(cps, z)
		} else {
			workers = append(workers, z)
		}
	}
	sort.Strings(cps)
	sort.Strings(workers)
	Expect(cps).To(Equal(infrastructureZones()), "the control plane machines' zones")
	Expect(workers).To(Equal(infrastructureZones()), "the workers' zones")
	dc := &infrav1.DockyardCluster{}
	Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: clusterName}, dc)).To(Succeed())
	var fds []string
	for _, fd := range dc.Status.FailureDomains {
		fds = append(fds, fd.Name)
	}
	Expect(fds).To(Equal(infrastructureZones()), "the DockyardCluster's failure domains")
}

// maxFailedProbes bounds the failed probes of the workload API while a zone is lost and its
// machines replaced (see where it is checked).
const maxFailedProbes = 10

var _ = Describe("A zone goes away and comes back", kubernetesInfra, func() {
	BeforeEach(requireZones)

	It("keeps the API serving, replaces the zone's machines in the others, and uses the zone again", func(specCtx SpecContext) {
		infra := infrastructure()
		c := infra.GetClient()
		namespace := "zones-" + rand.String(6)
		clusterName := "zones-" + rand.String(6)
		framework.CreateNamespace(specCtx, framework.CreateNamespaceInput{Creator: c, Name: namespace})
		DeferCleanup(func(ctx SpecContext) {
			if skipCleanup {
				return
			}
			framework.DeleteAllClustersAndWait(ctx, framework.DeleteAllClustersAndWaitInput{ClusterProxy: infra, ClusterctlConfigPath: clusterctlConfigPath, Namespace: namespace},
				e2eConfig.GetIntervals("default", "wait-delete-cluster")...)
			By("Checking that the cluster left nothing in the infrastructure cluster")
			expectNothingLeft(ctx, c, namespace)
			framework.DeleteNamespace(ctx, framework.DeleteNamespaceInput{Deleter: c, Name: namespace})
		}, NodeTimeout(15*time.Minute))

		start := time.Now()
		result := createCluster(specCtx, infra, "kubernetes", namespace, clusterName, 3, 3, nil)
		report("3+3 cluster of nodes as Pods Ready in %s", time.Since(start).Round(time.Second))
		expectOnePerZone(c, namespace, clusterName)

		By("A MachineHealthCheck replaces machines whose Node stops answering")
		Expect(c.Create(specCtx, &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: clusterName + "-nodes"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: clusterName,
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
				Checks: clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
					{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, TimeoutSeconds: ptr.To[int32](20)},
					{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](20)},
				}},
			},
		})).To(Succeed())

		zone := infrastructureZones()[0]
		lost := map[string]bool{}
		for m, z := range zoneOf(c, namespace, clusterName) {
			if z == zone {
				lost[m] = true
			}
		}
		Expect(lost).To(HaveLen(2), "zone %s holds one control plane machine and one worker", zone)

		By("Probing the workload API server every second")
		workload := infra.GetWorkloadCluster(specCtx, namespace, clusterName)
		cs, err := kubernetes.NewForConfig(workload.GetRESTConfig())
		Expect(err).NotTo(HaveOccurred())
		var probes, failures atomic.Int64
		probeCtx, stopProbe := context.WithCancel(specCtx)
		probed := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(probed)
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-probeCtx.Done():
					return
				case <-tick.C:
				}
				reqCtx, cancel := context.WithTimeout(probeCtx, 2*time.Second)
				_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(reqCtx)
				cancel()
				if probeCtx.Err() != nil {
					return
				}
				probes.Add(1)
				if err != nil {
					failures.Add(1)
				}
			}
		}()
		DeferCleanup(func() { stopProbe(); <-probed })

		worker := mgmt.WorkerName(e2eConfig.ManagementClusterName, zone)
		By("Stopping zone " + zone + ": its host " + worker)
		stopped := time.Now()
		Expect(engineCommand(specCtx, "stop", worker)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = engineCommand(ctx, "start", worker) })

		By("The zone's machines are reported")
		Eventually(func(g Gomega) {
			var dms infrav1.DockyardMachineList
			g.Expect(c.List(specCtx, &dms, client.InNamespace(namespace))).To(Succeed())
			reported := 0
			for _, dm := range dms.Items {
				if owner := machineOwner(&dm); lost[owner] && !isTrue(dm.Status.Conditions, infrav1.ContainerProvisionedCondition) {
					reported++
				}
			}
			var machines clusterv1.MachineList
			g.Expect(c.List(specCtx, &machines, client.InNamespace(namespace))).To(Succeed())
			for _, m := range machines.Items {
				if lost[m.Name] && !m.DeletionTimestamp.IsZero() {
					reported++
				}
			}
			g.Expect(reported).To(BeNumerically(">=", len(lost)), "the zone's machines are neither reported nor being replaced")
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		report("zone %s lost: its machines reported %s after its host stopped", zone, time.Since(stopped).Round(time.Second))

		By("The zone's machines are replaced in the other zones")
		Eventually(func(g Gomega) {
			var machines clusterv1.MachineList
			g.Expect(c.List(specCtx, &machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName})).To(Succeed())
			running := 0
			for _, m := range machines.Items {
				g.Expect(lost[m.Name]).To(BeFalse(), "machine %s of the lost zone is still there", m.Name)
				if m.Status.NodeRef.IsDefined() && isTrue(m.Status.Conditions, clusterv1.MachineReadyCondition) {
					running++
				}
			}
			g.Expect(running).To(Equal(6), "machines Ready")
			for m, z := range zoneOf(c, namespace, clusterName) {
				g.Expect(z).NotTo(Equal(zone), "machine %s runs in the lost zone", m)
			}
		}).WithTimeout(5 * time.Minute).WithPolling(3 * time.Second).Should(Succeed())
		report("zone %s lost: its machines replaced in the other zones %s after its host stopped", zone, time.Since(stopped).Round(time.Second))
		stopProbe()
		<-probed
		report("the workload API answered %d of %d probes (one a second) while zone %s was lost and replaced", probes.Load()-failures.Load(), probes.Load(), zone)
		// The bound, from how the front works: it sends new connections to the control plane
		// Pods that pass their readiness probe, and keeps the lost zone's Pod until the node
		// controller marks its host NotReady (its grace period, under a minute). The probe keeps
		// one connection: only when that one breaks (it was the lost Pod's, or an API server
		// answered not ready while etcd's members changed) does a probe fail, and the next
		// connection lands on the lost Pod with a chance of one in three, so a run of failures is
		// short (seven in a row: once in a thousand). Two breaks are expected (the zone's loss,
		// the control plane's replacement): ten failures leave room for three long runs; more
		// mean the front sent traffic to what it should not.
		Expect(failures.Load()).To(BeNumerically("<=", maxFailedProbes),
			"failed probes of %d while zone %s was lost and replaced", probes.Load(), zone)

		By("Zone " + zone + " comes back")
		Expect(engineCommand(specCtx, "start", worker)).To(Succeed())
		Eventually(func(g Gomega) {
			dc := &infrav1.DockyardCluster{}
			g.Expect(c.Get(specCtx, client.ObjectKey{Namespace: namespace, Name: clusterName}, dc)).To(Succeed())
			g.Expect(slices.ContainsFunc(dc.Status.FailureDomains, func(fd clusterv1.FailureDomain) bool { return fd.Name == zone })).To(BeTrue(),
				"failure domains %+v", dc.Status.FailureDomains)
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		By("A fourth worker lands in the zone that came back")
		md := &clusterv1.MachineDeployment{}
		Expect(c.Get(specCtx, client.ObjectKey{Namespace: namespace, Name: clusterName + "-md-0"}, md)).To(Succeed())
		patch := client.MergeFrom(md.DeepCopy())
		md.Spec.Replicas = ptr.To[int32](4)
		Expect(c.Patch(specCtx, md, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			inZone := 0
			for _, z := range zoneOf(c, namespace, clusterName) {
				if z == zone {
					inZone++
				}
			}
			g.Expect(inZone).To(BeNumerically(">=", 1), "no machine runs in zone %s again", zone)
		}).WithTimeout(5 * time.Minute).WithPolling(3 * time.Second).Should(Succeed())
		framework.WaitForMachineDeploymentNodesToExist(specCtx, framework.WaitForMachineDeploymentNodesToExistInput{
			Lister: c, Cluster: result.Cluster, MachineDeployment: md,
		}, e2eConfig.GetIntervals("default", "wait-worker-nodes")...)
	})
})

// createCluster applies a flavor's template ("" the default) for a cluster of controlPlanes and
// workers through proxy, with the template's variables vars, and waits for it as Cluster API's
// specs do.
func createCluster(ctx context.Context, proxy framework.ClusterProxy, flavor, namespace, name string, controlPlanes, workers int64, vars map[string]string) *clusterctl.ApplyClusterTemplateAndWaitResult {
	result := &clusterctl.ApplyClusterTemplateAndWaitResult{}
	clusterctl.ApplyClusterTemplateAndWait(ctx, clusterctl.ApplyClusterTemplateAndWaitInput{
		ClusterProxy: proxy,
		ConfigCluster: clusterctl.ConfigClusterInput{
			LogFolder: filepath.Join(artifactFolder, "clusters", proxy.GetName()), ClusterctlConfigPath: clusterctlConfigPath,
			KubeconfigPath: proxy.GetKubeconfigPath(), InfrastructureProvider: "dockyard", Flavor: flavor,
			Namespace: namespace, ClusterName: name, KubernetesVersion: e2eConfig.MustGetVariable("KUBERNETES_VERSION"),
			ControlPlaneMachineCount: ptr.To(controlPlanes), WorkerMachineCount: ptr.To(workers), ClusterctlVariables: vars,
		},
		WaitForClusterIntervals:      e2eConfig.GetIntervals("default", "wait-cluster"),
		WaitForControlPlaneIntervals: e2eConfig.GetIntervals("default", "wait-control-plane"),
		WaitForMachineDeployments:    e2eConfig.GetIntervals("default", "wait-worker-nodes"),
	}, result)
	return result
}

// engineCommand runs the engine's command line on a container of the management cluster
// (docker stop/start: the host of a zone going away and coming back).
func engineCommand(ctx context.Context, verb, container string) error {
	engine := os.Getenv("DOCKYARD_CONTAINER_RUNTIME")
	if engine == "" {
		engine = "docker"
	}
	out, err := exec.CommandContext(ctx, engine, verb, container).CombinedOutput()
	if err != nil {
		return errors.Wrapf(err, "%s %s %s: %s", engine, verb, container, out)
	}
	return nil
}

// report writes a measured figure to the spec's output and to kubernetes-figures.txt in the
// artifacts, where docs/performance.md takes it from.
func report(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	fmt.Fprintln(GinkgoWriter, "FIGURE: "+line)
	f, err := os.OpenFile(filepath.Join(artifactFolder, "kubernetes-figures.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
	Expect(err).NotTo(HaveOccurred())
}

func machineOwner(dm *infrav1.DockyardMachine) string {
	for _, o := range dm.OwnerReferences {
		if o.Kind == "Machine" {
			return o.Name
		}
	}
	return ""
}

func isTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// expectNothingLeft checks that nothing Dockyard's Kubernetes engine makes (Pods, Services,
// NetworkPolicies, volume records) is left in a namespace.
func expectNothingLeft(ctx context.Context, c client.Client, namespace string) {
	managed := client.MatchingLabels{"app.kubernetes.io/managed-by": "dockyard"}
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.List(ctx, &pods, client.InNamespace(namespace), managed)).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "Pods left")
		var svcs corev1.ServiceList
		g.Expect(c.List(ctx, &svcs, client.InNamespace(namespace), managed)).To(Succeed())
		g.Expect(svcs.Items).To(BeEmpty(), "Services left")
		var cms corev1.ConfigMapList
		g.Expect(c.List(ctx, &cms, client.InNamespace(namespace), managed)).To(Succeed())
		g.Expect(cms.Items).To(BeEmpty(), "volume records left")
	}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
}
