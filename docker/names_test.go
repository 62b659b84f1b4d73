package docker

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// Any two Cluster API clusters have different names on the engine: clusters are namespaced,
// and suites and teams reuse names.
func TestNamesNeverCollide(t *testing.T) {
	keys := []ClusterKey{
		{Namespace: "team-a", Name: "dev"},
		{Namespace: "team", Name: "a-dev"}, // "dockyard-team-a-dev" under the old scheme, both
		{Namespace: "team-b", Name: "dev"}, // the same cluster name in another namespace
		{Namespace: "dev", Name: "team-a"},
		{Namespace: "team-a", Name: "dev.x"}, // cluster names may hold dots, namespaces may not
		{Namespace: "team-a.dev", Name: "x"},
	}
	seen := sets.New[string]()
	for _, k := range keys {
		for _, name := range []string{
			DefaultNetworkName(k), LoadBalancerName(k),
			NodeName(k, "control-plane-abc12"), NodeName(k, k.Name+"-md-0-xyz"),
		} {
			if seen.Has(name) {
				t.Errorf("%s: %s is taken by another cluster", k, name)
			}
			seen.Insert(name)
		}
	}
}

func TestHostnamesFitAndStayUnique(t *testing.T) {
	short := NodeHostname("dev", "dev-control-plane-abc12")
	if short != "dev-control-plane-abc12" {
		t.Errorf("a machine name that starts with the cluster's is the hostname; got %s", short)
	}
	if got := NodeHostname("dev", "md-0-abc"); got != "dev-md-0-abc" {
		t.Errorf("got %s, want the cluster's name in front", got)
	}
	long := strings.Repeat("a", 60)
	a, b := NodeHostname("c", long+"-x1"), NodeHostname("c", long+"-x2")
	for _, h := range []string{a, b} {
		if len(h) > 63 || strings.HasSuffix(h, "-") || strings.HasPrefix(h, "-") {
			t.Errorf("hostname %q (%d characters) is not a valid one", h, len(h))
		}
	}
	if a == b {
		t.Errorf("two long machine names give the same hostname %s", a)
	}
	mgmt := ClusterKey{Name: "dockyard-mgmt"}
	if got := NodeName(mgmt, "control-plane"); got != "dockyard-mgmt-control-plane" {
		t.Errorf("a cluster without a namespace (a management cluster) keeps bare names; got %s", got)
	}
}

// Clusters made by v0.1 have containers and a network under the old names; they are found by
// their labels, so an upgraded manager keeps managing them.
func TestContainersAndNetworksOfEarlierVersionsAreFoundByTheirLabels(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("img")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns1", Name: "c1"}
	legacyNetwork := "dockyard-ns1-c1"
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: legacyNetwork}); err != nil {
		t.Fatal(err)
	}
	startFake(t, rt, "c1-control-plane-abc12", legacyNetwork, key.MachineLabels("c1-control-plane-abc12"))
	lbLabels := key.ClusterLabels()
	lbLabels[kindRoleLabel] = string(roleLoadBalancer)
	startFake(t, rt, "c1-lb", legacyNetwork, lbLabels)

	network, err := m.ClusterNetwork(ctx, key, "")
	if err != nil || network != legacyNetwork {
		t.Errorf("network %q (%v), want the cluster's labelled %s", network, err, legacyNetwork)
	}
	node, err := m.getNode(ctx, key, "c1-control-plane-abc12")
	if err != nil || node == nil || node.Name != "c1-control-plane-abc12" {
		t.Errorf("node %+v (%v), want the container of v0.1", node, err)
	}
	lb, err := m.getLoadBalancer(ctx, key)
	if err != nil || lb == nil || lb.Name != "c1-lb" {
		t.Errorf("load balancer %+v (%v), want the container of v0.1", lb, err)
	}

	// Another namespace's cluster of the same name is not confused with it.
	other := ClusterKey{Namespace: "ns2", Name: "c1"}
	if n, err := m.getNode(ctx, other, "c1-control-plane-abc12"); err != nil || n != nil {
		t.Errorf("ns2's machine found %+v (%v)", n, err)
	}
	if lb, err := m.getLoadBalancer(ctx, other); err != nil || lb != nil {
		t.Errorf("ns2's load balancer found %+v (%v)", lb, err)
	}
	if network, _ := m.ClusterNetwork(ctx, other, ""); network != DefaultNetworkName(other) {
		t.Errorf("ns2's network %s", network)
	}
}

// Two clusters of the same name in two namespaces, with machines of the same names, both get
// their network, load balancer and nodes on one engine.
func TestClustersOfTheSameNameCoexist(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node", "lb")
	m := NewManager(rt, ManagerOptions{})
	for _, ns := range []string{"team-a", "team-b"} {
		key := ClusterKey{Namespace: ns, Name: "dev"}
		network, err := m.ClusterNetwork(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
			t.Fatalf("%s: network: %v", ns, err)
		}
		if _, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: "lb", Network: network}); err != nil {
			t.Fatalf("%s: load balancer: %v", ns, err)
		}
		if _, err := m.createNode(ctx, NodeSpec{Cluster: key, Machine: "dev-control-plane-abc12", Image: "node", Role: RoleControlPlane, Network: network}); err != nil {
			t.Fatalf("%s: node: %v", ns, err)
		}
		lb, err := m.getLoadBalancer(ctx, key)
		if err != nil || lb == nil || lb.Labels[clusterLabel] != key.String() {
			t.Errorf("%s: load balancer %+v (%v)", ns, lb, err)
		}
	}
	if n := len(rt.ContainerNames()); n != 4 {
		t.Errorf("%d containers, want two load balancers and two nodes: %v", n, rt.ContainerNames())
	}
}

// A node on one of the engine's own networks (the image builder's, on "none") takes no alias,
// which only user-defined networks accept.
func TestANodeOnTheEnginesOwnNetwork(t *testing.T) {
	rt := inmemory.New("node")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "dockyard-build", Name: "b"}
	if _, err := m.createNode(context.Background(), NodeSpec{Cluster: key, Machine: "preload", Image: "node", Role: RoleWorker, Network: "none"}); err != nil {
		t.Fatal(err)
	}
}

// Namespaces and cluster names of Cluster API's e2e specs are long: the load balancer of
// "k8s-upgrade-and-conformance-rxe5dd" in namespace "k8s-upgrade-and-conformance-ck04ly" must
// still start (Linux takes hostnames of at most 64 bytes; the engine refuses longer ones).
func TestLongClusterAndNamespaceNamesStillStart(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node", "lb")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "k8s-upgrade-and-conformance-ck04ly", Name: "k8s-upgrade-and-conformance-rxe5dd"}
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: "lb", Network: network})
	if err != nil {
		t.Fatalf("load balancer of a long-named cluster: %v", err)
	}
	if !lb.Running {
		t.Errorf("load balancer %s is %s", lb.Name, lb.State)
	}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: key.Name + "-control-plane-abcde", Image: "node", Role: RoleControlPlane, Network: network})
	if err != nil || !node.Running || len(node.Hostname) > 63 {
		t.Errorf("node of a long-named cluster: %v, hostname %q", err, node.Hostname)
	}
}
