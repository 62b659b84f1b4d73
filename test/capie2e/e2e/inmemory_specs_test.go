//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	capispecs "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/test/capie2e"
)

// Cluster API's specs that read in-memory clusters' API servers from the test process, and a
// MachinePool of in-memory nodes: the specs get the management cluster as a
// capie2e.InMemoryProxy, whose workload proxies reach the API servers the manager Pod serves
// through a port-forward to it.

// inMemoryProxy is the management cluster, its in-memory clusters reached through the manager
// Pod.
func inMemoryProxy() framework.ClusterProxy {
	return capie2e.InMemoryProxy{ClusterProxy: bootstrapClusterProxy}
}

var _ = Describe("ClusterClass changes, in-memory clusters", inMemory, func() {
	watchControllers("clusterclass-changes")
	capispecs.ClusterClassChangesSpec(ctx, func() capispecs.ClusterClassChangesSpecInput {
		return capispecs.ClusterClassChangesSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: inMemoryProxy(),
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "in-memory",
			ModifyControlPlaneFields:                             map[string]any{"spec.kubeadmConfigSpec.verbosity": int64(4)},
			ModifyMachineDeploymentBootstrapConfigTemplateFields: map[string]any{"spec.template.spec.verbosity": int64(4)},
			// A field of Dockyard's machine template no ClusterClass patch sets.
			ModifyMachineDeploymentInfrastructureMachineTemplateFields: map[string]any{
				"spec.template.spec.preLoadImages": []any{"localhost/dockyard/haproxy:latest"},
			},
		}
	})
})

var _ = Describe("ClusterClass rollout, in-memory clusters", inMemory, func() {
	watchControllers("clusterclass-rollout")
	capispecs.ClusterClassRolloutSpec(ctx, func() capispecs.ClusterClassRolloutSpecInput {
		return capispecs.ClusterClassRolloutSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: inMemoryProxy(),
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "in-memory-topology-taints",
		}
	})
})

// The spec patches the condition e2e.remediation.condition False into a worker's Node of the
// in-memory cluster's API server; the flavor's MachineHealthCheck then has the worker replaced.
var _ = Describe("MachineDeployment remediation, in-memory clusters", inMemory, func() {
	watchControllers("md-remediation")
	capispecs.MachineDeploymentRemediationSpec(ctx, func() capispecs.MachineDeploymentRemediationSpecInput {
		return capispecs.MachineDeploymentRemediationSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: inMemoryProxy(),
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("in-memory-md-remediation"),
		}
	})
})

// Cluster API's Runtime SDK upgrade spec on an in-memory cluster, its upgrade chained: made
// three minors back (KUBERNETES_VERSION_CHAINED_UPGRADE_FROM), its ClusterClass listing the
// versions between (DOCKYARD_CHAINED_UPGRADE_VERSIONS), its topology's version set to
// KUBERNETES_VERSION_UPGRADE_TO at once; Cluster API's topology controller upgrades the control
// plane one minor at a time and the workers when the version skew asks, and Cluster API's test
// extension, deployed into the management cluster for the spec, blocks each lifecycle hook
// until the spec has checked the step and lets it go. Cluster API runs chained upgrades on
// containers only; the upgrade spec of its own in-memory backend moves one minor.
var _ = Describe("Chained upgrade with Runtime SDK lifecycle hooks, in-memory clusters", inMemory, func() {
	const extensionConfig = "k8s-chained-upgrade-with-runtimesdk"
	extension := capie2e.TestExtension{Components: filepath.Join(repoRoot, "out", "capi-test-extension", "components.yaml")}

	watchControllers("runtimesdk-chained-upgrade")
	BeforeEach(func() {
		By("Deploying Cluster API's test extension into the management cluster")
		Expect(extension.Deploy(ctx, bootstrapClusterProxy, e2eConfig.GetIntervals("k8s-upgrade-with-runtimesdk", "wait-controllers")...)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			if skipCleanup {
				return
			}
			Expect(extension.Remove(ctx, bootstrapClusterProxy)).To(Succeed())
		})
	})

	capispecs.ClusterUpgradeWithRuntimeSDKSpec(ctx, func() capispecs.ClusterUpgradeWithRuntimeSDKSpecInput {
		from := e2eConfig.MustGetVariable(capispecs.KubernetesVersionChainedUpgradeFrom)
		versions := strings.Split(e2eConfig.MustGetVariable("DOCKYARD_CHAINED_UPGRADE_VERSIONS"), ",")
		Expect(versions).To(HaveLen(4), "DOCKYARD_CHAINED_UPGRADE_VERSIONS: the versions from %s to the upgrade's, one per minor", from)
		Expect(versions[0]).To(Equal(from), "DOCKYARD_CHAINED_UPGRADE_VERSIONS starts at KUBERNETES_VERSION_CHAINED_UPGRADE_FROM")
		Expect(versions[len(versions)-1]).To(Equal(e2eConfig.MustGetVariable(capispecs.KubernetesVersionUpgradeTo)),
			"DOCKYARD_CHAINED_UPGRADE_VERSIONS ends at KUBERNETES_VERSION_UPGRADE_TO")
		return capispecs.ClusterUpgradeWithRuntimeSDKSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: inMemoryProxy(),
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("in-memory"),
			KubernetesVersionFrom: from, KubernetesVersions: versions,
			ExtensionConfigName:       extensionConfig,
			ExtensionServiceNamespace: capie2e.TestExtensionNamespace, ExtensionServiceName: capie2e.TestExtensionService,
			PostUpgrade: func(proxy framework.ClusterProxy, namespace, clusterName string) {
				// No controller keeps writing once the upgrade is over, as Cluster API checks
				// after its own Runtime SDK upgrades.
				const spec = "k8s-upgrade-with-runtimesdk"
				framework.ValidateResourceVersionStable(ctx, framework.ValidateResourceVersionStableInput{
					ClusterProxy: proxy, Namespace: namespace,
					OwnerGraphFilterFunction: clusterctlcluster.FilterClusterObjectsWithNameFilter(clusterName),
					WaitToBecomeStable:       e2eConfig.GetIntervals(spec, "wait-resource-versions-become-stable"),
					WaitToRemainStable:       e2eConfig.GetIntervals(spec, "wait-resource-versions-remain-stable"),
				})
			},
		}
	})
})

// poolInstances is how many instances the in-memory MachinePool spec scales its pool to:
// DOCKYARD_E2E_POOL_INSTANCES, 100 by default.
func poolInstances() int32 {
	n := envCount("DOCKYARD_E2E_POOL_INSTANCES", 100, 1)
	Expect(n).To(BeNumerically("<=", math.MaxInt32), "DOCKYARD_E2E_POOL_INSTANCES")
	return int32(n)
}

// poolIntervals are the e2e configuration's intervals of key for specName, whose timeout is for
// a hundred instances: multiplied by instances/100, rounded up.
func poolIntervals(specName, key string, instances int32) []any {
	intervals := e2eConfig.GetIntervals(specName, key)
	Expect(intervals).To(HaveLen(2), "the intervals %s/%s", specName, key)
	timeout, err := time.ParseDuration(fmt.Sprint(intervals[0]))
	Expect(err).NotTo(HaveOccurred(), "the intervals %s/%s", specName, key)
	return []any{timeout * time.Duration(max(1, (instances+99)/100)), intervals[1]}
}

// A MachinePool on in-memory nodes, the one kind of workers Cluster API's own in-memory
// provider cannot make: a cluster of one control plane machine and a pool of none, scaled to
// DOCKYARD_E2E_POOL_INSTANCES and back to none.
var _ = Describe("MachinePool, in-memory nodes", inMemory, func() {
	const specName = "in-memory-machine-pool"
	var (
		proxy         framework.ClusterProxy
		namespace     *corev1.Namespace
		cancelWatches context.CancelFunc
		result        *clusterctl.ApplyClusterTemplateAndWaitResult
	)

	watchControllers(specName)
	BeforeEach(func() {
		proxy = inMemoryProxy()
		namespace, cancelWatches = framework.SetupSpecNamespace(ctx, specName, proxy, artifactFolder, nil)
		result = new(clusterctl.ApplyClusterTemplateAndWaitResult)
	})

	It("scales from none to DOCKYARD_E2E_POOL_INSTANCES instances, each a DockyardMachine and a Machine with its Node, and back", func() {
		instances := poolInstances()
		clusterctl.ApplyClusterTemplateAndWait(ctx, clusterctl.ApplyClusterTemplateAndWaitInput{
			ClusterProxy: proxy,
			ConfigCluster: clusterctl.ConfigClusterInput{
				LogFolder:                filepath.Join(artifactFolder, "clusters", proxy.GetName()),
				ClusterctlConfigPath:     clusterctlConfigPath,
				KubeconfigPath:           proxy.GetKubeconfigPath(),
				InfrastructureProvider:   clusterctl.DefaultInfrastructureProvider,
				Flavor:                   "in-memory-machine-pool",
				Namespace:                namespace.Name,
				ClusterName:              fmt.Sprintf("%s-%s", specName, util.RandomString(6)),
				KubernetesVersion:        e2eConfig.MustGetVariable("KUBERNETES_VERSION"),
				ControlPlaneMachineCount: ptr.To[int64](1),
				WorkerMachineCount:       ptr.To[int64](0),
			},
			WaitForClusterIntervals:      e2eConfig.GetIntervals(specName, "wait-cluster"),
			WaitForControlPlaneIntervals: e2eConfig.GetIntervals(specName, "wait-control-plane"),
			WaitForMachinePools:          e2eConfig.GetIntervals(specName, "wait-machine-pool-nodes"),
		}, result)
		Expect(result.MachinePools).To(HaveLen(1), "the flavor's MachinePool")
		// Making the instances and deleting them both take time in proportion to their number.
		intervals := poolIntervals(specName, "wait-machine-pool-nodes", instances)

		for _, replicas := range []int32{instances, 0} {
			By(fmt.Sprintf("Scaling the MachinePool to %d instances", replicas))
			started := time.Now()
			framework.ScaleMachinePoolAndWait(ctx, framework.ScaleMachinePoolAndWaitInput{
				ClusterProxy: proxy, Cluster: result.Cluster, Replicas: replicas,
				MachinePools: result.MachinePools, WaitForMachinePoolToScale: intervals,
			})
			expectPoolInstances(proxy, result.Cluster, result.MachinePools[0], replicas, intervals)
			fmt.Fprintf(GinkgoWriter, "MachinePool %s: %d instances in %s\n", result.MachinePools[0].Name, replicas, time.Since(started).Round(time.Second))
		}
	})

	AfterEach(func() {
		framework.DumpSpecResourcesAndCleanup(ctx, specName, proxy, clusterctlConfigPath, artifactFolder, namespace, cancelWatches, result.Cluster, e2eConfig.GetIntervals, skipCleanup)
	})
})

// expectPoolInstances waits until a cluster's MachinePool has instances instances, Cluster API
// counting them all ready, each a DockyardMachine of the pool and a Machine of the pool whose
// Node Cluster API found in the workload cluster (its nodeRef, among the pool's).
func expectPoolInstances(proxy framework.ClusterProxy, cluster *clusterv1.Cluster, pool *clusterv1.MachinePool, instances int32, intervals []any) {
	c := proxy.GetClient()
	ofPool := client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name, clusterv1.MachinePoolNameLabel: format.MustFormatValue(pool.Name)}
	want := int(instances)
	Eventually(func(g Gomega) {
		mp := &clusterv1.MachinePool{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(pool), mp)).To(Succeed())
		g.Expect(ptr.Deref(mp.Status.Replicas, 0)).To(Equal(instances), "MachinePool %s: status.replicas", mp.Name)
		g.Expect(ptr.Deref(mp.Status.ReadyReplicas, 0)).To(Equal(instances), "MachinePool %s: status.readyReplicas", mp.Name)
		g.Expect(len(mp.Status.NodeRefs)).To(Equal(want), "MachinePool %s: status.nodeRefs", mp.Name)

		machines, dockyardMachines := &clusterv1.MachineList{}, &infrav1.DockyardMachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(cluster.Namespace), ofPool)).To(Succeed())
		g.Expect(c.List(ctx, dockyardMachines, client.InNamespace(cluster.Namespace), ofPool)).To(Succeed())
		g.Expect(len(machines.Items)).To(Equal(want), "the pool's Machines")
		g.Expect(len(dockyardMachines.Items)).To(Equal(want), "the pool's DockyardMachines")
		infra, nodes := map[string]bool{}, map[string]bool{}
		for _, dm := range dockyardMachines.Items {
			infra[dm.Name] = true
		}
		for _, n := range mp.Status.NodeRefs {
			nodes[n.Name] = true
		}
		for _, m := range machines.Items {
			ref := m.Spec.InfrastructureRef
			g.Expect(ref.Kind == "DockyardMachine" && infra[ref.Name]).To(BeTrue(), "Machine %s: infrastructure %s %s is not a DockyardMachine of the pool", m.Name, ref.Kind, ref.Name)
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "Machine %s: no Node", m.Name)
			g.Expect(nodes[m.Status.NodeRef.Name]).To(BeTrue(), "Machine %s: its Node %s is not among the MachinePool's", m.Name, m.Status.NodeRef.Name)
		}
	}, intervals...).Should(Succeed())
}
