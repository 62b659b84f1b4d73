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
// is, what the engine said of it when the handle was made (a snapshot, with three questions
// about it: look the node up again with FindNode to see it change), and eleven verbs. The handle holds no engine connection
// of its own: its verbs go through its Manager, and every command through the Manager's one
// runner.
type Node struct {
	m *Manager
	// c is what the engine said of the container, kept for its logs.
	c *container.Container

	// Name is the node container's name.
	Name    string
	Cluster ClusterKey
	// Machine is the DockyardMachine's name.
	Machine string
	Role    Role
	// Hostname is the node's hostname, which its workload cluster Node is named after; empty in
	// handles from Nodes (listed containers carry none).
	Hostname string
	// State is the engine's state word of the container ("created", "running", "exited", ...);
	// Running, ExitCode (of a container that stopped) and StartedAt (zero when it never
	// started) go with it.
	State     string
	Running   bool
	ExitCode  int
	StartedAt time.Time
	// Addresses are the node's addresses on each network it is attached to: IPv4, then IPv6 on a
	// dual-stack one.
	Addresses map[string][]string
	// Ports are the node's published ports, with the host ports the engine picked, the API
	// server's of a control plane node included.
	Ports []Port
}

// node makes the handle of a node container of a cluster's machine.
func (m *Manager) node(cluster ClusterKey, machine string, c *container.Container) *Node {
	n := &Node{
		m: m, c: c, Name: c.Name, Cluster: cluster, Machine: machine, Role: Role(c.Labels[kindRoleLabel]), Hostname: c.Hostname,
		State: c.State, Running: c.Running, ExitCode: c.ExitCode, StartedAt: c.StartedAt, Addresses: map[string][]string{},
	}
	for network, ep := range c.Networks {
		for _, a := range []string{ep.IPv4, ep.IPv6} {
			if a != "" {
				n.Addresses[network] = append(n.Addresses[network], a)
			}
		}
	}
	for _, p := range c.Ports {
		n.Ports = append(n.Ports, Port{ContainerPort: p.ContainerPort, Protocol: orDefault(p.Protocol, "tcp"), HostIP: p.HostIP, HostPort: p.HostPort})
	}
	return n
}

// FindNode returns the handle of a machine's node container, or nil when it does not exist. It
// is found by its name or, for nodes made by earlier versions under other names, by its labels.
func (m *Manager) FindNode(ctx context.Context, cluster ClusterKey, machine string) (*Node, error) {
	c, err := m.getNode(ctx, cluster, machine)
	if err != nil || c == nil {
		return nil, err
	}
	return m.node(cluster, machine, c), nil
}

// Nodes returns the handles of a cluster's node containers of a role (every role when empty),
// running or not, sorted by name.
func (m *Manager) Nodes(ctx context.Context, cluster ClusterKey, role Role) ([]*Node, error) {
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
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// Address is the node's first address on a network (IPv4 on a dual-stack one), "" when it is
// not attached to it.
func (n *Node) Address(network string) string {
	if a := n.Addresses[network]; len(a) > 0 {
		return a[0]
	}
	return ""
}

// PublishedPort returns where a port of the node is published on the engine's host; a zero
// port when it is not.
func (n *Node) PublishedPort(port int) (hostIP string, hostPort int) {
	for _, p := range n.Ports {
		if p.ContainerPort == port && p.HostPort != 0 {
			return p.HostIP, p.HostPort
		}
	}
	return "", 0
}

// NeverStarted reports whether the node container was created but has never run: it holds
// nothing of the node yet (the node's /var is a volume of its own).
func (n *Node) NeverStarted() bool { return n.State == "created" && n.StartedAt.IsZero() }

// Start starts the node container, one created but never started. One that never ran and that
// the engine refuses to start is removed, so the next reconcile creates it anew: a manager
// stopped between a refused privileged start and its retry without privilege (createNode)
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

// Console returns the last lines of the node container's output (its console: systemd's boot
// and shutdown), e.g. to say why a node stopped; the error is the engine's.
func (n *Node) Console(ctx context.Context, lines int) (string, error) {
	return n.m.runtime.ContainerLogs(ctx, n.Name, lines)
}

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

// BootstrapStatus reads what became of the node's bootstrap. A plan that stopped running without
// finishing timed out when it ran longer than its timeout (the one it was started with,
// recorded in the node; timeout is used for plans that recorded none), else it was interrupted
// (the node restarted). One still running well past its timeout is stopped.
func (n *Node) BootstrapStatus(ctx context.Context, timeout time.Duration) (bootstrap.Status, error) {
	return n.m.bootstrapStatus(ctx, n.Name, timeout)
}
