package docker

import (
	"context"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// EnsureNetwork returns a cluster's network, creating it (labelled as the cluster's own, with
// room for fixed addresses: addresses.go) when it does not exist, with the management nodes
// connected to it. An existing network is used as it is.
func (m *Manager) EnsureNetwork(ctx context.Context, cluster ClusterKey, name string) (*container.Network, error) {
	n, err := m.runtime.InspectNetwork(ctx, name)
	if container.IsNotFound(err) {
		if err := m.createNetwork(ctx, cluster, name); err != nil {
			return nil, err
		}
		n, err = m.runtime.InspectNetwork(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	connected, err := m.connectManagementNodes(ctx, name)
	if err != nil || !connected {
		return n, err
	}
	return m.runtime.InspectNetwork(ctx, name)
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
// carrying its label, and the network when Dockyard created it for this cluster. Callers make
// sure no machine of the cluster is left first.
func (m *Manager) DeleteCluster(ctx context.Context, cluster ClusterKey, network string) error {
	if err := m.removeLabelled(ctx, cluster.ClusterLabels()); err != nil {
		return err
	}

	n, err := m.runtime.InspectNetwork(ctx, network)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Labels[ClusterLabel] != cluster.String() {
		// Not ours: the user's network stays, and so do the management nodes on it, which
		// other clusters on that network may still need.
		return nil
	}
	if err := m.disconnectManagementNodes(ctx, network); err != nil {
		return err
	}
	if n, err = m.runtime.InspectNetwork(ctx, network); err != nil {
		return err
	}
	if len(n.Containers) > 0 {
		return errors.Errorf("network %s is still used by %v", network, n.Containers)
	}
	return m.runtime.RemoveNetwork(ctx, network)
}

// NodeAddress returns a container's IPv4 address on a network (IPv6 when it has no IPv4).
func NodeAddress(c *container.Container, network string) string {
	ep, ok := c.Networks[network]
	if !ok {
		return ""
	}
	if ep.IPv4 != "" {
		return ep.IPv4
	}
	return ep.IPv6
}
