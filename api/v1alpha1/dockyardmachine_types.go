package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// MachineFinalizer lets the DockyardMachine reconciler remove the node container, its
	// volumes and its load balancer entry before the object goes away.
	MachineFinalizer = "dockyardmachine.infrastructure.cluster.x-k8s.io"

	// ProviderIDPrefix starts every providerID Dockyard sets; the container name follows.
	ProviderIDPrefix = "dockyard:////"

	// StopAnnotation, on a DockyardMachine, lists the services of its node that Dockyard keeps
	// stopped, comma-separated, among StoppableServices: a fault injected for testing what
	// MachineHealthChecks and KubeadmControlPlane do about it, on every engine. kubelet stopped,
	// the Node stops posting its status (Ready turns Unknown); a control plane component
	// stopped, its static Pod's manifest is set aside so kubelet stops it. A service taken off
	// the list starts again. Dockyard acts once the machine is provisioned and its Node known.
	StopAnnotation = "dockyard.x-k8s.io/stop"

	// BootDelayAnnotation, on a DockyardMachine, holds its bootstrap until its node has run
	// this long (a duration such as "45s"): a slow boot, for testing timeouts such as a
	// MachineHealthCheck's nodeStartupTimeout.
	BootDelayAnnotation = "dockyard.x-k8s.io/boot-delay"

	// NetworkDelayAnnotation, on a DockyardMachine, delays every packet its node sends by this
	// long (a duration of at most 10s, such as "200ms"; tc's netem in the node, which needs the
	// host kernel's sch_netem): added latency, once the machine is provisioned. Removed, the
	// delay goes.
	NetworkDelayAnnotation = "dockyard.x-k8s.io/network-delay"
)

// StoppableServices are the services StopAnnotation may name.
var StoppableServices = []string{"kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// DockyardMachineSpec is the desired state of a DockyardMachine.
type DockyardMachineSpec struct {
	// providerID is "dockyard:////<container name>", set by Dockyard once the node container
	// exists, and set on the workload cluster's Node too.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`

	// image is the node image. When empty, Dockyard uses the manager's node image repository
	// (kindest/node unless --node-image-repository says otherwise) tagged with the Machine's
	// Kubernetes version. Immutable.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// preLoadImages are images on the container engine that are copied into the node's
	// containerd before the bootstrap data runs, so the node never pulls them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	PreLoadImages []string `json:"preLoadImages,omitempty"`

	// extraMounts are host paths bind-mounted into the node container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	ExtraMounts []Mount `json:"extraMounts,omitempty"`

	// bootstrapTimeout bounds how long the bootstrap data may run in the node before the
	// machine is reported as failed. Defaults to 5m.
	// +optional
	BootstrapTimeout *metav1.Duration `json:"bootstrapTimeout,omitempty"`

	// resources limit the cpu and memory of the node container.
	// +optional
	Resources NodeResources `json:"resources,omitempty,omitzero"`

	// ports publish ports of the node container on the engine's host, for NodePort Services
	// and ingress controllers (the "ingress-ready" worker of the flavors). A fixed host port
	// can be taken by one node only: give a machine with fixed host ports one replica.
	// Immutable.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Ports []PortMapping `json:"ports,omitempty"`

	// dnsSearch is the search list of the node's /etc/resolv.conf, in place of the engine
	// host's; an empty list searches no domain, and leaving it unset keeps the host's (kind's
	// networking.dnsSearch). Pods with dnsPolicy Default use the node's resolver and see it;
	// CoreDNS forwards to it. Immutable.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	DNSSearch *[]string `json:"dnsSearch,omitempty"`

	// containerdConfigPatches are TOML patches merged, in order, into the node's containerd
	// configuration (/etc/containerd/config.toml) before the bootstrap data runs, containerd
	// then restarted (kind's containerdConfigPatches): tables merge key by key, other values
	// replace the image's, and a patch whose top-level version differs from the
	// configuration's is skipped. They change the node's containerd only; what it can reach is
	// what the cluster's network reaches. Immutable.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	ContainerdConfigPatches []string `json:"containerdConfigPatches,omitempty"`

	// containerdConfigPatchesJSON6902 are JSON 6902 patches (JSON or YAML lists of operations)
	// applied, in order, after containerdConfigPatches to the node's containerd configuration as
	// a JSON document (kind's containerdConfigPatchesJSON6902). Immutable.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=10240
	ContainerdConfigPatchesJSON6902 []string `json:"containerdConfigPatchesJSON6902,omitempty"`
}

// PortMapping publishes a port of a node container on the engine's host.
type PortMapping struct {
	// containerPort is the port in the node, e.g. a NodePort or an ingress controller's
	// hostPort.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort int32 `json:"containerPort"`

	// hostPort is the port on the engine's host. Unset: the engine picks a free one, which
	// status.ports reports.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	HostPort int32 `json:"hostPort,omitempty"`

	// protocol is TCP (the default) or UDP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol string `json:"protocol,omitempty"`

	// listenAddress is the host address the port is published on; defaults to 127.0.0.1 (the
	// host alone). 0.0.0.0 publishes it on every IPv4 address of the host.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=45
	ListenAddress string `json:"listenAddress,omitempty"`
}

// Mount is a host path bind-mounted into the node container.
type Mount struct {
	// hostPath is the absolute path on the container engine's host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	HostPath string `json:"hostPath"`

	// containerPath is the absolute path inside the node container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	ContainerPath string `json:"containerPath"`

	// readOnly mounts the path read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// NodeResources are the limits of a node container.
type NodeResources struct {
	// cpu is the number of CPUs the node container may use, e.g. "1.5" or "500m".
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`

	// memory is the memory limit of the node container, e.g. "2Gi".
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// DockyardMachineStatus is the observed state of a DockyardMachine.
type DockyardMachineStatus struct {
	// conditions of the DockyardMachine: Ready, ContainerProvisioned, BootstrapSucceeded, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports when the machine's infrastructure was provisioned.
	// +optional
	Initialization DockyardMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// addresses of the node container: Hostname, InternalIP and ExternalIP.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`

	// failureDomain the machine runs in: the Machine's spec.failureDomain.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// ports are spec.ports as the engine published them, with the host ports it picked.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Ports []PortMapping `json:"ports,omitempty"`

	// loadedImages are the images of spec.preLoadImages and of the cluster's spec.loadImages
	// copied into the node. Dockyard looks into the node only for images not listed here, so an
	// idle node costs no command; `dockyard load image` copies a rebuilt image again.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=200
	// +kubebuilder:validation:items:MaxLength=512
	LoadedImages []string `json:"loadedImages,omitempty"`

	// registry is the local registry the node's containerd was pointed at, as
	// "<host> <address on the cluster network>"; it is written again only when that changes.
	// +optional
	// +kubebuilder:validation:MaxLength=600
	Registry string `json:"registry,omitempty"`

	// stopped are the services of the node Dockyard stopped for StopAnnotation and has not
	// started again.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Enum=kubelet;kube-apiserver;kube-controller-manager;kube-scheduler;etcd
	Stopped []string `json:"stopped,omitempty"`

	// networkDelay is the delay Dockyard set on the node's packets for NetworkDelayAnnotation.
	// +optional
	NetworkDelay *metav1.Duration `json:"networkDelay,omitempty"`

	// engine is where Dockyard made the machine's node, recorded before it made it: host (the
	// manager's engine), or the infrastructure cluster of its DockyardCluster. Empty: no node
	// was made, so deleting the machine removes nothing.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Engine string `json:"engine,omitempty"`
}

// DockyardMachineInitializationStatus is part of the Cluster API v1beta2 contract.
// +kubebuilder:validation:MinProperties=1
type DockyardMachineInitializationStatus struct {
	// provisioned is true once the node container runs and its bootstrap data succeeded.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=dockyardmachines,scope=Namespaced,categories=cluster-api;dockyard,shortName=dym
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster this DockyardMachine belongs to"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",description="Machine that owns this DockyardMachine"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",description="Provider ID of the node container"
// +kubebuilder:printcolumn:name="Provisioned",type="boolean",JSONPath=".status.initialization.provisioned",description="Node container runs and bootstrap succeeded"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Ready condition"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,description="Ready condition reason",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// DockyardMachine is the infrastructure of a Cluster API Machine: a node container.
type DockyardMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +optional
	Spec DockyardMachineSpec `json:"spec,omitempty,omitzero"`

	// status is the observed state.
	// +optional
	Status DockyardMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions of the DockyardMachine.
func (m *DockyardMachine) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions sets the conditions of the DockyardMachine.
func (m *DockyardMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// DockyardMachineList is a list of DockyardMachines.
type DockyardMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DockyardMachine `json:"items"`
}
