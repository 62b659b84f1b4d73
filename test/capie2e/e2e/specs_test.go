//go:build e2e

package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	capispecs "sigs.k8s.io/cluster-api/test/e2e"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/test/capie2e"
)

// Labels: "blocking" specs run in CI (make test-e2e-capi), the others with them in
// make test-e2e-full (docs/testing.md says which and why). What Dockyard's own suite (make
// test-e2e, also in CI) proves on the same paths is full here: the default flavor's quick start,
// a MachineHealthCheck replacing a worker of a MachineDeployment, a MachinePool scaled. KubeadmControlPlane
// remediation (six minutes of Cluster API's remediation logic) runs before a release.
var (
	blocking = Label("blocking")
	full     = Label("full")
	// privilegedOnly labels the specs that need an engine that starts privileged containers;
	// TestE2E leaves them out of the label filter where the engine refuses them.
	privilegedOnly = Label("privileged")
)

// validateResilience is what Cluster API's own quick start checks once machines run: owner
// references and finalizers come back when removed, owner references move to the current API
// version, and, with stable, nothing keeps changing once the cluster is stable. The stability
// check takes at least three minutes whatever the provider does (four equal reads 15 s apart,
// then two minutes without a change), so it runs once, in the blocking set, on the topology
// flavor, whose objects include every kind the default flavor has (DockyardCluster,
// DockyardMachine, DockyardMachineTemplate) and Cluster API's ClusterClass machinery on top.
func validateResilience(topology, stable bool) func(proxy framework.ClusterProxy, namespace, clusterName string) {
	return func(proxy framework.ClusterProxy, namespace, clusterName string) {
		filter := clusterctlcluster.FilterClusterObjectsWithNameFilter(clusterName)
		By("Checking that owner references are resilient")
		framework.ValidateOwnerReferencesResilience(ctx, proxy, namespace, clusterName, filter,
			framework.CoreOwnerReferenceAssertion,
			framework.ExpOwnerReferenceAssertions,
			capie2e.OwnerReferenceAssertions(topology),
			framework.KubeadmBootstrapOwnerReferenceAssertions,
			framework.KubeadmControlPlaneOwnerReferenceAssertions(topology),
			framework.KubernetesReferenceAssertions,
		)
		By("Checking that owner references are updated to the correct API version")
		framework.ValidateOwnerReferencesOnUpdate(ctx, proxy, namespace, clusterName, filter,
			framework.CoreOwnerReferenceAssertion,
			framework.ExpOwnerReferenceAssertions,
			capie2e.OwnerReferenceAssertions(topology),
			framework.KubeadmBootstrapOwnerReferenceAssertions,
			framework.KubeadmControlPlaneOwnerReferenceAssertions(topology),
			framework.KubernetesReferenceAssertions,
		)
		By("Checking that finalizers are resilient")
		core := framework.CoreFinalizersAssertionWithLegacyClusters
		if topology {
			core = framework.CoreFinalizersAssertionWithClassyClusters
		}
		framework.ValidateFinalizersResilience(ctx, proxy, namespace, clusterName, filter,
			core,
			framework.KubeadmControlPlaneFinalizersAssertion,
			framework.ExpFinalizersAssertion,
			capie2e.FinalizersAssertion,
		)
		if !stable {
			return
		}
		By("Checking that resourceVersions are stable")
		framework.ValidateResourceVersionStable(ctx, framework.ValidateResourceVersionStableInput{
			ClusterProxy:             proxy,
			Namespace:                namespace,
			OwnerGraphFilterFunction: filter,
			WaitToBecomeStable:       e2eConfig.GetIntervals("quick-start", "wait-resource-versions-become-stable"),
			WaitToRemainStable:       e2eConfig.GetIntervals("quick-start", "wait-resource-versions-remain-stable"),
		})
	}
}

// expectWorkerPatches checks what the ClusterClass's patches put on the workers' DockyardMachines:
// the image of the MachineDeployment's version from the imageRepository variable, and the
// bootstrapTimeout and workerResources variables (the suite's configuration sets them to values
// other than their defaults).
func expectWorkerPatches(proxy framework.ClusterProxy, namespace, clusterName string) {
	By("Checking the ClusterClass's patches on the workers")
	c := proxy.GetClient()
	machines := &clusterv1.MachineList{}
	Expect(c.List(ctx, machines, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterName},
		client.HasLabels{clusterv1.MachineDeploymentNameLabel})).To(Succeed())
	Expect(machines.Items).NotTo(BeEmpty(), "cluster %s/%s has no worker Machines", namespace, clusterName)
	timeout, err := time.ParseDuration(e2eConfig.MustGetVariable("DOCKYARD_BOOTSTRAP_TIMEOUT"))
	Expect(err).NotTo(HaveOccurred())
	cpu := resource.MustParse(e2eConfig.MustGetVariable("DOCKYARD_WORKER_CPU"))
	memory := resource.MustParse(e2eConfig.MustGetVariable("DOCKYARD_WORKER_MEMORY"))
	for _, m := range machines.Items {
		dm := &infrav1.DockyardMachine{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Spec.InfrastructureRef.Name}, dm)).To(Succeed())
		Expect(dm.Spec.Image).To(Equal(e2eConfig.MustGetVariable("DOCKYARD_NODE_IMAGE_REPOSITORY")+":"+m.Spec.Version),
			"DockyardMachine %s: workerImage", dm.Name)
		Expect(dm.Spec.BootstrapTimeout).NotTo(BeNil(), "DockyardMachine %s: bootstrapTimeout", dm.Name)
		Expect(dm.Spec.BootstrapTimeout.Duration).To(Equal(timeout), "DockyardMachine %s: bootstrapTimeout", dm.Name)
		Expect(dm.Spec.Resources.CPU).NotTo(BeNil(), "DockyardMachine %s: workerResources.cpu", dm.Name)
		Expect(dm.Spec.Resources.CPU.Cmp(cpu)).To(BeZero(), "DockyardMachine %s: workerResources.cpu is %s", dm.Name, dm.Spec.Resources.CPU)
		Expect(dm.Spec.Resources.Memory).NotTo(BeNil(), "DockyardMachine %s: workerResources.memory", dm.Name)
		Expect(dm.Spec.Resources.Memory.Cmp(memory)).To(BeZero(), "DockyardMachine %s: workerResources.memory is %s", dm.Name, dm.Spec.Resources.Memory)
	}
}

var _ = Describe("QuickStart, default flavor", full, func() {
	capispecs.QuickStartSpec(ctx, func() capispecs.QuickStartSpecInput {
		return capispecs.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			PostMachinesProvisioned: validateResilience(false, false),
		}
	})
})

var _ = Describe("MachineDeployment scale", full, func() {
	capispecs.MachineDeploymentScaleSpec(ctx, func() capispecs.MachineDeploymentScaleSpecInput {
		return capispecs.MachineDeploymentScaleSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		}
	})
})

var _ = Describe("MachineDeployment remediation", full, func() {
	capispecs.MachineDeploymentRemediationSpec(ctx, func() capispecs.MachineDeploymentRemediationSpecInput {
		return capispecs.MachineDeploymentRemediationSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		}
	})
})

var _ = Describe("KubeadmControlPlane remediation", full, func() {
	capispecs.KCPRemediationSpec(ctx, func() capispecs.KCPRemediationSpecInput {
		return capispecs.KCPRemediationSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		}
	})
})

var _ = Describe("MachinePool", full, func() {
	capispecs.MachinePoolSpec(ctx, func() capispecs.MachinePoolInput {
		return capispecs.MachinePoolInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		}
	})
})

var _ = Describe("QuickStart, topology flavor (ClusterClass)", blocking, func() {
	capispecs.QuickStartSpec(ctx, func() capispecs.QuickStartSpecInput {
		return capispecs.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
			Flavor: ptr.To("topology"),
			PostMachinesProvisioned: func(proxy framework.ClusterProxy, namespace, clusterName string) {
				expectWorkerPatches(proxy, namespace, clusterName)
				validateResilience(true, true)(proxy, namespace, clusterName)
			},
		}
	})
})

var _ = Describe("QuickStart, ignition flavor", blocking, func() {
	capispecs.QuickStartSpec(ctx, func() capispecs.QuickStartSpecInput {
		return capispecs.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("ignition"),
			// The owner references and finalizers of a cluster without a ClusterClass, in CI.
			PostMachinesProvisioned: validateResilience(false, false),
		}
	})
})

var _ = Describe("QuickStart, ipv6 flavor", full, func() {
	capispecs.QuickStartSpec(ctx, func() capispecs.QuickStartSpecInput {
		return capispecs.QuickStartSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("ipv6"),
		}
	})
})

var _ = Describe("KubeadmControlPlane and MachineDeployment rollout", full, func() {
	capispecs.KCPAndMachineDeploymentRolloutSpec(ctx, func() capispecs.KCPAndMachineDeploymentRolloutSpecInput {
		return capispecs.KCPAndMachineDeploymentRolloutSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "kcp-md-taints",
		}
	})
})

var _ = Describe("KubeadmControlPlane adoption", full, func() {
	capispecs.KCPAdoptionSpec(ctx, func() capispecs.KCPAdoptionSpecInput {
		return capispecs.KCPAdoptionSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup,
		}
	})
})

var _ = Describe("Node drain", full, func() {
	capispecs.NodeDrainTimeoutSpec(ctx, func() capispecs.NodeDrainTimeoutSpecInput {
		return capispecs.NodeDrainTimeoutSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("topology"),
			VerifyNodeVolumeDetach: true, CreateAdditionalResources: blockVolumeDetach,
		}
	})
})

var _ = Describe("ClusterClass changes", full, func() {
	capispecs.ClusterClassChangesSpec(ctx, func() capispecs.ClusterClassChangesSpecInput {
		return capispecs.ClusterClassChangesSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "topology",
			ModifyControlPlaneFields:                             map[string]any{"spec.kubeadmConfigSpec.verbosity": int64(4)},
			ModifyMachineDeploymentBootstrapConfigTemplateFields: map[string]any{"spec.template.spec.verbosity": int64(4)},
			// A field of Dockyard's machine template no ClusterClass patch sets.
			ModifyMachineDeploymentInfrastructureMachineTemplateFields: map[string]any{
				"spec.template.spec.preLoadImages": []any{"localhost/dockyard/haproxy:latest"},
			},
		}
	})
})

var _ = Describe("ClusterClass rollout", full, func() {
	capispecs.ClusterClassRolloutSpec(ctx, func() capispecs.ClusterClassRolloutSpecInput {
		return capispecs.ClusterClassRolloutSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "topology-taints",
		}
	})
})

var _ = Describe("Cluster deletion", full, func() {
	capispecs.ClusterDeletionSpec(ctx, func() capispecs.ClusterDeletionSpecInput {
		return capispecs.ClusterDeletionSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("topology"),
			ControlPlaneMachineCount: ptr.To[int64](3),
			ClusterDeletionPhases: []capispecs.ClusterDeletionPhase{
				{
					// Workers first: their Machines, MachineSets and MachineDeployments.
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						if ref.Kind == "Machine" && hasOwner(owners, "MachineDeployment", "MachineSet") {
							return true
						}
						return ref.Kind == "MachineDeployment" || ref.Kind == "MachineSet"
					},
					BlockingObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == "Machine" },
				},
				{
					// Then the control plane.
					ObjectFilter: func(ref corev1.ObjectReference, owners []metav1.OwnerReference) bool {
						if ref.Kind == "Machine" && hasOwner(owners, "KubeadmControlPlane") {
							return true
						}
						return ref.Kind == "KubeadmControlPlane"
					},
					BlockingObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == "Machine" },
				},
				{
					// Then the DockyardCluster: its load balancer and network.
					ObjectFilter:         func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == "DockyardCluster" },
					BlockingObjectFilter: func(ref corev1.ObjectReference, _ []metav1.OwnerReference) bool { return ref.Kind == "DockyardCluster" },
				},
			},
		}
	})
})

// Kubernetes' conformance specs the way Cluster API and CAPD run them: kubetest runs
// registry.k8s.io/conformance:<version> on the engine network kind against a cluster of one
// control plane and five workers, with config/kubetest.yaml's focus. make conformance-images
// builds that image and the images the tests run (no registry is reached); the conformance
// flavor puts the cluster on kind and loads those images into every node. kubetest starts its
// container privileged: where the engine refuses that, the suite's label filter leaves this
// spec out (TestE2E says so once).
var _ = Describe("Kubernetes conformance through Cluster API's kubetest", full, privilegedOnly, func() {
	BeforeEach(func() {
		requireConformanceImages()
	})
	capispecs.K8SConformanceSpec(ctx, func() capispecs.K8SConformanceSpecInput {
		return capispecs.K8SConformanceSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "conformance",
		}
	})
})

// The upgrade, then the conformance specs on the upgraded cluster, as above (the upgrades
// flavor is made ready for them as the conformance flavor is).
var _ = Describe("Kubernetes upgrade", full, func() {
	capispecs.ClusterUpgradeConformanceSpec(ctx, func() capispecs.ClusterUpgradeConformanceSpecInput {
		return capispecs.ClusterUpgradeConformanceSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: ptr.To("upgrades"),
			ControlPlaneMachineCount: ptr.To[int64](1), WorkerMachineCount: ptr.To[int64](2),
			SkipConformanceTests: !privileged,
		}
	})
	BeforeEach(func() {
		if privileged {
			requireConformanceImages()
		} else {
			By("The conformance step after the upgrade does not run: " + noKubetest)
		}
	})
})

// noKubetest says why Cluster API's kubetest cannot run on an engine that refuses privileged
// containers.
const noKubetest = "this engine refuses privileged containers, and Cluster API's kubetest runs " +
	"Kubernetes' conformance image privileged (make test-conformance runs the same specs on " +
	"Dockyard clusters without it)"

// requireConformanceImages fails a conformance spec that would run without the images its
// tests need: their pods would wait for pulls that cannot succeed.
func requireConformanceImages() {
	Expect(conformanceImages).NotTo(BeEmpty(),
		"no conformance images: make conformance-images builds them, and CONFORMANCE_DIR names their list (make test-e2e-full sets both)")
}

func hasOwner(owners []metav1.OwnerReference, kinds ...string) bool {
	for _, o := range owners {
		for _, k := range kinds {
			if o.Kind == k {
				return true
			}
		}
	}
	return false
}

// blockVolumeDetach gives every Node a VolumeAttachment no CSI driver will ever detach, so the
// node drain spec sees Cluster API wait for volumes before deleting a Machine.
func blockVolumeDetach(ctx context.Context, proxy framework.ClusterProxy, cluster *clusterv1.Cluster) {
	c := proxy.GetWorkloadCluster(ctx, cluster.Namespace, cluster.Name).GetClient()
	nodes := &corev1.NodeList{}
	Expect(c.List(ctx, nodes)).To(Succeed())
	for _, node := range nodes.Items {
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: "va-" + node.Name, Finalizers: []string{"test.cluster.x-k8s.io/block"}},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: "manual", NodeName: node.Name,
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("e2e")},
			},
		}
		Expect(c.Create(ctx, va)).To(Succeed())
		va.Status.Attached = true
		Expect(c.Status().Update(ctx, va)).To(Succeed())
	}
}

var _ = Describe("Self-hosted, upgraded while it manages itself", full, func() {
	capispecs.SelfHostedSpec(ctx, func() capispecs.SelfHostedSpecInput {
		return capispecs.SelfHostedSpecInput{
			E2EConfig: e2eConfig, ClusterctlConfigPath: clusterctlConfigPath, BootstrapClusterProxy: bootstrapClusterProxy,
			ArtifactFolder: artifactFolder, SkipCleanup: skipCleanup, Flavor: "self-hosted",
		}
	})
})
