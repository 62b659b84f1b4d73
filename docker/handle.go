package docker

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Node is a handle on one machine's node container, in the spirit of kind's nodes.Node: who it
// is (name, cluster, machine, role), what the engine said of it when the handle was made, and
// what controllers do with it. The handle holds no engine connection of its own: every
// operation goes through its Manager, and every command through the Manager's exec helper.
// It is a snapshot: look the node up again (FindNode) to see its state change.
type Node struct {
	m *Manager
	c *container.Container

	// Name is the node container's name.
	Name    string
	Cluster ClusterKey
	// Machine is the DockyardMachine's name.
	Machine string
	Role    Role
}

// node makes the handle of a node container of a cluster's machine.
func (m *Manager) node(cluster ClusterKey, machine string, c *container.Container) *Node {
	return &Node{m: m, c: c, Name: c.Name, Cluster: cluster, Machine: machine, Role: Role(c.Labels[kindRoleLabel])}
}

// FindNode returns the handle of a machine's node container, or nil when it does not exist. It
// is found by its name or, for nodes made by earlier versions under other names, by its labels.
func (m *Manager) FindNode(ctx context.Context, cluster ClusterKey, machine string) (*Node, error) {
	m, err := m.on(ctx, cluster)
	if err != nil {
		return nil, err
	}
	c, err := m.getNode(ctx, cluster, machine)
	if err != nil || c == nil {
		return nil, err
	}
	return m.node(cluster, machine, c), nil
}

// AddNode creates and starts the node container of a machine with its /var volume and, on a
// network Dockyard manages, fixed addresses, and returns its handle. The first node in auto
// privilege mode tells whether the engine allows privileged containers.
func (m *Manager) AddNode(ctx context.Context, spec NodeSpec) (*Node, error) {
	m, err := m.on(ctx, spec.Cluster)
	if err != nil {
		return nil, err
	}
	c, err := m.createNode(ctx, spec)
	if err != nil {
		return nil, err
	}
	return m.node(spec.Cluster, spec.Machine, c), nil
}

// ControlPlaneNodes returns the handles of a cluster's control plane node containers, running
// or not. Listed containers carry no hostname.
func (m *Manager) ControlPlaneNodes(ctx context.Context, cluster ClusterKey) ([]*Node, error) {
	m, err := m.on(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return m.nodes(ctx, cluster, RoleControlPlane)
}

// Nodes returns the handles of every node container of a cluster, running or not, sorted by
// name. Listed containers carry no hostname.
func (m *Manager) Nodes(ctx context.Context, cluster ClusterKey) ([]*Node, error) {
	m, err := m.on(ctx, cluster)
	if err != nil {
		return nil, err
	}
	nodes, err := m.nodes(ctx, cluster, "")
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, err
}

// nodes lists a cluster's node containers of a role (any role when empty; never the load
// balancer).
func (m *Manager) nodes(ctx context.Context, cluster ClusterKey, role Role) ([]*Node, error) {
	labels := cluster.ClusterLabels()
	labels[kindRoleLabel] = string(role)
	if role == "" {
		labels[machineLabel] = "" // only nodes carry a machine
	}
	containers, err := m.runtime.ListContainers(ctx, labels)
	if err != nil {
		return nil, errors.Wrapf(err, "listing the nodes of cluster %s", cluster)
	}
	nodes := make([]*Node, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		machine := strings.TrimPrefix(c.Labels[machineLabel], cluster.Namespace+"/")
		nodes = append(nodes, m.node(cluster, machine, c))
	}
	return nodes, nil
}

// Hostname is the node's hostname, which its workload cluster Node is named after; empty in
// handles from ControlPlaneNodes.
func (n *Node) Hostname() string { return n.c.Hostname }

// State is the engine's state word of the container: "created", "running", "exited", ...
func (n *Node) State() string { return n.c.State }

// Running reports whether the container runs.
func (n *Node) Running() bool { return n.c.Running }

// ExitCode is the exit code of a container that stopped.
func (n *Node) ExitCode() int { return n.c.ExitCode }

// Address returns the node's IPv4 address on a network (IPv6 when it has no IPv4), "" when it
// is not attached to it.
func (n *Node) Address(network string) string { return nodeAddress(n.c, network) }

// Addresses returns the node's addresses on a network: IPv4, then IPv6 on a dual-stack one.
func (n *Node) Addresses(network string) []string {
	ep, ok := n.c.Networks[network]
	if !ok {
		return nil
	}
	var out []string
	for _, a := range []string{ep.IPv4, ep.IPv6} {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// StartedAt is when the node container last started; zero when it never did.
func (n *Node) StartedAt() time.Time { return n.c.StartedAt }

// NeverStarted reports whether the node container was created but has never run: it holds
// nothing of the node yet (the node's /var is a volume of its own).
func (n *Node) NeverStarted() bool { return n.c.State == "created" && n.c.StartedAt.IsZero() }

// Start starts the node container, one created but never started. One that never ran and that
// the engine refuses to start is removed, so the next reconcile creates it anew: a manager
// stopped between a refused privileged start and its retry without privilege (CreateNode)
// leaves a privileged container that would be refused for ever.
func (n *Node) Start(ctx context.Context) error {
	err := n.m.runtime.StartContainer(ctx, n.Name)
	if err == nil || !n.NeverStarted() {
		return err
	}
	if rmErr := n.m.runtime.RemoveContainer(ctx, n.Name); rmErr != nil {
		return errors.Wrapf(err, "starting node container %s (removing it failed too: %v)", n.Name, rmErr)
	}
	return errors.Wrapf(err, "node container %s never started and was removed, to be created anew", n.Name)
}

// LastOutput returns the last lines of the node container's output (its console: systemd's
// boot and shutdown), e.g. to say why a node stopped; the error is the engine's.
func (n *Node) LastOutput(ctx context.Context, lines int) (string, error) {
	return n.m.runtime.ContainerLogs(ctx, n.Name, lines)
}

// Check tells whether systemd and containerd (with its CRI plugin) are up in the running node.
func (n *Node) Check(ctx context.Context) (NodeState, error) { return n.m.checkNode(ctx, n.Name) }

// LoadImages copies images from the engine into the node's containerd, each one the node does
// not hold as the engine's current image of that name; an image the policy does not let the
// cluster's namespace load is refused before anything is copied. report, when set, hears of
// each copy.
func (n *Node) LoadImages(ctx context.Context, images []string, report func(ImageLoad)) error {
	return n.m.loadImages(ctx, n.Name, n.Cluster, images, report)
}

// StartBootstrap copies a plan into the node and starts it in the background, unless it was
// started before.
func (n *Node) StartBootstrap(ctx context.Context, plan *bootstrap.Plan, timeout time.Duration) error {
	return n.m.startBootstrap(ctx, n.Name, plan, timeout)
}

// BootstrapStatus reads the state of the node's bootstrap. A plan that stopped running without
// finishing timed out when it ran longer than its timeout (the one it was started with,
// recorded in the node; timeout is used for plans that recorded none), else it was
// interrupted (the node restarted).
func (n *Node) BootstrapStatus(ctx context.Context, timeout time.Duration) (BootstrapStatus, error) {
	return n.m.bootstrapStatus(ctx, n.Name, timeout)
}

// StopBootstrap stops the node's bootstrap while it runs.
func (n *Node) StopBootstrap(ctx context.Context) error { return n.m.stopBootstrap(ctx, n.Name) }

// PublishedPort returns where a port of the node is published on the engine's host; a zero
// port when it is not.
func (n *Node) PublishedPort(port int) (hostIP string, hostPort int) {
	for _, p := range n.c.Ports {
		if p.ContainerPort == port && p.HostPort != 0 {
			return p.HostIP, p.HostPort
		}
	}
	return "", 0
}

// Ports are the node's published ports, with the host ports the engine picked, the API
// server's of a control plane node included.
func (n *Node) Ports() []Port {
	ports := make([]Port, 0, len(n.c.Ports))
	for _, p := range n.c.Ports {
		ports = append(ports, Port{ContainerPort: p.ContainerPort, Protocol: orDefault(p.Protocol, "tcp"), HostIP: p.HostIP, HostPort: p.HostPort})
	}
	return ports
}

// ReadFile reads one file from the node; ErrNotFound when it has no such file.
func (n *Node) ReadFile(ctx context.Context, file string) ([]byte, error) {
	return n.m.readFile(ctx, n.Name, file)
}
