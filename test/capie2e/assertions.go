package capie2e

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// Owners Dockyard's objects have, in the notation of the framework's checks (API version,
// kind, controller; names do not count).
var (
	coreVersion           = clusterv1.GroupVersion.String()
	clusterOwner          = metav1.OwnerReference{APIVersion: coreVersion, Kind: "Cluster"}
	clusterController     = metav1.OwnerReference{APIVersion: coreVersion, Kind: "Cluster", Controller: ptr.To(true)}
	clusterClassOwner     = metav1.OwnerReference{APIVersion: coreVersion, Kind: "ClusterClass"}
	machineController     = metav1.OwnerReference{APIVersion: coreVersion, Kind: "Machine", Controller: ptr.To(true)}
	machinePoolController = metav1.OwnerReference{APIVersion: coreVersion, Kind: "MachinePool", Controller: ptr.To(true)}
	poolOwner             = metav1.OwnerReference{APIVersion: infrav1.GroupVersion.String(), Kind: "DockyardMachinePool"}
)

// OwnerReferenceAssertions maps Dockyard's kinds to the owner references the framework's
// ValidateOwnerReferencesResilience and ValidateOwnerReferencesOnUpdate expect, as
// framework.DevInfraOwnerReferenceAssertions does for CAPD. topologyManaged: the Cluster has a
// topology (its DockyardCluster is then controlled by the Cluster).
func OwnerReferenceAssertions(topologyManaged bool) map[string]func(types.NamespacedName, []metav1.OwnerReference) error {
	dockyardClusterOwner := clusterOwner
	if topologyManaged {
		dockyardClusterOwner = clusterController
	}
	return map[string]func(types.NamespacedName, []metav1.OwnerReference) error{
		"DockyardMachine": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			// A Machine's, and for an instance of a pool also the pool's (not as controller).
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{machineController}, []metav1.OwnerReference{machineController, poolOwner})
		},
		"DockyardMachineTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			// A Cluster's (made for it by the topology controller, or by the user) or a ClusterClass's.
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{clusterOwner}, []metav1.OwnerReference{clusterClassOwner})
		},
		"DockyardCluster": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, dockyardClusterOwner)
		},
		"DockyardClusterTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, clusterClassOwner)
		},
		"DockyardMachinePool": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasExactOwners(owners, machinePoolController, clusterOwner)
		},
		"DockyardMachinePoolTemplate": func(_ types.NamespacedName, owners []metav1.OwnerReference) error {
			return framework.HasOneOfExactOwners(owners, []metav1.OwnerReference{clusterOwner}, []metav1.OwnerReference{clusterClassOwner})
		},
	}
}

// FinalizersAssertion maps Dockyard's kinds to their finalizers, for the framework's
// ValidateFinalizersResilience; kinds not listed (templates) have none.
var FinalizersAssertion = map[string]func(types.NamespacedName) []string{
	"DockyardCluster":     func(types.NamespacedName) []string { return []string{infrav1.ClusterFinalizer} },
	"DockyardMachine":     func(types.NamespacedName) []string { return []string{infrav1.MachineFinalizer} },
	"DockyardMachinePool": func(types.NamespacedName) []string { return []string{infrav1.MachinePoolFinalizer} },
}
