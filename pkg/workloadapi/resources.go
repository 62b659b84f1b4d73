// Package workloadapi is a workload cluster's API server, simulated in memory: the cluster's
// objects kept in a Store in the manager's process, and served over HTTP as kube-apiserver
// serves them to Cluster API's controllers (discovery, get, list, watch with its versions,
// create, update, patch, delete with finalizers, a Pod's eviction). It is the workload side of
// Dockyard's in-memory engine, and knows nothing of engines.
package workloadapi

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Resource is a kind a workload cluster serves, at one version.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Subresources are the subresources served besides the object ("status", "eviction",
	// "portforward").
	Subresources []string
}

// Resources are the kinds a simulated workload cluster serves: what Cluster API's core (Nodes,
// drain: Pods, their evictions, PodDisruptionBudgets, VolumeAttachments), KubeadmControlPlane
// (kubeadm's ConfigMaps, RBAC, kube-proxy, CoreDNS, the control plane's static Pods, etcd
// through port-forward), the ClusterCache and MachineHealthChecks read and write.
var Resources = []Resource{
	core("namespaces", "Namespace", false, "status"),
	core("nodes", "Node", false, "status"),
	core("pods", "Pod", true, "status", "eviction", "portforward"),
	core("configmaps", "ConfigMap", true),
	core("secrets", "Secret", true),
	core("services", "Service", true, "status"),
	core("serviceaccounts", "ServiceAccount", true),
	core("endpoints", "Endpoints", true),
	core("events", "Event", true),
	{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true, Subresources: []string{"status"}},
	{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, Kind: "DaemonSet", Namespaced: true, Subresources: []string{"status"}},
	rbac("roles", "Role", true),
	rbac("rolebindings", "RoleBinding", true),
	rbac("clusterroles", "ClusterRole", false),
	rbac("clusterrolebindings", "ClusterRoleBinding", false),
	{GroupVersionResource: schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, Kind: "PodDisruptionBudget", Namespaced: true, Subresources: []string{"status"}},
	{GroupVersionResource: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}, Kind: "VolumeAttachment", Subresources: []string{"status"}},
	{GroupVersionResource: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, Kind: "Lease", Namespaced: true},
}

func core(resource, kind string, namespaced bool, sub ...string) Resource {
	return Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: resource}, Kind: kind, Namespaced: namespaced, Subresources: sub}
}

func rbac(resource, kind string, namespaced bool) Resource {
	return Resource{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: resource}, Kind: kind, Namespaced: namespaced}
}
