package docker

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// A load balancer keeps its host port on the engine: created without one, it is pinned to the
// port the engine picked, so after a kill (the engine's restart policy leaves a killed
// container stopped; Dockyard starts it) and after a removal it is published there again. A
// kept port that a process of the host holds when the load balancer is created gives a load
// balancer on a port the engine picks, and the next creation, once the port is free, gets it
// back.
func TestLoadBalancerKeepsItsHostPortOnTheEngine(t *testing.T) {
	m, rt, key := engineCluster(t)
	ctx := context.Background()
	dockerenv.RequireImages(t, rt, dockerenv.LoadBalancerImage())
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	spec := LoadBalancerSpec{Cluster: key, Image: dockerenv.LoadBalancerImage(), Network: network}
	ensure := func() (*LoadBalancer, int) {
		t.Helper()
		lb, err := m.EnsureLoadBalancer(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if !lb.Running {
			t.Fatalf("load balancer %s is %s", lb.Name, lb.State)
		}
		hostIP, port := lb.PublishedPort(APIServerPort)
		if hostIP != "127.0.0.1" || port == 0 {
			t.Fatalf("load balancer published on %s:%d, want a port of 127.0.0.1", hostIP, port)
		}
		return lb, port
	}
	lb, kept := ensure()
	spec.HostPort = kept // what the reconciler writes into spec.loadBalancer.hostPort

	kill := func() {
		t.Helper()
		if err := rt.SignalContainer(ctx, lb.Name, "SIGKILL"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the load balancer stopped", func() error {
			c, err := rt.InspectContainer(ctx, lb.Name)
			if err != nil {
				return err
			}
			if c.Running {
				return errors.Errorf("still %s", c.State)
			}
			return nil
		})
	}
	kill()
	if lb, got := ensure(); got != kept || lb.TakenHostPort != 0 {
		t.Fatalf("after a kill the load balancer is published on %d (taken port %d), want %d", got, lb.TakenHostPort, kept)
	}

	if err := rt.RemoveContainer(ctx, lb.Name); err != nil {
		t.Fatal(err)
	}
	if _, got := ensure(); got != kept {
		t.Fatalf("after a removal the load balancer is published on %d, want %d", got, kept)
	}

	// A process of the engine's host takes the port while the load balancer is gone.
	if err := rt.RemoveContainer(ctx, lb.Name); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", kept))
	if err != nil {
		t.Fatalf("holding the load balancer's port: %v", err)
	}
	defer l.Close()
	lb, got := ensure()
	if got == kept || lb.TakenHostPort != kept {
		t.Fatalf("with %d taken the load balancer is published on %d (taken port %d), want another port and %d reported taken", kept, got, lb.TakenHostPort, kept)
	}

	// Freed, the port is the load balancer's again at its next creation.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	kill()
	if lb, got := ensure(); got != kept || lb.TakenHostPort != 0 {
		t.Fatalf("once the port is free the load balancer is published on %d (taken port %d), want %d back", got, lb.TakenHostPort, kept)
	}
}
