package docker

import (
	"context"
	_ "embed" // scripts/own-routes.sh, scripts/isolate.sh
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
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
// 20 to 80 s late, objects refused). After joining or leaving a network, the first time a
// manager sees a node, after the node restarted and every ManagementResync, the manager runs
// scripts/own-routes.sh there: policy rules that send what the main table has only a default
// route for through the node's own network, leaving the main table to the engine (which
// refuses to join a network whose subnet overlaps a route there, and rewrites its default
// route at each join and leave).
//
// A management node is no router. It is a Kubernetes node, so it forwards: a workload node
// (root there is what a tenant's bootstrap commands or a privileged pod get) that routed the
// management cluster's Service or pod ranges, the node's own network or another workload
// network through the node's address on its network reached them, and the node itself (its
// kubelet, its API server). So at the same moments scripts/isolate.sh runs there too: from
// the interfaces of workload networks, only replies to what the node and its pods opened pass
// (rules in tables raw and mangle, ahead of kube-proxy's and the CNI's). Which networks are
// workload networks follows their labels (managementNetworks): the engine names a node's
// interfaces anew when it restarts, so eth0 need not be the node's own network then. Both
// scripts are left in the node with their arguments, and run again each time it starts, before
// its kubelet (management_boot.go).

// ManagementResync is how often a cluster network is checked for management nodes that
// joined the management cluster after the network was made.
const ManagementResync = time.Minute

// ManagementSelector returns the labels selecting the node containers, on this engine, of the
// management cluster that node (a Kubernetes node name) belongs to: Dockyard's cluster label
// when the node carries it, else kind's (ManagerOptions.ManagementNodes takes them). The node's container is named as the node (kind's nodes,
// cmd/tools/mgmt's) or, for a node of a Dockyard cluster, "<node>.<namespace>": the manager runs in
// a cluster Dockyard made (after clusterctl move, or installed there by clusterctl init). It
// returns nil when node is empty or no container is that node: the manager then runs somewhere
// the engine's networks are routed to (the host).
func (m *Manager) ManagementSelector(ctx context.Context, node string) (map[string]string, error) {
	if node == "" {
		return nil, nil
	}
	rt := m.runtime
	c, err := rt.InspectContainer(ctx, node)
	if container.IsNotFound(err) {
		c, err = dockyardNode(ctx, rt, node)
		if c == nil || err != nil {
			return nil, err
		}
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

// dockyardNode finds the container of a Dockyard cluster's node by its Kubernetes node name,
// "<node>.<namespace>" (names.go); nil when there is none. Two, in two namespaces, are refused:
// the manager cannot tell which one it runs on.
func dockyardNode(ctx context.Context, rt container.Runtime, node string) (*container.Container, error) {
	all, err := rt.ListContainers(ctx, map[string]string{clusterLabel: ""})
	if err != nil {
		return nil, errors.Wrapf(err, "finding the management cluster's node %s on the engine", node)
	}
	var found []container.Container
	for _, c := range all {
		if ns, ok := strings.CutPrefix(c.Name, node+"."); ok && ns != "" && !strings.Contains(ns, ".") {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return &found[0], nil
	}
	names := make([]string, 0, len(found))
	for _, c := range found {
		names = append(names, c.Name)
	}
	return nil, errors.Errorf("node %s is any of the containers %s: start the manager with --management-node=<its container>",
		node, strings.Join(names, ", "))
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
		if c.Labels[kindRoleLabel] != string(roleLoadBalancer) {
			nodes = append(nodes, c)
		}
	}
	return nodes, nil
}

// connectManagementNodes connects every management node not yet on the network to it, and
// reports whether it connected any. A node it connects, or has not settled lately, is settled
// (settleManagementNode).
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
		if err := m.settleManagementNode(ctx, n.Name, !on); err != nil {
			return connected, err
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
		if err := m.settleManagementNode(ctx, n.Name, true); err != nil {
			return err
		}
	}
	return nil
}

var (
	//go:embed scripts/own-routes.sh
	ownRoutesScript string
	//go:embed scripts/isolate.sh
	isolateScript string
)

// settleManagementNode runs the scripts that follow a management node's networks:
// scripts/isolate.sh, given the subnets of its workload networks, and scripts/own-routes.sh,
// given the gateways of its own network, then leaves both with their arguments in the node for
// its next start (writeAtBoot). It runs them when changed says the node joined or left
// a network, and otherwise when this manager has not settled the node lately (isSettled: a
// restarted node lost its rules and routes). A node gone or stopped meanwhile is not an error:
// it is settled once it runs.
func (m *Manager) settleManagementNode(ctx context.Context, name string, changed bool) error {
	c, err := m.runtime.InspectContainer(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "inspecting management node %s", name)
	}
	if !c.Running {
		return nil
	}
	if !changed && m.isSettled(c) {
		return nil
	}
	nets, err := m.managementNetworks(ctx, c)
	if err != nil {
		return err
	}
	if len(nets.unsure) > 0 {
		ctrl.LoggerFrom(ctx).Info("Management node not isolated from networks Dockyard did not create: cannot tell which of them is the node's own",
			"node", name, "networks", nets.unsure)
	}

	// The engine publishes the node's ports (its API server's) through one of its networks, a
	// workload network when that one sorts first: the host connects from its gateway there.
	var args []string
	for _, gw := range nets.workloadGateways {
		args = append(args, "-g", gw)
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 && strings.EqualFold(orDefault(p.Protocol, "tcp"), "tcp") {
			args = append(args, "-p", strconv.Itoa(p.ContainerPort))
		}
	}
	for _, p := range m.openPorts {
		args = append(args, "-o", strconv.Itoa(p))
	}
	args = append(args, nets.workloadSubnets...)
	set, err := m.nodeScript(ctx, name, isolateScript, "isolate.sh", args, "isolating the management node from workload networks")
	if err != nil {
		return err
	}
	if len(set) > 0 {
		ctrl.LoggerFrom(ctx).Info("Management node isolated from workload networks", "node", name, "workloadNetworks", nets.workload, "rules", set)
	}

	if set, err = m.nodeScript(ctx, name, ownRoutesScript, "own-routes.sh", nets.gateways, "keeping the management node's routes on its own network"); err != nil {
		return err
	}
	if len(set) > 0 {
		ctrl.LoggerFrom(ctx).Info("Management node routes set through its own network", "node", name, "routes", set)
	}

	boot := atBoot{isolate: args, ownRoutes: nets.gateways}
	if m.bootWritten(c.ID) != boot.key() {
		if err := m.writeAtBoot(ctx, name, boot); err != nil {
			return err
		}
	}
	m.settledMu.Lock()
	defer m.settledMu.Unlock()
	if m.settled == nil {
		m.settled = map[string]settledNode{}
	}
	m.settled[c.ID] = settledNode{started: c.StartedAt, at: time.Now(), boot: boot.key()}
	return nil
}

// settledNode is when a manager settled a management node, when the node had started, and
// the arguments it last left the node for its next start (atBoot.key).
type settledNode struct {
	started, at time.Time
	boot        string
}

// nodeScript runs an embedded script in a node with its arguments and returns the lines it
// printed.
func (m *Manager) nodeScript(ctx context.Context, node, script, scriptName string, args []string, what string) ([]string, error) {
	out, err := m.output(ctx, node, command{argv: nodecmd.Script(scriptName, script, args...), what: what})
	if err != nil {
		return nil, err
	}
	if out != "" {
		return strings.Split(out, "\n"), nil
	}
	return nil, nil
}

// isSettled reports whether this manager settled a node container since the container last
// started, less than ManagementResync ago: the management cluster's kube-proxy and CNI rewrite
// their rules, and one that put its jump ahead of the isolation chain's (or flushed it) is
// undone within that time.
func (m *Manager) isSettled(c *container.Container) bool {
	m.settledMu.Lock()
	defer m.settledMu.Unlock()
	s, ok := m.settled[c.ID]
	return ok && s.started.Equal(c.StartedAt) && time.Since(s.at) < ManagementResync
}

// managementNetworks is how a management node's networks divide.
type managementNetworks struct {
	// workload are the workload networks the node is on, sorted.
	workload []string
	// unsure are networks that are either the node's own or workload networks.
	unsure []string
	// gateways are those of the node's own network, or of every network of the node when its
	// own is not known (own-routes.sh then takes eth0's).
	gateways []string
	// workloadGateways are those of the workload networks: the engine's host on each.
	workloadGateways []string
	// workloadSubnets are the subnets of the workload networks, sorted.
	workloadSubnets []string
}

// managementNetworks divides the networks a management node is on. The engine names the node's
// interfaces in no fixed order once it restarts, so the division follows the networks' labels: a
// network Dockyard made for the management cluster (its nodes carry Dockyard's cluster label) is
// the node's own, and one Dockyard made for any other cluster is a workload network. Networks
// without Dockyard's label (kind's, a user's network named in spec.network.existing.name) are
// workload networks when the node's own is known; otherwise the only one is the node's own, and
// among several a kind node's own is kind's network ("kind"). Any left are unsure.
func (m *Manager) managementNetworks(ctx context.Context, c *container.Container) (managementNetworks, error) {
	names := make([]string, 0, len(c.Networks))
	for name := range c.Networks {
		names = append(names, name)
	}
	slices.Sort(names)
	mine := m.management[clusterLabel]
	var own, workload, unlabelled []*container.Network
	for _, name := range names {
		n, err := m.runtime.InspectNetwork(ctx, name)
		if container.IsNotFound(err) {
			continue
		}
		if err != nil {
			return managementNetworks{}, errors.Wrapf(err, "inspecting network %s of management node %s", name, c.Name)
		}
		owner, labelled := n.Labels[clusterLabel]
		switch {
		case labelled && mine != "" && owner == mine:
			own = append(own, n)
		case labelled:
			workload = append(workload, n)
		default:
			unlabelled = append(unlabelled, n)
		}
	}
	var unsure []*container.Network
	switch {
	case len(own) > 0:
		workload = append(workload, unlabelled...)
	case len(unlabelled) == 1:
		own = unlabelled
	case m.management[kindClusterLabel] != "" && slices.ContainsFunc(unlabelled, isKindNetwork):
		for _, n := range unlabelled {
			if isKindNetwork(n) {
				own = append(own, n)
			} else {
				workload = append(workload, n)
			}
		}
	default:
		unsure = unlabelled
	}

	var out managementNetworks
	for _, n := range workload {
		out.workload = append(out.workload, n.Name)
		out.workloadGateways = append(out.workloadGateways, n.Gateways...)
		out.workloadSubnets = append(out.workloadSubnets, n.Subnets...)
	}
	slices.Sort(out.workload)
	slices.Sort(out.workloadSubnets)
	for _, n := range unsure {
		out.unsure = append(out.unsure, n.Name)
	}
	gateways := own
	if len(own) == 0 {
		gateways = append(append(gateways, workload...), unsure...)
	}
	for _, n := range gateways {
		out.gateways = append(out.gateways, n.Gateways...)
	}
	return out, nil
}

// isKindNetwork reports whether a network is the one kind creates its clusters' nodes on.
func isKindNetwork(n *container.Network) bool { return n.Name == "kind" }

// isolationChain is the chain scripts/isolate.sh keeps in tables raw and mangle.
const isolationChain = "DOCKYARD-ISOLATION"
