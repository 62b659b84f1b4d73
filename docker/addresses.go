package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/netip"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Fixed addresses. The engine gives a container a new address each time it starts, unless the
// network's subnet was configured when it was created and the container asked for a fixed one.
// So a network Dockyard creates gets the subnet the engine would have picked, configured:
// the lower half of it is Dockyard's to give out as fixed addresses (recorded in the
// staticRangeLabel), the upper half the engine's (management nodes and anything else that
// joins). The load balancer always has the first fixed address after the gateway, the nodes the
// next free ones; each container records its own in addressLabel. A load balancer that is
// recreated, and every container after the engine restarts, keeps its address, so the
// cluster's endpoint and etcd's peer addresses stay valid.
const (
	// staticRangeLabel on a network holds the part of its subnet Dockyard gives out.
	staticRangeLabel = "dockyard.x-k8s.io/static-range"
	// addressLabel on a container holds the fixed address Dockyard gave it.
	addressLabel = "dockyard.x-k8s.io/ipv4"
	// staticRangeIPv6Label on a dual-stack network holds the part of its IPv6 subnet Dockyard
	// gives out: a container with the n-th fixed IPv4 address has its n-th IPv6 one.
	staticRangeIPv6Label = "dockyard.x-k8s.io/static-range-ipv6"
)

// fixedAddresses are a container's fixed addresses on a network; empty ones are the engine's
// to pick.
type fixedAddresses struct{ IPv4, IPv6 string }

// createNetwork creates a cluster network with a configured subnet: the spec's IPv4 subnet, or
// else the one the engine picks for a network that names none (it knows its pools and the
// host's routes), learnt from a probe network that is removed at once. A network with IPv6
// also gets the spec's IPv6 subnet, or else a unique local /64 derived from the cluster's name.
func (m *Manager) createNetwork(ctx context.Context, cluster ClusterKey, spec NetworkSpec) error {
	name := spec.Name
	v4, v6, err := specSubnets(spec.Subnets)
	if err != nil {
		return &NetworkError{Network: name, Detail: err.Error()}
	}
	if spec.IPv6 && !v6.IsValid() {
		v6 = clusterIPv6Subnet(cluster)
	}
	if v4.IsValid() {
		return errors.Wrapf(m.createSplitNetwork(ctx, cluster, name, v4, v6), "creating network %s with subnet %s", name, v4)
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
	if !ok && len(n.Subnets) == 0 && !spec.IPv6 {
		// An engine whose networks have no subnets (Kubernetes: its CNI gives Pods their
		// addresses) has no fixed addresses either: the network is the engine's alone. Its
		// nodes accept only each other, and the API server's port from anywhere (the
		// endpoint, whatever the management cluster's address).
		return errors.Wrapf(m.runtime.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: cluster.ClusterLabels(), OpenPorts: []int{APIServerPort}}),
			"creating network %s", name)
	}
	if !ok {
		return errors.Errorf("the engine picked no IPv4 subnet for network %s (%v)", name, n.Subnets)
	}
	return m.createSplitNetwork(ctx, cluster, name, subnet, v6)
}

// createSplitNetwork creates a network on an IPv4 subnet (and an IPv6 one when v6 is valid):
// the lower half of each for fixed addresses, the upper half the engine's; a network whose
// IPv4 subnet is too small to split is the engine's alone.
func (m *Manager) createSplitNetwork(ctx context.Context, cluster ClusterKey, name string, subnet, v6 netip.Prefix) error {
	labels := cluster.ClusterLabels()
	spec := container.NetworkSpec{Name: name, Labels: labels, Subnet: subnet.String(), Gateway: subnet.Addr().Next().String()}
	if v6.IsValid() {
		spec.IPv6Subnet, spec.IPv6Gateway = v6.String(), v6.Addr().Next().String()
	}
	if subnet.Bits() > maxSplitBits {
		return m.runtime.CreateNetwork(ctx, spec)
	}
	static, dynamic := halves(subnet)
	labels[staticRangeLabel] = static.String()
	spec.IPRange = dynamic.String()
	if v6.IsValid() {
		static6, dynamic6 := halves(v6)
		labels[staticRangeIPv6Label] = static6.String()
		// Docker 20.10 cannot give out addresses from a range of more than 2^63 ("invalid bit
		// range"): the engine's part is the first /112 of the upper half, plenty for the
		// management nodes and whatever else joins.
		spec.IPv6Range = netip.PrefixFrom(dynamic6.Addr(), max(dynamic6.Bits(), maxSplitBitsIPv6)).String()
	}
	return m.runtime.CreateNetwork(ctx, spec)
}

// clusterIPv6Subnet is a unique local /64 (RFC 4193) for a cluster's network: a global ID and
// subnet ID derived from the cluster's namespace and name, so it is stable and two clusters
// practically never share one.
func clusterIPv6Subnet(cluster ClusterKey) netip.Prefix {
	sum := sha256.Sum256([]byte("dockyard/" + cluster.String()))
	var a [16]byte
	a[0] = 0xfd
	copy(a[1:8], sum[:7])
	return netip.PrefixFrom(netip.AddrFrom16(a), 64)
}

// maxSplitBits is the longest prefix of a subnet Dockyard splits: a /28 has 8 fixed addresses
// (network, gateway, load balancer and 5 nodes) and 8 for the engine.
const maxSplitBits = 28

// specSubnets are the subnets of a network spec, at most one per family (an invalid prefix for
// a family it has none of); the webhook refuses other specs, this refuses them again for
// callers without it.
func specSubnets(subnets []string) (v4, v6 netip.Prefix, err error) {
	for _, s := range subnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return v4, v6, errors.Errorf("subnet %q is not a CIDR", s)
		}
		family := &v6
		if p.Addr().Is4() {
			family = &v4
		}
		if family.IsValid() {
			return v4, v6, errors.Errorf("subnets %v: give at most one subnet per IP family", subnets)
		}
		*family = p.Masked()
	}
	if v6.IsValid() && v6.Bits() > maxSplitBitsIPv6 {
		return v4, v6, errors.Errorf("IPv6 subnet %s is too small: give a /%d or larger", v6, maxSplitBitsIPv6)
	}
	return v4, v6, nil
}

// maxSplitBitsIPv6 is the longest IPv6 prefix Dockyard accepts: its lower half must hold a
// twin of every fixed IPv4 address (a /16 has 65536).
const maxSplitBitsIPv6 = 112

func ipv4Subnet(subnets []string) (netip.Prefix, bool) {
	for _, s := range subnets {
		if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// halves splits a prefix (of either family) into its lower and upper half.
func halves(p netip.Prefix) (lower, upper netip.Prefix) {
	p = p.Masked()
	lower = netip.PrefixFrom(p.Addr(), p.Bits()+1)
	upperAddr := p.Addr().AsSlice()
	// Set the first host bit of the prefix: the upper half starts there.
	upperAddr[p.Bits()/8] |= 0x80 >> (p.Bits() % 8)
	a, _ := netip.AddrFromSlice(upperAddr)
	return lower, netip.PrefixFrom(a, p.Bits()+1)
}

// staticRange is the range of fixed addresses of a network Dockyard created for the cluster;
// false for any other network. A network shared by clusters has none, even when it carries the
// label: each cluster would count only its own containers and hand out the same addresses.
func staticRange(n *container.Network, cluster ClusterKey) (netip.Prefix, bool) {
	if n.Labels[clusterLabel] != cluster.String() {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(n.Labels[staticRangeLabel])
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

// withIPv6 adds to a fixed IPv4 address its IPv6 twin on a dual-stack network Dockyard created
// for the cluster: the address as far into the IPv6 static range as the IPv4 one is into its
// own. Containers recreated get both back, so the cluster's IPv6 addresses stay valid too.
func withIPv6(n *container.Network, cluster ClusterKey, ipv4 string) fixedAddresses {
	fixed := fixedAddresses{IPv4: ipv4}
	r4, ok := staticRange(n, cluster)
	r6, err6 := netip.ParsePrefix(n.Labels[staticRangeIPv6Label])
	a4, err4 := netip.ParseAddr(ipv4)
	if !ok || err6 != nil || !r6.Addr().Is6() || err4 != nil || !r4.Contains(a4) {
		return fixed
	}
	base, addr := r4.Masked().Addr().As4(), a4.As4()
	offset := binary.BigEndian.Uint32(addr[:]) - binary.BigEndian.Uint32(base[:])
	v6 := r6.Masked().Addr().As16()
	binary.BigEndian.PutUint32(v6[12:], binary.BigEndian.Uint32(v6[12:])+offset)
	if twin := netip.AddrFrom16(v6); r6.Contains(twin) {
		fixed.IPv6 = twin.String()
	}
	return fixed
}

// nodeAddress returns free fixed addresses for a new node of a cluster on a network: the first
// IPv4 one after the load balancer's that no container of the cluster has, running or not, and
// its IPv6 twin on a dual-stack network. None when the network has no fixed addresses. Callers
// hold the cluster's lock until the node exists.
func (m *Manager) nodeAddress(ctx context.Context, cluster ClusterKey, network string) (fixedAddresses, error) {
	n, err := m.runtime.InspectNetwork(ctx, network)
	if err != nil {
		return fixedAddresses{}, err
	}
	r, ok := staticRange(n, cluster)
	if !ok {
		return fixedAddresses{}, nil
	}
	taken := map[string]bool{loadBalancerAddress(n, cluster): true}
	cs, err := m.runtime.ListContainers(ctx, cluster.ClusterLabels())
	if err != nil {
		return fixedAddresses{}, err
	}
	for _, c := range cs {
		taken[c.Labels[addressLabel]] = true
	}
	for a := r.Addr().Next().Next().Next(); r.Contains(a); a = a.Next() {
		if !taken[a.String()] {
			return withIPv6(n, cluster, a.String()), nil
		}
	}
	return fixedAddresses{}, errors.Errorf("network %s has no free address left in %s", network, r)
}
