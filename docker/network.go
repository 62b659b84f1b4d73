package docker

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// NetworkSpec is the network a cluster asks for.
type NetworkSpec struct {
	// Name of the network.
	Name string
	// Existing says the network must exist already: Dockyard attaches to it but never creates
	// or removes it, and gives no fixed addresses on it.
	Existing bool
	// Subnets of the network when Dockyard creates it: at most one per family; an empty IPv4
	// subnet lets the engine pick it.
	Subnets []string
	// IPv6 says the cluster needs IPv6 addresses on the network (its pods or services are
	// IPv6): Dockyard creates it dual-stack, and an existing network must have an IPv6 subnet.
	IPv6 bool
}

// NetworkError says a cluster's network cannot be used as the spec asks; the user has to act
// (create the network, or choose another), retrying alone does not help.
type NetworkError struct {
	Network string
	// NotFound: an existing network the spec names is not on the engine.
	NotFound bool
	Detail   string
}

func (e *NetworkError) Error() string {
	return fmt.Sprintf("network %s %s", e.Network, e.Detail)
}

// IsNetworkError reports whether err is (or wraps) a NetworkError, and returns it.
func IsNetworkError(err error) (*NetworkError, bool) {
	var ne *NetworkError
	ok := errors.As(err, &ne)
	return ne, ok
}

// EnsureNetwork makes sure the network a cluster asks for exists, with the management nodes
// connected to it, and returns its subnets (IPv4 first on a dual-stack one; none on an engine
// whose network gives containers their addresses). A network Dockyard creates is labelled as
// the cluster's own, on the spec's subnet or the one the engine picks, with room for fixed
// addresses (addresses.go). A network that exists already must not be one Dockyard created for
// another cluster (it goes away with that cluster); an existing network the spec names as such
// must exist. A network the cluster cannot use is a *NetworkError; one the policy refuses a
// *policy.RefusedError.
func (m *Manager) EnsureNetwork(ctx context.Context, cluster ClusterKey, spec NetworkSpec) ([]string, error) {
	n, err := m.ensureClusterNetwork(ctx, cluster, spec)
	if err != nil {
		return nil, err
	}
	return n.Subnets, nil
}

func (m *Manager) ensureClusterNetwork(ctx context.Context, cluster ClusterKey, spec NetworkSpec) (*container.Network, error) {
	name := spec.Name
	n, err := m.runtime.InspectNetwork(ctx, name)
	switch {
	case container.IsNotFound(err) && spec.Existing:
		return nil, &NetworkError{Network: name, NotFound: true,
			Detail: "does not exist on the container engine; create it (for example `docker network create " + name + "`), Dockyard attaches the cluster to it then"}
	case container.IsNotFound(err):
		if err := m.allowedSubnets(ctx, spec.Subnets); err != nil {
			return nil, err
		}
		if err := m.createNetwork(ctx, cluster, spec); err != nil {
			return nil, err
		}
		if err := m.guardHost(ctx, true); err != nil {
			return nil, err
		}
		n, err = m.runtime.InspectNetwork(ctx, name)
	case err == nil:
		if err := checkNetworkOwner(n, cluster, spec); err != nil {
			return nil, err
		}
		if err := m.allowedNetwork(n, cluster); err != nil {
			return nil, err
		}
		if err := checkNetworkFamilies(n, spec); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	if err := m.guardHost(ctx, false); err != nil {
		return nil, err
	}
	connected, err := m.connectManagementNodes(ctx, name)
	if err != nil || !connected {
		return n, err
	}
	return m.runtime.InspectNetwork(ctx, name)
}

// allowedNetwork checks a network that exists already against the policy: one Dockyard made for
// the cluster is its own, any other (the engine's host, none and bridge networks, the
// management cluster's, a user's) must be allowed by the administrator.
func (m *Manager) allowedNetwork(n *container.Network, cluster ClusterKey) error {
	if m.policy == nil || n.Labels[clusterLabel] == cluster.String() {
		return nil
	}
	return m.policy.CheckNetwork(n.Name)
}

// allowedSubnets checks the subnets a network is to be created on against the policy, the
// subnets of the networks the engine has now (its host routes them all) and those the
// management cluster and the host use now.
func (m *Manager) allowedSubnets(ctx context.Context, subnets []string) error {
	if m.policy == nil || len(subnets) == 0 {
		return nil
	}
	networks, err := m.runtime.ListNetworks(ctx, nil)
	if err != nil {
		return errors.Wrap(err, "listing the engine's networks")
	}
	var taken []netip.Prefix
	if m.inUse != nil {
		if taken, err = m.inUse(ctx); err != nil {
			return errors.Wrap(err, "finding the subnets in use")
		}
	}
	for _, n := range networks {
		for _, s := range n.Subnets {
			if p, err := netip.ParsePrefix(s); err == nil {
				taken = append(taken, p)
			}
		}
	}
	// The host's routes, read on the host: a manager in a pod sees only its pod's.
	routes, err := m.hostRoutesInUse(ctx)
	if err != nil {
		return err
	}
	taken = append(taken, routes...)
	for _, s := range subnets {
		if err := m.policy.CheckSubnet(s, taken...); err != nil {
			return err
		}
	}
	return nil
}

// checkNetworkOwner refuses a network that exists already when the cluster cannot use it: one
// Dockyard created for another cluster, or one that is not the cluster's own while the spec
// asks for subnets only a network Dockyard creates can have.
func checkNetworkOwner(n *container.Network, cluster ClusterKey, spec NetworkSpec) error {
	owner, labelled := n.Labels[clusterLabel]
	switch {
	case labelled && owner != cluster.String():
		return &NetworkError{Network: n.Name,
			Detail: "was created by Dockyard for cluster " + owner + " and is removed with it; for clusters to share a network, create one of your own on the engine and name it in spec.network.existing.name"}
	case !labelled && !spec.Existing && len(spec.Subnets) > 0:
		return &NetworkError{Network: n.Name,
			Detail: fmt.Sprintf("exists already (subnets %v), so Dockyard cannot create it with subnets %v; choose another name, or name it in spec.network.existing.name without subnets", n.Subnets, spec.Subnets)}
	}
	return nil
}

// checkNetworkFamilies refuses a network without IPv6 for a cluster that needs it.
func checkNetworkFamilies(n *container.Network, spec NetworkSpec) error {
	if !spec.IPv6 {
		return nil
	}
	for _, s := range n.Subnets {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is6() {
			return nil
		}
	}
	if spec.Existing {
		return &NetworkError{Network: n.Name,
			Detail: fmt.Sprintf("has no IPv6 subnet (subnets %v), and the cluster's pods or services are IPv6; create it dual-stack (for example `docker network create --ipv6 --subnet fd00:1::/64 %s`)", n.Subnets, n.Name)}
	}
	return &NetworkError{Network: n.Name,
		Detail: fmt.Sprintf("exists without IPv6 (subnets %v), and the cluster's pods or services are IPv6: Dockyard creates a cluster's network once, so choose another network name (spec.network.name) or recreate the cluster", n.Subnets)}
}

// ClusterNetwork is the network a cluster's containers are on: the one its spec names, else
// Dockyard's own, which is the network labelled as the cluster's when one exists (clusters made
// by earlier versions have another name) and DefaultNetworkName otherwise.
func (m *Manager) ClusterNetwork(ctx context.Context, cluster ClusterKey, specName string) (string, error) {
	if specName != "" {
		return specName, nil
	}
	name := DefaultNetworkName(cluster)
	if _, err := m.runtime.InspectNetwork(ctx, name); !container.IsNotFound(err) {
		return name, err
	}
	labelled, err := m.runtime.ListNetworks(ctx, cluster.ClusterLabels())
	if err != nil {
		return "", err
	}
	if len(labelled) == 1 {
		return labelled[0].Name, nil
	}
	return name, nil
}

// DeleteCluster removes everything left on the engine for a cluster: containers and volumes
// carrying its label, its load balancer, and the network when Dockyard created it for this
// cluster. Callers make sure no machine of the cluster is left first.
func (m *Manager) DeleteCluster(ctx context.Context, cluster ClusterKey, network string) error {
	if err := m.removeLabelled(ctx, cluster.ClusterLabels()); err != nil {
		return err
	}
	if err := m.lbs.remove(ctx, cluster); err != nil {
		return err
	}

	n, err := m.runtime.InspectNetwork(ctx, network)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Labels[clusterLabel] != cluster.String() {
		// Not ours: the user's network stays, and so do the management nodes on it, which
		// other clusters on that network may still need.
		return nil
	}
	if err := m.disconnectManagementNodes(ctx, network); err != nil {
		return err
	}
	if err := m.disconnectRegistries(ctx, network); err != nil {
		return err
	}
	if n, err = m.runtime.InspectNetwork(ctx, network); err != nil {
		return err
	}
	if len(n.Containers) > 0 {
		return errors.Errorf("network %s is still used by %v", network, n.Containers)
	}
	if err := m.runtime.RemoveNetwork(ctx, network); err != nil {
		return err
	}
	return m.guardHost(ctx, true)
}

// nodeAddress returns a container's IPv4 address on a network (IPv6 when it has no IPv4).
func nodeAddress(c *container.Container, network string) string {
	ep, ok := c.Networks[network]
	if !ok {
		return ""
	}
	if ep.IPv4 != "" {
		return ep.IPv4
	}
	return ep.IPv6
}
