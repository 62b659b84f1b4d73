package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// DockyardMachineTemplateSpec is the desired state of a DockyardMachineTemplate.
type DockyardMachineTemplateSpec struct {
	// template is the DockyardMachine that KubeadmControlPlane, MachineDeployments and
	// ClusterClass create machines from.
	// +required
	Template DockyardMachineTemplateResource `json:"template"`
}

// DockyardMachineTemplateResource is the metadata and spec of a DockyardMachine made from a template.
type DockyardMachineTemplateResource struct {
	// metadata added to DockyardMachines created from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of DockyardMachines created from this template.
	// +required
	Spec DockyardMachineSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardmachinetemplates,scope=Namespaced,categories=cluster-api;dockyard,shortName=dymt
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type="string",JSONPath=".spec.template.spec.image",description="Node image override"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardMachineTemplate is an immutable blueprint of DockyardMachines.
type DockyardMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec DockyardMachineTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// DockyardMachineTemplateList is a list of DockyardMachineTemplates.
type DockyardMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardMachineTemplate `json:"items"`
}
