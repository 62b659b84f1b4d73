package inmemory_test

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// Each in-memory cluster makes a network without a subnet: four thousand of them, with a few
// subnets users gave among them, all get private (RFC 1918) subnets that overlap nothing, each
// with room for a MachinePool of a thousand nodes in the half the node layer keeps for fixed
// addresses.
func TestNetworksOfThousandsOfClusters(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New()
	// Subnets users give, each where the engine would have picked later.
	explicit := map[int]string{0: "10.0.0.0/16", 7: "172.29.0.0/16", 1500: "10.200.16.0/24", 2000: "172.16.64.0/24", 3000: "192.168.0.0/20"}
	private := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	}
	var subnets []netip.Prefix
	for i := range 4000 {
		name := fmt.Sprintf("net-%d", i)
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name, Subnet: explicit[i]}); err != nil {
			t.Fatalf("network %d: %v", i, err)
		}
		n, err := rt.InspectNetwork(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := netip.ParsePrefix(n.Subnets[0])
		if err != nil {
			t.Fatalf("network %d: subnet %q: %v", i, n.Subnets[0], err)
		}
		subnets = append(subnets, p)
		if s, ok := explicit[i]; ok {
			if p.String() != s {
				t.Errorf("network %d has %s, asked for %s", i, p, s)
			}
			continue
		}
		if !within(p, private) {
			t.Errorf("network %d got %s, not private address space", i, p)
		}
		// The node layer keeps the lower half for fixed addresses: the network's own address,
		// the gateway and the load balancer come before the nodes.
		if half := 1 << (32 - p.Bits() - 1); half < 1000+3 {
			t.Errorf("network %d got %s: %d fixed addresses, no room for 1,000 nodes", i, p, half)
		}
	}
	sort.Slice(subnets, func(i, j int) bool { return subnets[i].Addr().Less(subnets[j].Addr()) })
	for i := 1; i < len(subnets); i++ {
		if subnets[i-1].Overlaps(subnets[i]) {
			t.Errorf("%s overlaps %s", subnets[i-1], subnets[i])
		}
	}
}

func within(p netip.Prefix, spaces []netip.Prefix) bool {
	for _, s := range spaces {
		if s.Bits() <= p.Bits() && s.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
