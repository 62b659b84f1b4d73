package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// DockyardClusterTemplateSpec is the desired state of a DockyardClusterTemplate.
type DockyardClusterTemplateSpec struct {
	// template is the DockyardCluster that ClusterClass-based clusters are created from.
	// +required
	Template DockyardClusterTemplateResource `json:"template"`
}

// DockyardClusterTemplateResource is the metadata and spec of a DockyardCluster made from a template.
type DockyardClusterTemplateResource struct {
	// metadata added to DockyardClusters created from this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of DockyardClusters created from this template.
	// +required
	Spec DockyardClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardclustertemplates,scope=Namespaced,categories=cluster-api;dockyard,shortName=dyct
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardClusterTemplate is an immutable blueprint of DockyardClusters, used by ClusterClass.
type DockyardClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec DockyardClusterTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// DockyardClusterTemplateList is a list of DockyardClusterTemplates.
type DockyardClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardClusterTemplate `json:"items"`
}
