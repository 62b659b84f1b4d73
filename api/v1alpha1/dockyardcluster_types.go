package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// ClusterFinalizer lets the DockyardCluster reconciler remove the load balancer and the
	// network it created before the object goes away.
	ClusterFinalizer = "dockyardcluster.infrastructure.cluster.x-k8s.io"

	// DefaultAPIServerPort is the port the API server of the workload cluster, and the load
	// balancer in front of it, listen on.
	DefaultAPIServerPort int32 = 6443

	// AbandonAnnotation, on a DockyardCluster or a DockyardMachine being deleted, lets the
	// deletion end without removing what Dockyard made on an infrastructure it cannot reach: the
	// way out when that infrastructure is gone for good. On a DockyardCluster it abandons its
	// machines' nodes too. Whatever is left there must then be removed by hand.
	AbandonAnnotation = "dockyard.x-k8s.io/abandon"

	// EngineHost is status.engine of objects whose nodes run on the manager's own engine.
	EngineHost = "host"
	// EngineInMemory is status.engine of objects whose nodes run in the manager's memory.
	EngineInMemory = "in-memory"
)

// DockyardClusterSpec is the desired state of a DockyardCluster.
type DockyardClusterSpec struct {
	// controlPlaneEndpoint is where the workload cluster's API server is reached. Dockyard fills
	// the host with the load balancer's address; the load balancer serves the port, which
	// defaults to 6443. An in-memory cluster's API server listens on a port of the manager:
	// 6443 or the port named here when free, another otherwise, which Dockyard fills in.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// failureDomains are copied to status.failureDomains for Cluster API to spread machines
	// over. On a single container engine they are labels only: every node runs on the same host.
	// On a Kubernetes infrastructure the failure domains are its zones; an entry naming a zone
	// there says whether control planes may run in it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// loadBalancer configures the haproxy container in front of the control plane.
	// +optional
	LoadBalancer LoadBalancerSpec `json:"loadBalancer,omitempty,omitzero"`

	// network is the container network the cluster's nodes and load balancer are attached to.
	// +optional
	Network NetworkSpec `json:"network,omitempty,omitzero"`

	// loadImages are images on the container engine copied into the containerd of every node
	// of the cluster: the running ones and those that join later (scale-up, remediation,
	// rollouts, MachinePool instances), so pods using them never pull. Each node gets the image
	// the engine holds under that name: after a rebuild, every node gets the new one.
	// `dockyard load image` adds to the list.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	LoadImages []string `json:"loadImages,omitempty"`

	// registry names a local registry on the engine (`dockyard registry create`) that the
	// cluster's nodes pull from: Dockyard attaches it to the cluster's network and points every
	// node's containerd at it for the address images name it by on the host, so an image
	// pushed as localhost:5001/app:dev runs as localhost:5001/app:dev. Empty: none.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	Registry string `json:"registry,omitempty"`

	// infrastructure is where the cluster's nodes run: empty, on the container engine of the
	// manager's host; with kubernetes, as Pods of a Kubernetes cluster spread over its zones;
	// with inMemory, in the manager's memory. It cannot change once set.
	// +optional
	Infrastructure InfrastructureSpec `json:"infrastructure,omitempty,omitzero"`
}

// InfrastructureKubeconfigKey is the key of a kubeconfig Secret (spec.infrastructure.kubernetes
// .kubeconfigSecret) holding the infrastructure cluster's kubeconfig, as in Cluster API's
// kubeconfig Secrets.
const InfrastructureKubeconfigKey = "value"

// InfrastructureSpec says where a cluster's nodes run: one of its fields.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
type InfrastructureSpec struct {
	// kubernetes runs the cluster's nodes as Pods of a Kubernetes cluster (the infrastructure
	// cluster): its control plane endpoint is a Service in front of the control plane Pods, and
	// its zones (topology.kubernetes.io/zone) are the cluster's failure domains.
	// +optional
	Kubernetes *KubernetesInfrastructure `json:"kubernetes,omitempty"`

	// inMemory runs the cluster's nodes in the manager's memory, for tests of Cluster API's
	// controllers at scale: nodes run no image, and their bootstrap data is parsed and checked
	// as on any engine, its kubeadm init, join and reset simulated. The cluster's API server
	// and etcd are served by the manager (on its --in-memory-address), with certificates of the
	// cluster's CA, to Cluster API's controllers. Nothing runs on a host.
	// +optional
	InMemory *InMemoryInfrastructure `json:"inMemory,omitempty"`
}

// InMemoryInfrastructure runs a cluster's nodes in the manager's memory.
type InMemoryInfrastructure struct{}

// KubernetesInfrastructure names the infrastructure cluster of a DockyardCluster.
type KubernetesInfrastructure struct {
	// kubeconfigSecret names a Secret in the DockyardCluster's namespace whose key "value"
	// holds a kubeconfig of the infrastructure cluster. Empty: the management cluster itself,
	// in the DockyardCluster's namespace, when the manager allows that namespace
	// (--allowed-management-infrastructure-namespaces).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	KubeconfigSecret string `json:"kubeconfigSecret,omitempty"`

	// namespace of the infrastructure cluster the Pods go in; empty: the kubeconfig's
	// namespace, else the DockyardCluster's. On the management cluster it can only be the
	// DockyardCluster's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// LoadBalancerSpec configures the load balancer container of a cluster.
type LoadBalancerSpec struct {
	// image is the haproxy image of the load balancer container. Defaulted by the webhook to the
	// manager's --load-balancer-image. The image must read /usr/local/etc/haproxy/haproxy.cfg
	// and reload it on SIGHUP (kindest/haproxy and Dockyard's own image both do).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// configTemplateRef names a ConfigMap in the cluster's namespace whose "value" key holds a
	// Go template for haproxy.cfg, used instead of Dockyard's default. See docs/api.md for the
	// data the template receives.
	// +optional
	ConfigTemplateRef *ConfigMapReference `json:"configTemplateRef,omitempty"`

	// hostPort is the port on the engine's host (on 127.0.0.1) where the load balancer publishes
	// the control plane endpoint's port: the kubeconfig `dockyard create cluster` writes names
	// it. Set it to choose the port; left empty, Dockyard writes here the port the engine picks
	// when it first creates the load balancer. From then on the load balancer is created with
	// this port, so it keeps it when it is killed, removed, or restarted with the engine or the
	// host. Immutable once set. When another process or container holds the port as the load
	// balancer is created, it is published on a port the engine picks and the
	// LoadBalancerHostPortKept condition says which; each later re-creation tries this port
	// again.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HostPort int32 `json:"hostPort,omitempty"`
}

// ConfigMapReference names a ConfigMap in the same namespace.
type ConfigMapReference struct {
	// name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// NetworkSpec selects the container network of a cluster: either a network that exists already
// (existing), or the one Dockyard creates for the cluster and removes with it (name, subnets).
// The network cannot be changed once the cluster exists.
// +kubebuilder:validation:XValidation:rule="!has(self.existing) || !has(self.existing.name) || size(self.existing.name) == 0 || (!has(self.name) && !has(self.subnets))",message="existing names a network that exists already; name and subnets describe the network Dockyard creates: set one or the other"
type NetworkSpec struct {
	// name of the network Dockyard creates for the cluster and removes with it. When empty,
	// "dockyard-<cluster>.<namespace>". A network of that name that exists already and that
	// Dockyard did not create for this cluster is used as it is and never removed (kept for
	// clusters made by earlier versions; use existing.name for such a network).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`
	Name string `json:"name,omitempty"`

	// subnets of the network Dockyard creates, in CIDR notation, at most one per IP family; the
	// engine picks one when empty. The lower half of an IPv4 subnet holds the fixed addresses of
	// the load balancer and the nodes, the upper half the addresses the engine gives out, so
	// the subnet must be a /28 or larger. An IPv6 subnet (a /112 or larger) is used when the
	// Cluster's pods or services are IPv6; Dockyard derives a unique local /64 from the
	// cluster's name otherwise.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=43
	Subnets []string `json:"subnets,omitempty"`

	// existing names a network that exists on the engine before the cluster, for example one
	// several clusters share. Dockyard attaches the cluster's load balancer and nodes to it and
	// never creates, changes or removes it. Its containers get the addresses the engine gives
	// them, which may change when the engine restarts.
	// +optional
	Existing ExistingNetworkSpec `json:"existing,omitempty,omitzero"`
}

// ExistingNetworkSpec names a network Dockyard uses but does not own.
type ExistingNetworkSpec struct {
	// name of the engine network. It must exist when the cluster is created (the
	// LoadBalancerAvailable condition says NetworkNotFound until it does) and must not be a
	// network Dockyard created for another cluster. An empty name is the same as no existing
	// network, so a clusterctl variable can leave it unset.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9][a-zA-Z0-9_.-]*)?$`
	Name string `json:"name,omitempty"`
}

// NetworkName is the name of the network the spec names, existing or to create; "" for
// Dockyard's default network.
func (s NetworkSpec) NetworkName() string {
	if s.Existing.Name != "" {
		return s.Existing.Name
	}
	return s.Name
}

// DockyardClusterStatus is the observed state of a DockyardCluster.
type DockyardClusterStatus struct {
	// conditions of the DockyardCluster: Ready, LoadBalancerAvailable, LoadBalancerHostPortKept,
	// Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports when the cluster infrastructure was provisioned.
	// +optional
	Initialization DockyardClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// failureDomains available to the cluster's machines.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// engine is where Dockyard made the cluster's network and load balancer, recorded before it
	// made them: host (the manager's engine), or the infrastructure cluster of
	// spec.infrastructure. Empty: nothing was made, so deleting the cluster removes nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Engine string `json:"engine,omitempty"`
}

// DockyardClusterInitializationStatus is part of the Cluster API v1beta2 contract.
// +kubebuilder:validation:MinProperties=1
type DockyardClusterInitializationStatus struct {
	// provisioned is true once the load balancer serves the control plane endpoint.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardclusters,scope=Namespaced,categories=cluster-api;dockyard,shortName=dyc
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this DockyardCluster belongs to"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.controlPlaneEndpoint.host",description="Control plane endpoint host"
// +kubebuilder:printcolumn:name="Port",type="integer",JSONPath=".spec.controlPlaneEndpoint.port",description="Control plane endpoint port",priority=1
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Load balancer serves the endpoint"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Ready condition"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Ready condition reason",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardCluster is the infrastructure of a Cluster API cluster whose nodes are containers:
// a container network and a haproxy load balancer in front of the control plane.
type DockyardCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec DockyardClusterSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state.
	// +optional
	Status DockyardClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the DockyardCluster.
func (c *DockyardCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions of the DockyardCluster.
func (c *DockyardCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// DockyardClusterList is a list of DockyardClusters.
type DockyardClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardCluster `json:"items"`
}
