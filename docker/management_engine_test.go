package docker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// A management node joined to clusters' networks keeps sending what has no route of its own (a
// Service's cluster IP here) through its own network, from its own address, while on them and
// after leaving them, and can still join more. Docker gives the default route to the network
// first by name: the node's own network is named to sort after the clusters' (as kind's "kind"
// sorts after "dockyard-…"), and the second cluster's network before the first's, so Docker
// moves its default route at each join and leave.
func TestManagementNodeKeepsItsOwnRoutesOnTheEngine(t *testing.T) {
	rt := dockerenv.Engine(t)
	dockerenv.RequireImages(t, rt, dockerenv.NodeImage())
	ctx := context.Background()
	// Made first, so it is removed after the node and the clusters.
	home := userNetwork(t, rt, "zz-dockyard-test-home-")
	id := strings.TrimPrefix(home, "zz-dockyard-test-home-")
	node := "dockyard-test-mgmt-" + id
	_, _, key := engineCluster(t)
	labels := map[string]string{kindClusterLabel: "mgmt-" + id, kindRoleLabel: string(RoleControlPlane)}
	if err := rt.CreateContainer(ctx, container.ContainerSpec{
		Name: node, Image: dockerenv.NodeImage(), Labels: labels, Network: home,
		Entrypoint: []string{"sleep"}, Cmd: []string{"infinity"}, Security: container.SecuritySpec{CapAdd: []string{"NET_ADMIN"}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.RemoveContainer(context.Background(), node); err != nil {
			t.Errorf("removing %s: %v", node, err)
		}
	})
	if err := rt.StartContainer(ctx, node); err != nil {
		t.Fatal(err)
	}
	m := NewManager(rt, ManagerOptions{ManagementNodes: map[string]string{kindClusterLabel: "mgmt-" + id}})

	c, err := rt.InspectContainer(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	own := c.Networks[home].IPv4
	route := func(when string) {
		t.Helper()
		var out bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		code, err := rt.Exec(cctx, node, container.ExecOptions{Cmd: []string{"ip", "-4", "route", "get", "10.96.0.1"}, Stdout: &out, Stderr: &out})
		if err != nil || code != 0 {
			t.Fatalf("%s: ip route get: code %d, %v: %s", when, code, err, out.String())
		}
		if got := out.String(); !strings.Contains(got, " dev eth0 ") || !strings.Contains(got, " src "+own+" ") {
			t.Errorf("%s: a cluster IP goes %q, want through eth0 from %s (the node's own network)", when, strings.TrimSpace(got), own)
		}
	}

	_, _, key2 := engineCluster(t)
	if DefaultNetworkName(key2) > DefaultNetworkName(key) {
		key, key2 = key2, key
	}
	for _, k := range []ClusterKey{key, key2} {
		network := DefaultNetworkName(k)
		if _, err := m.EnsureNetwork(ctx, k, network); err != nil {
			t.Fatal(err)
		}
		if c, err = rt.InspectContainer(ctx, node); err != nil {
			t.Fatal(err)
		}
		ep, on := c.Networks[network]
		if !on {
			t.Fatalf("management node not connected to %s: %v", network, c.Networks)
		}
		var out bytes.Buffer
		if code, err := rt.Exec(ctx, node, container.ExecOptions{Cmd: []string{"ip", "-4", "-o", "addr"}, Stdout: &out}); err != nil || code != 0 {
			t.Fatalf("ip addr: code %d, %v", code, err)
		}
		if !strings.Contains(out.String(), " "+ep.IPv4+"/") {
			t.Fatalf("the engine reports %s on %s, the node has no such address:\n%s", ep.IPv4, network, out.String())
		}
		route("on " + network)
	}
	for _, k := range []ClusterKey{key2, key} {
		if err := m.DeleteCluster(ctx, k, DefaultNetworkName(k)); err != nil {
			t.Fatal(err)
		}
		route("after " + DefaultNetworkName(k) + " went")
	}
}
