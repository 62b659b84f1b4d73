package docker

import (
	"context"
	"net/netip"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

func TestHalves(t *testing.T) {
	for in, want := range map[string][2]string{
		"172.24.0.0/16":   {"172.24.0.0/17", "172.24.128.0/17"},
		"192.168.16.0/20": {"192.168.16.0/21", "192.168.24.0/21"},
		"10.1.2.0/24":     {"10.1.2.0/25", "10.1.2.128/25"},
	} {
		lower, upper := halves(netip.MustParsePrefix(in))
		if lower.String() != want[0] || upper.String() != want[1] {
			t.Errorf("%s: %s and %s, want %s and %s", in, lower, upper, want[0], want[1])
		}
	}
}

// A network Dockyard creates has the subnet the engine picked, configured, with the lower half
// for fixed addresses: the load balancer first, then each new node the first free one, also
// when an earlier node is stopped (its address is only lent back while it is down).
func TestFixedAddressesOfACluster(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node", "lb")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c"}
	network := DefaultNetworkName(key)
	n, err := m.ensureClusterNetwork(ctx, key, NetworkSpec{Name: network})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Labels[staticRangeLabel]; got != "172.30.0.0/17" {
		t.Fatalf("static range %q, want the lower half of the engine's choice 172.30.0.0/16", got)
	}
	if nets, _ := rt.ListNetworks(ctx, nil); len(nets) != 1 {
		t.Errorf("the probe network was left: %v", nets)
	}
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: "lb", Network: network})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeAddress(lb, network); got != "172.30.0.2" {
		t.Errorf("load balancer at %s, want 172.30.0.2", got)
	}
	var addrs []string
	for _, machine := range []string{"m1", "m2", "m3"} {
		node, err := m.createNode(ctx, NodeSpec{Cluster: key, Machine: machine, Image: "node", Role: RoleWorker, Network: network})
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, nodeAddress(node, network))
		if node.Labels[addressLabel] != nodeAddress(node, network) {
			t.Errorf("node %s at %s records %q", node.Name, nodeAddress(node, network), node.Labels[addressLabel])
		}
		if machine == "m1" {
			rt.StopContainer(node.Name, 137)
		}
	}
	if want := []string{"172.30.0.3", "172.30.0.4", "172.30.0.5"}; addrs[0] != want[0] || addrs[1] != want[1] || addrs[2] != want[2] {
		t.Errorf("nodes at %v, want %v", addrs, want)
	}
	if err := rt.StartContainer(ctx, NodeName(key, "m1")); err != nil {
		t.Errorf("the stopped node cannot get its address back: %v", err)
	}

	// A network the user made (or v0.1 made) has no fixed addresses: the engine picks.
	other := ClusterKey{Namespace: "ns", Name: "legacy"}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "users-net"}); err != nil {
		t.Fatal(err)
	}
	node, err := m.createNode(ctx, NodeSpec{Cluster: other, Machine: "m1", Image: "node", Role: RoleWorker, Network: "users-net"})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[addressLabel] != "" || nodeAddress(node, "users-net") == "" {
		t.Errorf("node on a network without fixed addresses: labels %v address %q", node.Labels, nodeAddress(node, "users-net"))
	}
}
