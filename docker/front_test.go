package docker

import (
	"context"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

// balancingEngine is the fake engine with fronts, as Kubernetes has them (Services), and
// networks without subnets (NetworkPolicies), whose specs it keeps.
type balancingEngine struct {
	*fake.Runtime
	fronts map[string]container.FrontSpec
	// pending, when set, is why fronts have no address yet.
	pending  string
	networks map[string]container.NetworkSpec
}

func (b *balancingEngine) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	if b.networks == nil {
		b.networks = map[string]container.NetworkSpec{}
	}
	b.networks[spec.Name] = spec
	return b.Runtime.CreateNetwork(ctx, spec)
}

func (b *balancingEngine) InspectNetwork(ctx context.Context, name string) (*container.Network, error) {
	n, err := b.Runtime.InspectNetwork(ctx, name)
	if n != nil {
		n.Subnets, n.Gateways = nil, nil
	}
	return n, err
}

func (b *balancingEngine) EnsureFront(_ context.Context, spec container.FrontSpec) (*container.Front, error) {
	if _, ok := b.fronts[spec.Name]; !ok {
		b.fronts[spec.Name] = spec
	}
	return b.front(spec.Name), nil
}

func (b *balancingEngine) front(name string) *container.Front {
	s := b.fronts[name]
	if b.pending != "" {
		return &container.Front{Name: name, Labels: s.Labels, Pending: b.pending, Port: s.Port, NodePort: 30001}
	}
	return &container.Front{Name: name, Labels: s.Labels, Address: "10.96.0.10", Port: s.Port, NodePort: 30001}
}

func (b *balancingEngine) InspectFront(_ context.Context, name string) (*container.Front, error) {
	if _, ok := b.fronts[name]; !ok {
		return nil, container.ErrNotFound
	}
	return b.front(name), nil
}

func (b *balancingEngine) FrontHosts(context.Context) ([]string, error) {
	return []string{"172.18.0.2"}, nil
}

func (b *balancingEngine) RemoveFront(_ context.Context, name string) error {
	delete(b.fronts, name)
	return nil
}

// On an engine that balances traffic itself, a cluster's load balancer is the engine's front in
// front of its control plane nodes: the handle the cluster controller gets runs and answers on
// the front's address on the cluster's network, selects the control plane nodes on the API
// server's port, has nothing to update, publishes nothing on a host, and goes with the cluster;
// control plane nodes say when they serve (their ready port).
func TestTheLoadBalancerIsTheEnginesFront(t *testing.T) {
	ctx := context.Background()
	engine := &balancingEngine{Runtime: fake.New("node:v1"), fronts: map[string]container.FrontSpec{}}
	m := NewManager(engine, ManagerOptions{})
	k := ClusterKey{Namespace: "team-a", Name: "pods"}
	network := DefaultNetworkName(k)
	if _, err := m.EnsureNetwork(ctx, k, network); err != nil {
		t.Fatal(err)
	}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb:v1", Network: network, Port: 443})
	if err != nil {
		t.Fatal(err)
	}
	if !lb.Running() || lb.Address(network) != "10.96.0.10" {
		t.Errorf("the front's handle: running %v, address %q", lb.Running(), lb.Address(network))
	}
	if _, port := lb.PublishedPort(443); port != 0 {
		t.Errorf("a front publishes port %d on a host", port)
	}
	if hosts, port, err := lb.NodePort(ctx); err != nil || port != 30001 || len(hosts) != 1 {
		t.Errorf("where the front answers from outside: %v port %d %v", hosts, port, err)
	}
	spec := engine.fronts[LoadBalancerName(k)]
	if spec.Port != 443 || spec.TargetPort != APIServerPort || !container.MatchLabels(k.labels(RoleControlPlane), spec.Select) || len(spec.Select) != len(k.labels(RoleControlPlane)) {
		t.Errorf("the front %+v, want port 443 to the control plane nodes' %d", spec, APIServerPort)
	}
	if changed, err := lb.Update(ctx, "unused", func(context.Context) ([]haproxy.Backend, error) { return nil, nil }); changed || err != nil {
		t.Errorf("updating a front: %v %v", changed, err)
	}
	if cs, _ := engine.ListContainers(ctx, k.ClusterLabels()); len(cs) != 0 {
		t.Errorf("a load balancer container was made beside the front: %+v", cs)
	}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: k, Machine: "cp", Image: "node:v1", Role: RoleControlPlane, Network: network, FailureDomain: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if found, _ := m.FindLoadBalancer(ctx, k); found == nil || found.Address("") != "10.96.0.10" {
		t.Errorf("finding the front: %+v", found)
	}
	var created container.ContainerSpec
	engine.WithContainer(node.Name, func(c *fake.Container) { created = c.Spec })
	if created.ReadyPort != APIServerPort || created.Zone != "b" || len(created.SpreadFrom) == 0 || !container.MatchLabels(created.Labels, created.SpreadFrom) {
		t.Errorf("the control plane node's spec: ready port %d, zone %q, spread from %v", created.ReadyPort, created.Zone, created.SpreadFrom)
	}
	if len(created.Ports) != 0 {
		t.Errorf("a control plane node behind the engine's front publishes %+v", created.Ports)
	}
	if n := engine.networks[network]; len(n.OpenPorts) != 1 || n.OpenPorts[0] != APIServerPort || n.Subnet != "" {
		t.Errorf("the cluster's network %+v: want no subnet, and only the API server's port open to other networks", n)
	}
	if err := m.DeleteCluster(ctx, k, network); err != nil {
		t.Fatal(err)
	}
	if len(engine.fronts) != 0 {
		t.Errorf("fronts left after the cluster: %v", engine.fronts)
	}
}

// A front the engine has not given an address yet (a Service of type LoadBalancer waiting for
// its ingress) is a load balancer without an address that says why; once it has one, it says
// nothing more.
func TestAFrontWithoutAnAddressSaysWhy(t *testing.T) {
	ctx := context.Background()
	engine := &balancingEngine{Runtime: fake.New("node:v1"), fronts: map[string]container.FrontSpec{}, pending: "no ingress yet"}
	m := NewManager(engine, ManagerOptions{})
	k := ClusterKey{Namespace: "team-a", Name: "elsewhere"}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb:v1", Network: DefaultNetworkName(k), Port: 6443})
	if err != nil {
		t.Fatal(err)
	}
	if lb.Address("") != "" || lb.Pending() != "no ingress yet" {
		t.Errorf("a front without an address: %q, pending %q", lb.Address(""), lb.Pending())
	}
	engine.pending = ""
	if lb, err = m.FindLoadBalancer(ctx, k); err != nil || lb.Address("") != "10.96.0.10" || lb.Pending() != "" {
		t.Errorf("the front once it has an address: %+v %v", lb, err)
	}
	if (*LoadBalancer)(nil).Pending() != "" {
		t.Error("no load balancer is pending")
	}
}
