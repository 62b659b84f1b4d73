package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Fixed addresses. The engine gives a container a new address each time it starts, unless the
// network's subnet was configured when it was created and the container asked for a fixed one.
// So a network Dockyard creates gets the subnet the engine would have picked, configured:
// the lower half of it is Dockyard's to give out as fixed addresses (recorded in the
// StaticRangeLabel), the upper half the engine's (management nodes and anything else that
// joins). The load balancer always has the first fixed address after the gateway, the nodes the
// next free ones; each container records its own in AddressLabel. A load balancer that is
// recreated, and every container after the engine restarts, keeps its address, so the
// cluster's endpoint and etcd's peer addresses stay valid.
const (
	// StaticRangeLabel on a network holds the part of its subnet Dockyard gives out.
	StaticRangeLabel = "dockyard.x-k8s.io/static-range"
	// AddressLabel on a container holds the fixed address Dockyard gave it.
	AddressLabel = "dockyard.x-k8s.io/ipv4"
)

// createNetwork creates a cluster network with a configured subnet: the spec's IPv4 subnet, or
// else the one the engine picks for a network that names none (it knows its pools and the
// host's routes), learnt from a probe network that is removed at once.
func (m *Manager) createNetwork(ctx context.Context, cluster ClusterKey, name string, subnets []string) error {
	if len(subnets) > 0 {
		subnet, err := specSubnet(subnets)
		if err != nil {
			return &NetworkError{Network: name, Detail: err.Error()}
		}
		return errors.Wrapf(m.createSplitNetwork(ctx, cluster, name, subnet), "creating network %s with subnet %s", name, subnet)
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	probe := "dockyard-subnet-probe-" + hex.EncodeToString(suffix)
	if err := m.runtime.CreateNetwork(ctx, container.NetworkSpec{Name: probe, Labels: cluster.ClusterLabels()}); err != nil {
		return errors.Wrapf(err, "asking the engine for a free subnet for network %s", name)
	}
	n, err := m.runtime.InspectNetwork(ctx, probe)
	if rmErr := m.runtime.RemoveNetwork(ctx, probe); err == nil {
		err = rmErr
	}
	if err != nil {
		return errors.Wrapf(err, "asking the engine for a free subnet for network %s", name)
	}
	subnet, ok := ipv4Subnet(n.Subnets)
	if !ok || subnet.Bits() > maxSplitBits {
		// Too small to split (or IPv6 only): let the engine give addresses as it likes.
		return m.runtime.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: cluster.ClusterLabels()})
	}
	return m.createSplitNetwork(ctx, cluster, name, subnet)
}

// createSplitNetwork creates a network on an IPv4 subnet: its lower half for fixed addresses,
// its upper half the engine's; a subnet too small to split is the engine's alone.
func (m *Manager) createSplitNetwork(ctx context.Context, cluster ClusterKey, name string, subnet netip.Prefix) error {
	labels := cluster.ClusterLabels()
	if subnet.Bits() > maxSplitBits {
		return m.runtime.CreateNetwork(ctx, container.NetworkSpec{
			Name: name, Labels: labels, Subnet: subnet.String(), Gateway: subnet.Addr().Next().String(),
		})
	}
	static, dynamic := halves(subnet)
	labels[StaticRangeLabel] = static.String()
	return m.runtime.CreateNetwork(ctx, container.NetworkSpec{
		Name: name, Labels: labels,
		Subnet: subnet.String(), Gateway: subnet.Addr().Next().String(), IPRange: dynamic.String(),
	})
}

// maxSplitBits is the longest prefix of a subnet Dockyard splits: a /28 has 8 fixed addresses
// (network, gateway, load balancer and 5 nodes) and 8 for the engine.
const maxSplitBits = 28

// specSubnet is the IPv4 subnet of a network spec; the webhook refuses others, this refuses
// them again for callers without it.
func specSubnet(subnets []string) (netip.Prefix, error) {
	var v4 []netip.Prefix
	for _, s := range subnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, errors.Errorf("subnet %q is not a CIDR", s)
		}
		if !p.Addr().Is4() {
			return netip.Prefix{}, errors.Errorf("subnet %s: IPv6 is not supported yet", s)
		}
		v4 = append(v4, p.Masked())
	}
	if len(v4) != 1 {
		return netip.Prefix{}, errors.Errorf("subnets %v: give one IPv4 subnet", subnets)
	}
	return v4[0], nil
}

func ipv4Subnet(subnets []string) (netip.Prefix, bool) {
	for _, s := range subnets {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// halves splits a prefix into its lower and upper half.
func halves(p netip.Prefix) (lower, upper netip.Prefix) {
	lower = netip.PrefixFrom(p.Addr(), p.Bits()+1)
	upperAddr := p.Addr().As4()
	hostBits := 32 - (p.Bits() + 1)
	// Set the first host bit of the prefix: the upper half starts there.
	byteIndex, bit := (31-hostBits)/8, uint(hostBits%8)
	upperAddr[byteIndex] |= 1 << bit
	return lower, netip.PrefixFrom(netip.AddrFrom4(upperAddr), p.Bits()+1)
}

// staticRange is the range of fixed addresses of a network Dockyard created for the cluster;
// false for any other network. A network shared by clusters has none, even when it carries the
// label: each cluster would count only its own containers and hand out the same addresses.
func staticRange(n *container.Network, cluster ClusterKey) (netip.Prefix, bool) {
	if n.Labels[ClusterLabel] != cluster.String() {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(n.Labels[StaticRangeLabel])
	return p, err == nil && p.Addr().Is4()
}

// loadBalancerAddress is the cluster's load balancer's fixed address on a network: the first
// after the gateway; "" when the network has no fixed addresses for the cluster.
func loadBalancerAddress(n *container.Network, cluster ClusterKey) string {
	r, ok := staticRange(n, cluster)
	if !ok {
		return ""
	}
	return r.Addr().Next().Next().String()
}

// nodeAddress returns a free fixed address for a new node of a cluster on a network: the first
// after the load balancer's that no container of the cluster has, running or not. "" when the
// network has no fixed addresses. Callers hold the cluster's lock until the node exists.
func (m *Manager) nodeAddress(ctx context.Context, cluster ClusterKey, network string) (string, error) {
	n, err := m.runtime.InspectNetwork(ctx, network)
	if err != nil {
		return "", err
	}
	r, ok := staticRange(n, cluster)
	if !ok {
		return "", nil
	}
	taken := map[string]bool{loadBalancerAddress(n, cluster): true}
	cs, err := m.runtime.ListContainers(ctx, cluster.ClusterLabels())
	if err != nil {
		return "", err
	}
	for _, c := range cs {
		taken[c.Labels[AddressLabel]] = true
	}
	for a := r.Addr().Next().Next().Next(); r.Contains(a); a = a.Next() {
		if !taken[a.String()] {
			return a.String(), nil
		}
	}
	return "", errors.Errorf("network %s has no free address left in %s", network, r)
}
