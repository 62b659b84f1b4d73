package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	kindconstants "sigs.k8s.io/kind/pkg/cluster/constants"
)

// Labels Dockyard puts on every container, volume and network it creates. kind's labels make
// kind's tooling (kind get nodes, kind export logs) recognise Dockyard's nodes.
const (
	// clusterLabel holds "<namespace>/<cluster name>" of the owning Cluster.
	clusterLabel = "dockyard.x-k8s.io/cluster"
	// machineLabel holds "<namespace>/<DockyardMachine name>" on node containers and volumes.
	machineLabel = "dockyard.x-k8s.io/machine"
	// kindClusterLabel is kind's cluster label; it holds the cluster name.
	kindClusterLabel = "io.x-k8s.kind.cluster"
	// kindRoleLabel is kind's node role label.
	kindRoleLabel = "io.x-k8s.kind.role"
)

// Role is what a container does in a cluster, in kind's words.
type Role string

// Roles of Dockyard's containers.
const (
	RoleControlPlane Role = Role(kindconstants.ControlPlaneNodeRoleValue)
	RoleWorker       Role = Role(kindconstants.WorkerNodeRoleValue)
	roleLoadBalancer Role = Role(kindconstants.ExternalLoadBalancerNodeRoleValue)
)

// ClusterKey identifies a Cluster API cluster.
type ClusterKey struct {
	Namespace string
	Name      string
}

func (k ClusterKey) String() string { return k.Namespace + "/" + k.Name }

// ClusterLabels select everything Dockyard created for a cluster.
func (k ClusterKey) ClusterLabels() map[string]string {
	return map[string]string{clusterLabel: k.String()}
}

// MachineLabels select the container and volumes of one machine.
func (k ClusterKey) MachineLabels(machine string) map[string]string {
	return map[string]string{clusterLabel: k.String(), machineLabel: k.Namespace + "/" + machine}
}

// labels are the labels of a container of the cluster with a role. kind's cluster label holds
// the namespace-qualified name, so `kind get nodes --name <cluster>.<namespace>` lists one
// cluster's nodes even when another namespace has a cluster of the same name.
func (k ClusterKey) labels(role Role) map[string]string {
	return map[string]string{
		clusterLabel:     k.String(),
		kindClusterLabel: k.qualify(k.Name),
		kindRoleLabel:    string(role),
	}
}

// Names on the engine are derived from the namespace and the name, so any two Cluster API
// clusters coexist on one engine: a container is "<hostname>.<namespace>" (namespaces have no
// dots, so the last dot separates it), a cluster's network "dockyard-<cluster>.<namespace>".
// Clusters without a namespace (management clusters made by cmd/tools/mgmt) keep the bare names.
// Dockyard finds its containers and networks by their labels, never by these names, so
// clusters made by earlier versions (named "<node>", "<cluster>-lb", "dockyard-<ns>-<cluster>")
// keep working next to new ones.

// qualify appends the cluster's namespace to a name.
func (k ClusterKey) qualify(name string) string {
	if k.Namespace == "" {
		return name
	}
	return name + "." + k.Namespace
}

// maxHostnameLength is the longest hostname Linux allows, and the longest name of a DNS label.
const maxHostnameLength = 63

// NodeHostname is the hostname, and so the Kubernetes node name, of a machine's node: the
// machine's name, prefixed with the cluster's name unless it already starts with it; a name
// longer than 63 characters is cut and ends with a hash of the whole, so it stays unique.
func NodeHostname(cluster, machine string) string {
	name := machine
	if !strings.HasPrefix(machine, cluster) {
		name = cluster + "-" + machine
	}
	return hostname(name)
}

// hostname is name when it is short enough for a hostname, else its start with a hash of the
// whole, so it stays unique.
func hostname(name string) string {
	if len(name) <= maxHostnameLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(name[:maxHostnameLength-len(suffix)], "-.") + suffix
}

// loadBalancerHostname is the hostname of a cluster's load balancer: "<cluster>-lb" (its
// container name also carries the namespace, which can make it too long for a hostname).
func loadBalancerHostname(k ClusterKey) string {
	return hostname(k.Name + "-lb")
}

// NodeName is the container name of a machine's node: its hostname with the namespace.
func NodeName(k ClusterKey, machine string) string {
	return k.qualify(NodeHostname(k.Name, machine))
}

// LoadBalancerName is the container name of a cluster's load balancer.
func LoadBalancerName(k ClusterKey) string {
	return k.qualify(k.Name + "-lb")
}

// DefaultNetworkName is the network a cluster gets when its spec names none.
func DefaultNetworkName(k ClusterKey) string {
	return "dockyard-" + k.qualify(k.Name)
}

// volumeName is the name of the volume mounted on a node's /var.
func volumeName(node string) string {
	return node + "-var"
}
