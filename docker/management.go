package docker

import (
	"context"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Management nodes are the containers of the management cluster Dockyard runs in, when that
// cluster's nodes are containers on the same engine: a kind cluster, a management cluster
// made by `dockyard create management`, or a Dockyard workload cluster after `clusterctl
// move`. The engine isolates bridge networks from one another, so controllers in their pods
// (Cluster API's ClusterCache, kubeadm control plane, Dockyard's own) could not reach workload
// API servers on the clusters' networks. Dockyard connects the management nodes, and only
// them, to every cluster network it ensures; workload clusters stay isolated from each other.
// Load balancers of the management cluster are left out: they forward to it, not from it.

// ManagementResync is how often a cluster network is checked for management nodes that
// joined the management cluster after the network was made.
const ManagementResync = time.Minute

// ManagementSelector returns the labels selecting the node containers of the management
// cluster that node (a container name) belongs to: Dockyard's cluster label when the node
// carries it, else kind's. It returns nil when node is empty or no container of that name
// exists: the manager then runs somewhere the engine's networks are routed to (the host).
func ManagementSelector(ctx context.Context, rt container.Runtime, node string) (map[string]string, error) {
	if node == "" {
		return nil, nil
	}
	c, err := rt.InspectContainer(ctx, node)
	if container.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrapf(err, "finding the management cluster's node %s on the engine", node)
	}
	for _, key := range []string{clusterLabel, kindClusterLabel} {
		if v, ok := c.Labels[key]; ok {
			return map[string]string{key: v}, nil
		}
	}
	return nil, errors.Errorf("container %s is not a node of a Dockyard or kind cluster (it has neither %s nor %s); "+
		"start the manager with --management-node= to connect nothing", node, clusterLabel, kindClusterLabel)
}

// HasManagementNodes reports whether the Manager connects management nodes to cluster networks.
func (m *Manager) HasManagementNodes() bool { return len(m.management) > 0 }

// managementNodes lists the management cluster's node containers, load balancers excepted.
func (m *Manager) managementNodes(ctx context.Context) ([]container.Container, error) {
	if len(m.management) == 0 {
		return nil, nil
	}
	all, err := m.runtime.ListContainers(ctx, m.management)
	if err != nil {
		return nil, errors.Wrap(err, "listing the management cluster's nodes")
	}
	nodes := all[:0]
	for _, c := range all {
		if c.Labels[kindRoleLabel] != string(RoleLoadBalancer) {
			nodes = append(nodes, c)
		}
	}
	return nodes, nil
}

// connectManagementNodes connects every management node not yet on the network to it, and
// reports whether it connected any.
func (m *Manager) connectManagementNodes(ctx context.Context, network string) (bool, error) {
	nodes, err := m.managementNodes(ctx)
	if err != nil {
		return false, err
	}
	connected := false
	for _, n := range nodes {
		if _, ok := n.Networks[network]; ok {
			continue
		}
		if err := m.runtime.ConnectNetwork(ctx, network, n.Name); err != nil {
			return connected, errors.Wrapf(err, "connecting management node %s to network %s", n.Name, network)
		}
		connected = true
	}
	return connected, nil
}

// disconnectManagementNodes takes the management nodes off a network about to be removed.
func (m *Manager) disconnectManagementNodes(ctx context.Context, network string) error {
	nodes, err := m.managementNodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if _, ok := n.Networks[network]; !ok {
			continue
		}
		if err := m.runtime.DisconnectNetwork(ctx, network, n.Name); err != nil {
			return errors.Wrapf(err, "disconnecting management node %s from network %s", n.Name, network)
		}
	}
	return nil
}
