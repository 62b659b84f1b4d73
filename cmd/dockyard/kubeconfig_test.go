package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// The host kubeconfig names the port the load balancer publishes now, as the engine says,
// and warns when that is not the port kept in spec.loadBalancer.hostPort (taken when the load
// balancer was last created), which the kubeconfig written at creation names.
func TestHostServerIsThePortTheEnginePublishes(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb")
	nodes := docker.NewManager(rt, docker.ManagerOptions{})
	ref := clusterRef{Namespace: "default", Name: "dev"}
	network := docker.DefaultNetworkName(ref.key())
	if _, err := nodes.EnsureNetwork(ctx, ref.key(), docker.NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	const kept = 16443
	dc := &infrav1.DockyardCluster{Spec: infrav1.DockyardClusterSpec{LoadBalancer: infrav1.LoadBalancerSpec{HostPort: kept}}}
	dc.Spec.ControlPlaneEndpoint.Port = 6443
	spec := docker.LoadBalancerSpec{Cluster: ref.key(), Image: "lb", Network: network, HostPort: kept}

	lb, err := nodes.EnsureLoadBalancer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	server, warning, err := hostServer(ref, dc, lb)
	if err != nil || server != "https://127.0.0.1:16443" || warning != "" {
		t.Errorf("on the kept port: server %q, warning %q, error %v", server, warning, err)
	}

	// The load balancer is created again while a container holds the kept port.
	if err := rt.RemoveContainer(ctx, lb.Name); err != nil {
		t.Fatal(err)
	}
	holder := container.ContainerSpec{Name: "holder", Image: "lb",
		Ports: []container.PortMapping{{ContainerPort: 80, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: kept}}}
	if err := rt.CreateContainer(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	if lb, err = nodes.EnsureLoadBalancer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	_, published := lb.PublishedPort(6443)
	server, warning, err = hostServer(ref, dc, lb)
	if err != nil || published == kept || server != "https://127.0.0.1:"+strconv.Itoa(published) {
		t.Fatalf("with the kept port taken: server %q (published on %d), error %v", server, published, err)
	}
	for _, want := range []string{"127.0.0.1:" + strconv.Itoa(published), "kept port 16443", "written when the cluster was created"} {
		if !strings.Contains(warning, want) {
			t.Errorf("warning %q does not say %q", warning, want)
		}
	}
}
