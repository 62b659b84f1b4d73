package docker_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

// Any two Cluster API clusters have different names on the engine: clusters are namespaced,
// and suites and teams reuse names.
func TestNamesNeverCollide(t *testing.T) {
	keys := []docker.ClusterKey{
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
			docker.DefaultNetworkName(k), docker.LoadBalancerName(k),
			docker.NodeName(k, "control-plane-abc12"), docker.NodeName(k, k.Name+"-md-0-xyz"),
		} {
			if seen.Has(name) {
				t.Errorf("%s: %s is taken by another cluster", k, name)
			}
			seen.Insert(name)
		}
	}
}

func TestHostnamesFitAndStayUnique(t *testing.T) {
	short := docker.NodeHostname("dev", "dev-control-plane-abc12")
	if short != "dev-control-plane-abc12" {
		t.Errorf("a machine name that starts with the cluster's is the hostname; got %s", short)
	}
	if got := docker.NodeHostname("dev", "md-0-abc"); got != "dev-md-0-abc" {
		t.Errorf("got %s, want the cluster's name in front", got)
	}
	long := strings.Repeat("a", 60)
	a, b := docker.NodeHostname("c", long+"-x1"), docker.NodeHostname("c", long+"-x2")
	for _, h := range []string{a, b} {
		if len(h) > 63 || strings.HasSuffix(h, "-") || strings.HasPrefix(h, "-") {
			t.Errorf("hostname %q (%d characters) is not a valid one", h, len(h))
		}
	}
	if a == b {
		t.Errorf("two long machine names give the same hostname %s", a)
	}
	mgmt := docker.ClusterKey{Name: "dockyard-mgmt"}
	if got := docker.NodeName(mgmt, "control-plane"); got != "dockyard-mgmt-control-plane" {
		t.Errorf("a cluster without a namespace (a management cluster) keeps bare names; got %s", got)
	}
}

// Clusters made by v0.1 have containers and a network under the old names; they are found by
// their labels, so an upgraded manager keeps managing them.
func TestContainersAndNetworksOfEarlierVersionsAreFoundByTheirLabels(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("img")
	m := docker.NewManager(rt, docker.ManagerOptions{})
	key := docker.ClusterKey{Namespace: "ns1", Name: "c1"}
	legacyNetwork := "dockyard-ns1-c1"
	if _, err := m.EnsureNetwork(ctx, key, legacyNetwork); err != nil {
		t.Fatal(err)
	}
	startFake(t, rt, "c1-control-plane-abc12", legacyNetwork, key.MachineLabels("c1-control-plane-abc12"))
	lbLabels := key.ClusterLabels()
	lbLabels[docker.KindRoleLabel] = string(docker.RoleLoadBalancer)
	startFake(t, rt, "c1-lb", legacyNetwork, lbLabels)

	network, err := m.ClusterNetwork(ctx, key, "")
	if err != nil || network != legacyNetwork {
		t.Errorf("network %q (%v), want the cluster's labelled %s", network, err, legacyNetwork)
	}
	node, err := m.GetNode(ctx, key, "c1-control-plane-abc12")
	if err != nil || node == nil || node.Name != "c1-control-plane-abc12" {
		t.Errorf("node %+v (%v), want the container of v0.1", node, err)
	}
	lb, err := m.GetLoadBalancer(ctx, key)
	if err != nil || lb == nil || lb.Name != "c1-lb" {
		t.Errorf("load balancer %+v (%v), want the container of v0.1", lb, err)
	}

	// Another namespace's cluster of the same name is not confused with it.
	other := docker.ClusterKey{Namespace: "ns2", Name: "c1"}
	if n, err := m.GetNode(ctx, other, "c1-control-plane-abc12"); err != nil || n != nil {
		t.Errorf("ns2's machine found %+v (%v)", n, err)
	}
	if lb, err := m.GetLoadBalancer(ctx, other); err != nil || lb != nil {
		t.Errorf("ns2's load balancer found %+v (%v)", lb, err)
	}
	if network, _ := m.ClusterNetwork(ctx, other, ""); network != docker.DefaultNetworkName(other) {
		t.Errorf("ns2's network %s", network)
	}
}

// Two clusters of the same name in two namespaces, with machines of the same names, both get
// their network, load balancer and nodes on one engine.
func TestClustersOfTheSameNameCoexist(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("node", "lb")
	m := docker.NewManager(rt, docker.ManagerOptions{})
	for _, ns := range []string{"team-a", "team-b"} {
		key := docker.ClusterKey{Namespace: ns, Name: "dev"}
		network, err := m.ClusterNetwork(ctx, key, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.EnsureNetwork(ctx, key, network); err != nil {
			t.Fatalf("%s: network: %v", ns, err)
		}
		if _, err := m.EnsureLoadBalancer(ctx, docker.LoadBalancerSpec{Cluster: key, Image: "lb", Network: network}); err != nil {
			t.Fatalf("%s: load balancer: %v", ns, err)
		}
		if _, err := m.CreateNode(ctx, docker.NodeSpec{Cluster: key, Machine: "dev-control-plane-abc12", Image: "node", Role: docker.RoleControlPlane, Network: network}); err != nil {
			t.Fatalf("%s: node: %v", ns, err)
		}
		lb, err := m.GetLoadBalancer(ctx, key)
		if err != nil || lb == nil || lb.Labels[docker.ClusterLabel] != key.String() {
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
	rt := fake.New("node")
	m := docker.NewManager(rt, docker.ManagerOptions{})
	key := docker.ClusterKey{Namespace: "dockyard-build", Name: "b"}
	if _, err := m.CreateNode(context.Background(), docker.NodeSpec{Cluster: key, Machine: "preload", Image: "node", Role: docker.RoleWorker, Network: "none"}); err != nil {
		t.Fatal(err)
	}
}
