// Package v1alpha1 holds Dockyard's API: the infrastructure kinds (DockyardCluster,
// DockyardMachine and their templates) that Cluster API reads through the v1beta2 contract.
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
