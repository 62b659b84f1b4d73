package docker

import (
	"context"
	_ "embed" // scripts/own-routes.sh
	"strings"
	"time"

	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

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
//
// A management node keeps its own network's routes. Docker gives a container's default route
// to one of its networks by name, so joining cluster networks moved a management node's
// default route onto one of them: traffic without a route of its own, the cluster IPs of its
// Services among it, left from the node's address on that cluster's network. The API server's
// connections to webhooks kept that address, and when the cluster was deleted they hung until
// their 10 s timeout, one webhook call after another (a KubeadmControlPlane's first Machine
// 20 to 80 s late, objects refused). After joining or leaving a network, and the first time a
// manager sees a node, it runs scripts/own-routes.sh there: policy rules that send what the
// main table has only a default route for through the node's own network (eth0), leaving the
// main table to the engine (which refuses to join a network whose subnet overlaps a route
// there, and rewrites its default route at each join and leave).

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
// reports whether it connected any. A node it connects, or sees for the first time, gets its
// own routes back (keepOwnRoutes).
func (m *Manager) connectManagementNodes(ctx context.Context, network string) (bool, error) {
	nodes, err := m.managementNodes(ctx)
	if err != nil {
		return false, err
	}
	connected := false
	for _, n := range nodes {
		_, on := n.Networks[network]
		if !on {
			if err := m.runtime.ConnectNetwork(ctx, network, n.Name); err != nil {
				return connected, errors.Wrapf(err, "connecting management node %s to network %s", n.Name, network)
			}
			connected = true
		}
		if !on || !m.routesKept(n.ID) {
			if err := m.keepOwnRoutes(ctx, n.Name); err != nil {
				return connected, err
			}
		}
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
		if err := m.keepOwnRoutes(ctx, n.Name); err != nil {
			return err
		}
	}
	return nil
}

//go:embed scripts/own-routes.sh
var ownRoutesScript string

// keepOwnRoutes sets a management node's routes through its own network
// (scripts/own-routes.sh), given the gateways of every network the node is on, and remembers
// the node (by container ID) as done. A node gone meanwhile is not an error.
func (m *Manager) keepOwnRoutes(ctx context.Context, name string) error {
	c, err := m.runtime.InspectContainer(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "inspecting management node %s", name)
	}
	args := []string{"sh", "-c", ownRoutesScript, "own-routes.sh"}
	for network := range c.Networks {
		n, err := m.runtime.InspectNetwork(ctx, network)
		if container.IsNotFound(err) {
			continue
		}
		if err != nil {
			return errors.Wrapf(err, "inspecting network %s of management node %s", network, name)
		}
		args = append(args, n.Gateways...)
	}
	r, err := m.exec(ctx, name, nil, args...)
	if err == nil {
		err = r.err(name, "keeping the management node's routes on its own network")
	}
	if err != nil {
		return err
	}
	if set := strings.TrimSpace(r.Stdout); set != "" {
		ctrl.LoggerFrom(ctx).Info("Management node routes set through its own network", "node", name, "routes", strings.Split(set, "\n"))
	}
	m.routedMu.Lock()
	defer m.routedMu.Unlock()
	if m.routed == nil {
		m.routed = map[string]bool{}
	}
	m.routed[c.ID] = true
	return nil
}

// routesKept reports whether keepOwnRoutes ran for a node container since this manager started.
func (m *Manager) routesKept(id string) bool {
	m.routedMu.Lock()
	defer m.routedMu.Unlock()
	return m.routed[id]
}
