package docker

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// testPolicy allows the network "shared" and reserves 10.96.0.0/12 (the management cluster's
// Services).
func testPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	cfg := policy.DefaultConfig()
	cfg.ImageRepositories = []string{"docker.io/library/node", "docker.io/library/lb"}
	cfg.Networks = []string{"shared"}
	cfg.ReservedSubnets = []string{"10.96.0.0/12"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The node layer checks the policy again before it calls the engine, for objects admitted
// before the policy changed (or never admitted by a webhook): nothing refused reaches the engine.
func TestNodeLayerRefusesWhatThePolicyDoesNot(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node", "lb", "localhost/team-a/app:dev", "localhost/dockyard/manager:v0.1.0")
	inUse := func(context.Context) ([]netip.Prefix, error) {
		return []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24")}, nil
	}
	m := NewManager(rt, ManagerOptions{Policy: testPolicy(t), SubnetsInUse: inUse})
	k := ClusterKey{Namespace: "team-a", Name: "c"}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: "engine-net", Subnet: "172.30.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"host", "shared", "kind"} {
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name string
		spec NetworkSpec
		says string
	}{
		{"the engine's host network", NetworkSpec{Name: "host", Existing: true}, policy.NetworksFlag},
		{"a network of someone else's by the name Dockyard creates", NetworkSpec{Name: "kind"}, policy.NetworksFlag},
		{"the management cluster's Services", NetworkSpec{Name: "n1", Subnets: []string{"10.96.0.0/24"}}, "10.96.0.0/12"},
		{"an engine network's subnet", NetworkSpec{Name: "n2", Subnets: []string{"172.30.1.0/24"}}, "172.30.0.0/16"},
		{"a subnet in use on the host", NetworkSpec{Name: "n3", Subnets: []string{"192.168.50.0/28"}}, "192.168.50.0/24"},
		{"link-local", NetworkSpec{Name: "n4", Subnets: []string{"169.254.1.0/24"}}, "link-local"},
	} {
		_, err := m.EnsureNetwork(ctx, k, tc.spec)
		if !policy.IsRefused(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.says)
		}
	}
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		if _, err := rt.InspectNetwork(ctx, name); !container.IsNotFound(err) {
			t.Errorf("network %s was created: %v", name, err)
		}
	}
	if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: "shared", Existing: true}); err != nil {
		t.Errorf("an allowed network: %v", err)
	}
	if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: "mine", Subnets: []string{"10.200.0.0/24"}}); err != nil {
		t.Errorf("a private subnet nobody uses: %v", err)
	}
	// The cluster's own network, made by Dockyard, is its own whatever the list says.
	if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: "mine"}); err != nil {
		t.Errorf("the cluster's own network: %v", err)
	}

	// Nodes: ports beyond the policy create nothing.
	for _, ports := range [][]Port{
		{{ContainerPort: 10250, HostIP: "0.0.0.0", HostPort: 8080}},
		{{ContainerPort: 2379, HostIP: "::"}},
		{{ContainerPort: 80, HostPort: 80}},
	} {
		_, err := m.AddNode(ctx, NodeSpec{Cluster: k, Machine: "m", Image: "node", Role: RoleWorker, Network: "mine", Ports: ports})
		if !policy.IsRefused(err) {
			t.Errorf("ports %+v: %v, want a refusal", ports, err)
		}
	}
	if names := rt.ContainerNames(); len(names) != 0 {
		t.Errorf("containers created for refused nodes: %v", names)
	}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: k, Machine: "m", Image: "node", Role: RoleWorker, Network: "mine",
		Ports: []Port{{ContainerPort: 30080, HostPort: 30080}}})
	if err != nil {
		t.Fatal(err)
	}

	// A load balancer on a privileged host port, or from an image not allowed, is not created.
	for _, spec := range []LoadBalancerSpec{
		{Cluster: k, Image: "lb", Network: "mine", HostPort: 443},
		{Cluster: k, Image: "alpine:3", Network: "mine"},
	} {
		if _, err := m.EnsureLoadBalancer(ctx, spec); !policy.IsRefused(err) {
			t.Errorf("load balancer %+v: %v, want a refusal", spec, err)
		}
	}
	if lb, err := m.FindLoadBalancer(ctx, k); err != nil || lb != nil {
		t.Errorf("a refused load balancer exists: %v (%v)", lb, err)
	}

	// Images into nodes: only the namespace's own, checked before anything is copied.
	before := rt.CallCount("Exec")
	err = node.LoadImages(ctx, []string{"localhost/team-a/app:dev", "localhost/dockyard/manager:v0.1.0"}, nil)
	if !policy.IsRefused(err) || !strings.Contains(err.Error(), policy.LoadImageRepositoriesFlag) {
		t.Errorf("loading the manager's image: %v", err)
	}
	if n := rt.CallCount("Exec") - before; n != 0 {
		t.Errorf("%d commands ran in the node for a refused load", n)
	}
}
