package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
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

// DockyardMachineTemplateStatus is what a node made from the template would look like, for the
// cluster autoscaler's scale from zero (Cluster API's InfraMachineTemplate contract).
type DockyardMachineTemplateStatus struct {
	// capacity of a node made from the template: cpu and memory (the template's
	// spec.resources, or else the container engine's host), and pods (the kubelet's default
	// maxPods, 110).
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// nodeInfo is the operating system and architecture of a node made from the template.
	// +optional
	NodeInfo NodeInfo `json:"nodeInfo,omitempty,omitzero"`
}

// Architecture is a node's CPU architecture, as in the kubernetes.io/arch label.
// +kubebuilder:validation:Enum=amd64;arm64;s390x;ppc64le
type Architecture string

// The architectures Cluster API's contract names.
const (
	ArchitectureAmd64   Architecture = "amd64"
	ArchitectureArm64   Architecture = "arm64"
	ArchitectureS390x   Architecture = "s390x"
	ArchitecturePpc64le Architecture = "ppc64le"
)

// NodeInfo is the operating system and architecture of a node.
// +kubebuilder:validation:MinProperties=1
type NodeInfo struct {
	// architecture of the node: the container engine host's, which runs the node image.
	// Omitted when the host's architecture is not one Cluster API names.
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`

	// operatingSystem of the node: linux.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	OperatingSystem string `json:"operatingSystem,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardmachinetemplates,scope=Namespaced,categories=cluster-api;dockyard,shortName=dymt
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type="string",JSONPath=".spec.template.spec.image",description="Node image override"
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.capacity.cpu",description="CPUs of a node made from the template"
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.capacity.memory",description="Memory of a node made from the template"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardMachineTemplate is an immutable blueprint of DockyardMachines.
type DockyardMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec DockyardMachineTemplateSpec `json:"spec"`

	// status is what a node made from the template would look like, for the cluster
	// autoscaler.
	// +optional
	Status DockyardMachineTemplateStatus `json:"status,omitempty,omitzero"`
}

// +kubebuilder:object:root=true

// DockyardMachineTemplateList is a list of DockyardMachineTemplates.
type DockyardMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardMachineTemplate `json:"items"`
}
