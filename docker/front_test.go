package docker

import (
	"context"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

// On an engine that balances traffic itself, a cluster's load balancer is the engine's front in
// front of its control plane nodes: the handle the cluster controller gets runs and answers on
// the front's address on the cluster's network, selects the control plane nodes on the API
// server's port, has nothing to update, publishes nothing on a host, and goes with the cluster;
// control plane nodes say when they serve (their ready port).
func TestTheLoadBalancerIsTheEnginesFront(t *testing.T) {
	ctx := context.Background()
	engine := inmemory.NewBalancing(inmemory.New("node:v1"))
	m := NewManager(engine, ManagerOptions{})
	k := ClusterKey{Namespace: "team-a", Name: "pods"}
	network := DefaultNetworkName(k)
	if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb:v1", Network: network, Port: 443})
	if err != nil {
		t.Fatal(err)
	}
	if !lb.Running || lb.Address(network) != "10.96.0.10" {
		t.Errorf("the front's handle: running %v, address %q", lb.Running, lb.Address(network))
	}
	if _, port := lb.PublishedPort(443); port != 0 {
		t.Errorf("a front publishes port %d on a host", port)
	}
	if hosts, port, err := lb.NodePort(ctx); err != nil || port != 30001 || len(hosts) != 1 {
		t.Errorf("where the front answers from outside: %v port %d %v", hosts, port, err)
	}
	spec := engine.Fronts()[LoadBalancerName(k)]
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
	engine.WithContainer(node.Name, func(c *inmemory.Container) { created = c.Spec })
	if created.ReadyPort != APIServerPort || created.Zone != "b" || len(created.SpreadFrom) == 0 || !container.MatchLabels(created.Labels, created.SpreadFrom) {
		t.Errorf("the control plane node's spec: ready port %d, zone %q, spread from %v", created.ReadyPort, created.Zone, created.SpreadFrom)
	}
	if len(created.Ports) != 0 {
		t.Errorf("a control plane node behind the engine's front publishes %+v", created.Ports)
	}
	if n := engine.NetworkSpec(network); len(n.OpenPorts) != 1 || n.OpenPorts[0] != APIServerPort || n.Subnet != "" {
		t.Errorf("the cluster's network %+v: want no subnet, and only the API server's port open to other networks", n)
	}
	if err := m.DeleteCluster(ctx, k, network); err != nil {
		t.Fatal(err)
	}
	if fronts := engine.Fronts(); len(fronts) != 0 {
		t.Errorf("fronts left after the cluster: %v", fronts)
	}
}

// A front the engine has not given an address yet (a Service of type LoadBalancer waiting for
// its ingress) is a load balancer without an address that says why; once it has one, it says
// nothing more.
func TestAFrontWithoutAnAddressSaysWhy(t *testing.T) {
	ctx := context.Background()
	engine := inmemory.NewBalancing(inmemory.New("node:v1"))
	engine.SetPending("no ingress yet")
	m := NewManager(engine, ManagerOptions{})
	k := ClusterKey{Namespace: "team-a", Name: "elsewhere"}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb:v1", Network: DefaultNetworkName(k), Port: 6443})
	if err != nil {
		t.Fatal(err)
	}
	if lb.Address("") != "" || lb.Pending != "no ingress yet" {
		t.Errorf("a front without an address: %q, pending %q", lb.Address(""), lb.Pending)
	}
	engine.SetPending("")
	if lb, err = m.FindLoadBalancer(ctx, k); err != nil || lb.Address("") != "10.96.0.10" || lb.Pending != "" {
		t.Errorf("the front once it has an address: %+v %v", lb, err)
	}
}
