package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// MachinePoolFinalizer lets the DockyardMachinePool reconciler remove the pool's
	// DockyardMachines (through their Machines) before the object goes away.
	MachinePoolFinalizer = "dockyardmachinepool.infrastructure.cluster.x-k8s.io"

	// MachinePoolTemplateHashLabel is on each DockyardMachine of a pool: a hash of the pool's
	// spec.template and the MachinePool's Kubernetes version it was made from. A DockyardMachine
	// whose hash differs from the pool's current one is outdated and replaced.
	MachinePoolTemplateHashLabel = "dockyard.x-k8s.io/pool-template-hash"

	// InfrastructureMachineKindDockyardMachine is the kind of a pool's instances, published in
	// status.infrastructureMachineKind: Cluster API then makes a Machine for each of them.
	InfrastructureMachineKindDockyardMachine = "DockyardMachine"
)

// DockyardMachinePoolSpec is the desired state of a DockyardMachinePool. The number of
// instances is the owner MachinePool's spec.replicas, their Kubernetes version its
// spec.template.spec.version and their bootstrap data its bootstrap data secret.
type DockyardMachinePoolSpec struct {
	// template is the spec of every DockyardMachine of the pool (image, preLoadImages,
	// extraMounts, bootstrapTimeout, resources). providerID must stay empty: each
	// DockyardMachine gets its own. A change replaces the instances one at a time.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="template.providerID must not be set: each DockyardMachine of the pool gets its own"
	Template DockyardMachineSpec `json:"template,omitempty,omitzero"`

	// providerIDList are the providerIDs of the pool's provisioned instances, sorted. Set by
	// Dockyard; Cluster API copies it to the MachinePool.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`
}

// DockyardMachinePoolStatus is the observed state of a DockyardMachinePool.
type DockyardMachinePoolStatus struct {
	// conditions of the DockyardMachinePool: Ready, Scaled, UpToDate, MachinesReady, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports when the pool first had all its instances provisioned.
	// +optional
	Initialization DockyardMachinePoolInitializationStatus `json:"initialization,omitempty,omitzero"`

	// ready is initialization.provisioned for Cluster API v1.14's MachinePool controller,
	// which still reads status.ready (the deprecated v1beta1 contract) for machine pools.
	// +optional
	Ready *bool `json:"ready,omitempty"`

	// replicas is the number of DockyardMachines of the pool, including those being deleted.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of the pool's DockyardMachines that are Ready.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// infrastructureMachineKind is DockyardMachine: each instance is a DockyardMachine, for
	// which Cluster API makes a Machine (MachinePool Machines).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`
}

// DockyardMachinePoolInitializationStatus is part of the Cluster API v1beta2 contract.
// +kubebuilder:validation:MinProperties=1
type DockyardMachinePoolInitializationStatus struct {
	// provisioned is true once the pool had as many provisioned instances as the MachinePool
	// asked for (at once when it asks for none); it stays true.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardmachinepools,scope=Namespaced,categories=cluster-api;dockyard,shortName=dymp
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this DockyardMachinePool belongs to"
// +kubebuilder:printcolumn:name="MachinePool",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"MachinePool\")].name",description="MachinePool that owns this DockyardMachinePool"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="DockyardMachines of the pool"
// +kubebuilder:printcolumn:name="Ready Replicas",type="integer",JSONPath=".status.readyReplicas",description="Ready DockyardMachines of the pool"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Ready condition"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Ready condition reason",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardMachinePool is the infrastructure of a Cluster API MachinePool: one DockyardMachine
// (a node container) per replica.
type DockyardMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec DockyardMachinePoolSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state.
	// +optional
	Status DockyardMachinePoolStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the DockyardMachinePool.
func (p *DockyardMachinePool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the conditions of the DockyardMachinePool.
func (p *DockyardMachinePool) SetConditions(conditions []metav1.Condition) {
	p.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// DockyardMachinePoolList is a list of DockyardMachinePools.
type DockyardMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardMachinePool `json:"items"`
}

// DockyardMachinePoolTemplateSpec is the desired state of a DockyardMachinePoolTemplate.
type DockyardMachinePoolTemplateSpec struct {
	// template is the DockyardMachinePool that ClusterClass-based MachinePools are created from.
	// +required
	Template DockyardMachinePoolTemplateResource `json:"template"`
}

// DockyardMachinePoolTemplateResource is the metadata and spec of a DockyardMachinePool made
// from a template.
type DockyardMachinePoolTemplateResource struct {
	// metadata added to DockyardMachinePools created from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of DockyardMachinePools created from this template.
	// +required
	Spec DockyardMachinePoolSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardmachinepooltemplates,scope=Namespaced,categories=cluster-api;dockyard,shortName=dympt
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type="string",JSONPath=".spec.template.spec.template.image",description="Node image override"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardMachinePoolTemplate is a blueprint of DockyardMachinePools, used by ClusterClass.
type DockyardMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec DockyardMachinePoolTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// DockyardMachinePoolTemplateList is a list of DockyardMachinePoolTemplates.
type DockyardMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardMachinePoolTemplate `json:"items"`
}
