package docker

import (
	"fmt"
	"strings"

	kindconstants "sigs.k8s.io/kind/pkg/cluster/constants"
)

// Labels Dockyard puts on every container, volume and network it creates. kind's labels make
// kind's tooling (kind get nodes, kind export logs) recognise Dockyard's nodes.
const (
	// ClusterLabel holds "<namespace>/<cluster name>" of the owning Cluster.
	ClusterLabel = "dockyard.x-k8s.io/cluster"
	// MachineLabel holds "<namespace>/<DockyardMachine name>" on node containers and volumes.
	MachineLabel = "dockyard.x-k8s.io/machine"
	// KindClusterLabel is kind's cluster label; it holds the cluster name.
	KindClusterLabel = "io.x-k8s.kind.cluster"
	// KindRoleLabel is kind's node role label.
	KindRoleLabel = "io.x-k8s.kind.role"
)

// Role is what a container does in a cluster, in kind's words.
type Role string

// Roles of Dockyard's containers.
const (
	RoleControlPlane Role = Role(kindconstants.ControlPlaneNodeRoleValue)
	RoleWorker       Role = Role(kindconstants.WorkerNodeRoleValue)
	RoleLoadBalancer Role = Role(kindconstants.ExternalLoadBalancerNodeRoleValue)
)

// ClusterKey identifies a Cluster API cluster.
type ClusterKey struct {
	Namespace string
	Name      string
}

func (k ClusterKey) String() string { return k.Namespace + "/" + k.Name }

// ClusterLabels select everything Dockyard created for a cluster.
func (k ClusterKey) ClusterLabels() map[string]string {
	return map[string]string{ClusterLabel: k.String()}
}

// MachineLabels select the container and volumes of one machine.
func (k ClusterKey) MachineLabels(machine string) map[string]string {
	return map[string]string{ClusterLabel: k.String(), MachineLabel: k.Namespace + "/" + machine}
}

func (k ClusterKey) labels(role Role) map[string]string {
	return map[string]string{
		ClusterLabel:     k.String(),
		KindClusterLabel: k.Name,
		KindRoleLabel:    string(role),
	}
}

// NodeName is the container name, hostname and Kubernetes node name of a machine: the
// machine's name, prefixed with the cluster's name unless it already starts with it.
func NodeName(cluster, machine string) string {
	if strings.HasPrefix(machine, cluster) {
		return machine
	}
	return cluster + "-" + machine
}

// LoadBalancerName is the container name of a cluster's load balancer.
func LoadBalancerName(cluster string) string {
	return cluster + "-lb"
}

// DefaultNetworkName is the network a cluster gets when its spec names none.
func DefaultNetworkName(k ClusterKey) string {
	return fmt.Sprintf("dockyard-%s-%s", k.Namespace, k.Name)
}

// volumeName is the name of the volume mounted on a node's /var.
func volumeName(node string) string {
	return node + "-var"
}
