package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of Dockyard's kinds.
	GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

	// schemeBuilder registers Dockyard's kinds with a scheme.
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds Dockyard's kinds to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&DockyardCluster{}, &DockyardClusterList{},
		&DockyardClusterTemplate{}, &DockyardClusterTemplateList{},
		&DockyardMachine{}, &DockyardMachineList{},
		&DockyardMachineTemplate{}, &DockyardMachineTemplateList{},
		&DockyardMachinePool{}, &DockyardMachinePoolList{},
		&DockyardMachinePoolTemplate{}, &DockyardMachinePoolTemplateList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
