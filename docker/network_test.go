package docker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// Two clusters of the same name in two namespaces share a network the user made: each gets its
// own load balancer and nodes, selection by cluster never mixes them, no fixed addresses are
// handed out (each cluster would count only its own), and deleting one leaves the other, the
// network and the management node on it alone.
func TestTwoClustersShareAnExistingNetworkAndDeletingOneLeavesTheOther(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node", "lb", "img")
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "control-plane"})
	m := NewManager(rt, ManagerOptions{ManagementNodes: map[string]string{kindClusterLabel: "kind"}})

	// The user's network, even labelled as if it had a static range: Dockyard must not use it.
	const shared = "shared"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: shared, Subnet: "10.50.0.0/24",
		Labels: map[string]string{staticRangeLabel: "10.50.0.0/25", "owner": "me"}}); err != nil {
		t.Fatal(err)
	}
	a := ClusterKey{Namespace: "team-a", Name: "c"}
	b := ClusterKey{Namespace: "team-b", Name: "c"}
	spec := NetworkSpec{Name: shared, Existing: true}
	lbs := map[ClusterKey]*container.Container{}
	addresses := map[string]string{}
	for _, k := range []ClusterKey{a, b} {
		n, err := m.ensureClusterNetwork(ctx, k, spec)
		if err != nil {
			t.Fatalf("cluster %s on the existing network: %v", k, err)
		}
		if !slices.Contains(n.Containers, "kind-control-plane") {
			t.Errorf("management node not connected to the shared network: %v", n.Containers)
		}
		lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb", Network: shared})
		if err != nil {
			t.Fatal(err)
		}
		lbs[k] = lb
		for _, machine := range []string{"cp-0", "md-0"} {
			role := RoleControlPlane
			if machine == "md-0" {
				role = RoleWorker
			}
			node, err := m.createNode(ctx, NodeSpec{Cluster: k, Machine: machine, Image: "node", Role: role, Network: shared})
			if err != nil {
				t.Fatalf("node %s of %s: %v", machine, k, err)
			}
			if node.Labels[addressLabel] != "" {
				t.Errorf("node %s got a fixed address %s on a shared network", node.Name, node.Labels[addressLabel])
			}
			addr := nodeAddress(node, shared)
			if other, taken := addresses[addr]; taken || addr == "" {
				t.Errorf("node %s at %q, which %s has too", node.Name, addr, other)
			}
			addresses[addr] = node.Name
		}
		if lb.Labels[addressLabel] != "" {
			t.Errorf("load balancer %s got a fixed address on a shared network", lb.Name)
		}
		addr := nodeAddress(lb, shared)
		if other, taken := addresses[addr]; taken || addr == "" {
			t.Errorf("load balancer %s at %q, which %s has too", lb.Name, addr, other)
		}
		addresses[addr] = lb.Name
	}
	if lbs[a].Name == lbs[b].Name {
		t.Fatalf("both clusters' load balancers are named %s", lbs[a].Name)
	}
	for _, k := range []ClusterKey{a, b} {
		lb, err := m.getLoadBalancer(ctx, k)
		if err != nil || lb == nil || lb.Name != lbs[k].Name {
			t.Errorf("load balancer of %s: %v %v, want %s", k, lb, err, lbs[k].Name)
		}
		cps, err := m.Nodes(ctx, k, RoleControlPlane)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != 1 || cps[0].Name != NodeName(k, "cp-0") {
			var names []string
			for _, n := range cps {
				names = append(names, n.Name)
			}
			t.Errorf("control plane of %s: %v, want only %s", k, names, NodeName(k, "cp-0"))
		}
	}

	removes, disconnects := rt.CallCount("RemoveNetwork"), rt.CallCount("DisconnectNetwork")
	if err := m.DeleteCluster(ctx, a, shared); err != nil {
		t.Fatalf("deleting cluster a: %v", err)
	}
	if rt.CallCount("RemoveNetwork") != removes || rt.CallCount("DisconnectNetwork") != disconnects {
		t.Errorf("deleting a cluster on a user's network removed it or disconnected something from it")
	}
	n, err := rt.InspectNetwork(ctx, shared)
	if err != nil {
		t.Fatalf("the shared network is gone: %v", err)
	}
	want := []string{"kind-control-plane", lbs[b].Name, NodeName(b, "cp-0"), NodeName(b, "md-0")}
	slices.Sort(want)
	got := slices.Clone(n.Containers)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("after deleting a, the shared network has %v, want %v", got, want)
	}
	if cs, _ := rt.ListContainers(ctx, a.ClusterLabels()); len(cs) != 0 {
		t.Errorf("containers of the deleted cluster remain: %v", cs)
	}
	if lb, err := m.getLoadBalancer(ctx, b); err != nil || lb == nil || !lb.Running {
		t.Errorf("the other cluster's load balancer: %v %v", lb, err)
	}

	if err := m.DeleteCluster(ctx, b, shared); err != nil {
		t.Fatal(err)
	}
	if n, err := rt.InspectNetwork(ctx, shared); err != nil || n.Labels["owner"] != "me" {
		t.Errorf("the user's network after both clusters went: %v %v", n, err)
	}
}

// An existing network the spec names must exist: the error says so and what to do, and nothing
// is created in its place.
func TestMissingExistingNetworkIsNotCreated(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb")
	m := NewManager(rt, ManagerOptions{})
	k := ClusterKey{Namespace: "ns", Name: "c"}
	_, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: "nope", Existing: true})
	ne, ok := IsNetworkError(err)
	if !ok || !ne.NotFound || !strings.Contains(err.Error(), "docker network create nope") {
		t.Fatalf("EnsureClusterNetwork on a missing existing network: %v, want a NetworkError saying to create it", err)
	}
	if names := rt.NetworkNames(); len(names) != 0 || rt.CallCount("CreateNetwork") != 0 {
		t.Errorf("networks created: %v", names)
	}
	// Deleting such a cluster is not an error either.
	if err := m.DeleteCluster(ctx, k, "nope"); err != nil {
		t.Errorf("deleting a cluster whose existing network never existed: %v", err)
	}
}

// A network Dockyard creates on the user's subnet keeps the split: the lower half fixed
// addresses (load balancer first), the upper half the engine's; it goes with the cluster.
func TestCreatedNetworkOnAUserSubnet(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node", "lb")
	m := NewManager(rt, ManagerOptions{})
	k := ClusterKey{Namespace: "ns", Name: "c"}
	n, err := m.ensureClusterNetwork(ctx, k, NetworkSpec{Name: "custom", Subnets: []string{"10.60.0.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Subnets, []string{"10.60.0.0/24"}) || n.Labels[staticRangeLabel] != "10.60.0.0/25" || n.Labels[clusterLabel] != k.String() {
		t.Errorf("network %s: subnets %v labels %v", n.Name, n.Subnets, n.Labels)
	}
	if rt.CallCount("CreateNetwork") != 1 {
		t.Errorf("%d networks created (a probe for a subnet the user gave?)", rt.CallCount("CreateNetwork"))
	}
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb", Network: "custom"})
	if err != nil {
		t.Fatal(err)
	}
	node, err := m.createNode(ctx, NodeSpec{Cluster: k, Machine: "m1", Image: "node", Role: RoleWorker, Network: "custom"})
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeAddress(lb, "custom"); got != "10.60.0.2" {
		t.Errorf("load balancer at %s, want 10.60.0.2", got)
	}
	if got := nodeAddress(node, "custom"); got != "10.60.0.3" || node.Labels[addressLabel] != got {
		t.Errorf("node at %s (label %q), want 10.60.0.3", got, node.Labels[addressLabel])
	}
	// A second pass finds the cluster's own network and keeps it.
	if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: "custom", Subnets: []string{"10.60.0.0/24"}}); err != nil {
		t.Errorf("ensuring the cluster's own network again: %v", err)
	}
	if err := m.DeleteCluster(ctx, k, "custom"); err != nil {
		t.Fatal(err)
	}
	if names := rt.NetworkNames(); len(names) != 0 {
		t.Errorf("networks left: %v", names)
	}
}

// A cluster with IPv6 pods or services gets a dual-stack network: the user's IPv6 subnet or a
// unique local /64 of its own, split like the IPv4 one, and containers whose fixed IPv6
// address is the twin of their IPv4 one. A network without IPv6 is refused for it.
func TestDualStackNetworks(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb", "node")
	m := NewManager(rt, ManagerOptions{})
	k := ClusterKey{Namespace: "ns", Name: "six"}

	n, err := m.ensureClusterNetwork(ctx, k, NetworkSpec{Name: "dual", Subnets: []string{"10.61.0.0/24", "fd00:61::/64"}, IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(n.Subnets, []string{"10.61.0.0/24", "fd00:61::/64"}) || n.Labels[staticRangeIPv6Label] != "fd00:61::/65" {
		t.Errorf("network %s: subnets %v labels %v", n.Name, n.Subnets, n.Labels)
	}
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb", Network: "dual"})
	if err != nil {
		t.Fatal(err)
	}
	node, err := m.createNode(ctx, NodeSpec{Cluster: k, Machine: "m1", Image: "node", Role: RoleWorker, Network: "dual"})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[*container.Container]container.Endpoint{
		lb:   {IPv4: "10.61.0.2", IPv6: "fd00:61::2"},
		node: {IPv4: "10.61.0.3", IPv6: "fd00:61::3"},
	} {
		if got := c.Networks["dual"]; got != want {
			t.Errorf("%s has %+v, want %+v", c.Name, got, want)
		}
	}
	// An IPv6 subnet too small for the twins is refused before anything is created.
	_, err = m.EnsureNetwork(ctx, k, NetworkSpec{Name: "tiny", Subnets: []string{"10.62.0.0/24", "fd00:62::/120"}, IPv6: true})
	if _, ok := IsNetworkError(err); !ok || !strings.Contains(err.Error(), "too small") {
		t.Errorf("a /120 IPv6 subnet: %v", err)
	}
	if err := m.DeleteCluster(ctx, k, "dual"); err != nil {
		t.Fatal(err)
	}

	// Without subnets: the engine's IPv4 subnet and the cluster's own unique local /64.
	n, err = m.ensureClusterNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k), IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Subnets) != 2 || !strings.HasPrefix(n.Subnets[1], "fd") || !strings.HasSuffix(n.Subnets[1], "::/64") {
		t.Errorf("network %s: subnets %v, want an IPv4 subnet and a unique local /64", n.Name, n.Subnets)
	}
	other, err := m.ensureClusterNetwork(ctx, ClusterKey{Namespace: "ns", Name: "seven"}, NetworkSpec{Name: "seven", IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	if other.Subnets[1] == n.Subnets[1] {
		t.Errorf("two clusters got the same IPv6 subnet %s", n.Subnets[1])
	}

	// A network without IPv6 cannot carry an IPv6 cluster, whoever made it.
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "v4only"}); err != nil {
		t.Fatal(err)
	}
	_, err = m.EnsureNetwork(ctx, k, NetworkSpec{Name: "v4only", Existing: true, IPv6: true})
	if ne, ok := IsNetworkError(err); !ok || ne.NotFound || !strings.Contains(err.Error(), "--ipv6") {
		t.Errorf("an existing IPv4-only network for an IPv6 cluster: %v", err)
	}
}

// A network Dockyard created for one cluster goes away with it, so no other cluster may join
// it; and a network that exists already cannot be "created" on the user's subnet.
func TestNetworksThatCannotBeUsedAreRefused(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb")
	m := NewManager(rt, ManagerOptions{})
	a := ClusterKey{Namespace: "ns", Name: "a"}
	b := ClusterKey{Namespace: "ns", Name: "b"}
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []NetworkSpec{
		{Name: DefaultNetworkName(a), Existing: true},
		{Name: DefaultNetworkName(a)},
	} {
		_, err := m.EnsureNetwork(ctx, b, spec)
		if ne, ok := IsNetworkError(err); !ok || ne.NotFound || !strings.Contains(err.Error(), "for cluster ns/a") {
			t.Errorf("cluster b joining a's network (%+v): %v", spec, err)
		}
	}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "users"}); err != nil {
		t.Fatal(err)
	}
	_, err := m.EnsureNetwork(ctx, b, NetworkSpec{Name: "users", Subnets: []string{"10.70.0.0/24"}})
	if _, ok := IsNetworkError(err); !ok || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("creating a network whose name is taken on the user's subnet: %v", err)
	}
	// Named without subnets, a user's network is still used as it is (clusters of earlier
	// versions), and never removed.
	if _, err := m.EnsureNetwork(ctx, b, NetworkSpec{Name: "users"}); err != nil {
		t.Errorf("a user's network named in spec.network.name: %v", err)
	}
	if err := m.DeleteCluster(ctx, b, "users"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.InspectNetwork(ctx, "users"); err != nil {
		t.Errorf("the user's network was removed: %v", err)
	}
}
