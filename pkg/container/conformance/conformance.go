// Package conformance holds behaviour every container.Runtime must share, written once and run
// against each implementation: the real engines in their engine tests and the fake in its unit
// tests, so a fake never promises what an engine does not do. Only tests import it.
package conformance

import (
	"context"
	"slices"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Subject is a runtime under test and how to run a long-lived container on it.
type Subject struct {
	Runtime container.Runtime
	// Image the engine has locally; Entrypoint and Cmd keep a container of it running.
	Image      string
	Entrypoint []string
	Cmd        []string
	// Labels go on everything the suite creates, so the caller can sweep it away.
	Labels map[string]string
	// Prefix starts every name the suite uses.
	Prefix string
}

// NetworkAttachments checks ConnectNetwork and DisconnectNetwork: a container joins a second
// network with an address there, joining twice or leaving twice is not an error, and an
// unknown container or network is ErrNotFound when connecting but not when disconnecting.
func NetworkAttachments(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	first, second, name := s.Prefix+"-net-a", s.Prefix+"-net-b", s.Prefix+"-attach"
	for _, n := range []string{first, second} {
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: n, Labels: s.Labels}); err != nil {
			t.Fatal(err)
		}
	}
	spec := container.ContainerSpec{
		Name: name, Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd, Labels: s.Labels, Network: first,
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}

	for range 2 { // connecting twice is not an error
		if err := rt.ConnectNetwork(ctx, second, name); err != nil {
			t.Fatalf("connecting %s to %s: %v", name, second, err)
		}
	}
	requireAttached(ctx, t, rt, second, name, true)
	requireAttached(ctx, t, rt, first, name, true)

	if err := rt.ConnectNetwork(ctx, second, s.Prefix+"-missing"); !container.IsNotFound(err) {
		t.Errorf("connecting a missing container: want ErrNotFound, got %v", err)
	}
	if err := rt.ConnectNetwork(ctx, s.Prefix+"-missing-net", name); !container.IsNotFound(err) {
		t.Errorf("connecting to a missing network: want ErrNotFound, got %v", err)
	}

	for range 2 { // leaving twice is not an error
		if err := rt.DisconnectNetwork(ctx, second, name); err != nil {
			t.Fatalf("disconnecting %s from %s: %v", name, second, err)
		}
	}
	requireAttached(ctx, t, rt, second, name, false)
	requireAttached(ctx, t, rt, first, name, true)
	if err := rt.DisconnectNetwork(ctx, second, s.Prefix+"-missing"); err != nil {
		t.Errorf("disconnecting a missing container: %v", err)
	}
	if err := rt.RemoveNetwork(ctx, second); err != nil {
		t.Errorf("removing the network the container left: %v", err)
	}
}

func requireAttached(ctx context.Context, t *testing.T, rt container.Runtime, network, name string, want bool) {
	t.Helper()
	c, err := rt.InspectContainer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := c.Networks[network]
	if ok != want {
		t.Fatalf("container %s on network %s: %v, want %v (networks %v)", name, network, ok, want, c.Networks)
	}
	if want && ep.IPv4 == "" && ep.IPv6 == "" {
		t.Errorf("container %s has no address on %s: %+v", name, network, ep)
	}
	n, err := rt.InspectNetwork(ctx, network)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Contains(n.Containers, name); got != want {
		t.Errorf("network %s lists %v; %s attached: %v, want %v", network, n.Containers, name, got, want)
	}
}
