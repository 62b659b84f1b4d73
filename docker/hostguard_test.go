package docker

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// hostRuns records the runs of the host's scripts on a fake engine: each run's arguments, and
// the helper container it ran in.
type hostRuns struct {
	guard   [][]string
	helpers []container.ContainerSpec
	// fail makes host-guard.sh exit 1; routes is what host-routes.sh prints.
	fail   bool
	routes string
}

func (h *hostRuns) exec(_ context.Context, c *inmemory.Container, opts container.ExecOptions) (int, error) {
	if len(opts.Cmd) < 4 || opts.Cmd[0] != "sh" {
		return 0, nil
	}
	switch opts.Cmd[3] {
	case "host-guard.sh":
		h.guard = append(h.guard, opts.Cmd[4:])
		h.helpers = append(h.helpers, c.Spec)
		if h.fail {
			_, _ = opts.Stderr.Write([]byte("iptables-restore: line 3 failed\n"))
			return 1, nil
		}
	case "host-routes.sh":
		_, _ = opts.Stdout.Write([]byte(h.routes))
	}
	return 0, nil
}

// The engine's host is kept from answering the networks made for workload clusters: once a
// node on the engine lends the helper its image, host-guard.sh runs on the host's network with
// NET_ADMIN, with the ports the administrator opened and every workload bridge; again when a
// network is made or removed, not at every check of a network; never when the guard is off.
// The helper does not outlive its run, and a failed run is an error of the network.
func TestTheEnginesHostIsGuardedFromWorkloadNetworks(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node:v1")
	runs := &hostRuns{}
	rt.SetExec(runs.exec)
	m := NewManager(rt, ManagerOptions{GuardHost: true, HostPortsOpenToWorkloads: []int{8080}})
	a := ClusterKey{Namespace: "team-a", Name: "a"}
	b := ClusterKey{Namespace: "team-b", Name: "b"}
	bridge := func(k ClusterKey) string {
		t.Helper()
		n, err := rt.InspectNetwork(ctx, DefaultNetworkName(k))
		if err != nil {
			t.Fatal(err)
		}
		return n.Interface
	}
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	if len(runs.guard) != 0 {
		t.Fatalf("the host was guarded with no node on the engine to lend the helper its image: %q", runs.guard)
	}
	if _, err := m.AddNode(ctx, NodeSpec{Cluster: a, Machine: "a-cp", Image: "node:v1", Role: RoleControlPlane, Network: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	want := func(when string, times int, bridges ...string) {
		t.Helper()
		if len(runs.guard) != times {
			t.Fatalf("%s: host-guard.sh ran %d times, want %d", when, len(runs.guard), times)
		}
		last := runs.guard[len(runs.guard)-1]
		if w := append([]string{"-o", "8080"}, slices.Sorted(slices.Values(bridges))...); !slices.Equal(last, w) {
			t.Errorf("%s: host-guard.sh %q, want %q", when, last, w)
		}
	}
	want("the first node", 1, bridge(a))
	helper := runs.helpers[0]
	if helper.Network != container.HostNetwork || helper.Image != "node:v1" || !slices.Contains(helper.Security.CapAdd, "NET_ADMIN") || helper.Security.Privileged {
		t.Errorf("the helper: network %q, image %q, security %+v; want the host's network, a node's image, NET_ADMIN and no privilege",
			helper.Network, helper.Image, helper.Security)
	}
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureNetwork(ctx, b, NetworkSpec{Name: DefaultNetworkName(b)}); err != nil {
		t.Fatal(err)
	}
	want("a second network", 2, bridge(a), bridge(b))
	if err := m.DeleteCluster(ctx, b, DefaultNetworkName(b)); err != nil {
		t.Fatal(err)
	}
	want("the second network removed", 3, bridge(a))
	if left, err := rt.ListContainers(ctx, map[string]string{hostHelperLabel: ""}); err != nil || len(left) != 0 {
		t.Errorf("helper containers left: %v (%v)", left, err)
	}

	runs.fail = true
	c := ClusterKey{Namespace: "team-c", Name: "c"}
	_, err := m.EnsureNetwork(ctx, c, NetworkSpec{Name: DefaultNetworkName(c)})
	if err == nil || !strings.Contains(err.Error(), "keeping the engine's host from answering workload networks") || !strings.Contains(err.Error(), "iptables-restore") {
		t.Errorf("a failed run: %v, want an error saying what failed", err)
	}

	off := &hostRuns{}
	rt.SetExec(off.exec)
	unguarded := NewManager(rt, ManagerOptions{})
	d := ClusterKey{Namespace: "team-d", Name: "d"}
	if _, err := unguarded.EnsureNetwork(ctx, d, NetworkSpec{Name: DefaultNetworkName(d)}); err != nil {
		t.Fatal(err)
	}
	if len(off.guard) != 0 {
		t.Errorf("the guard ran with GuardHost false: %q", off.guard)
	}
}

// Deleting the last cluster deletes its nodes before its network: with no node left to lend the
// helper its image, the guard still runs with the image its last run used, while the engine has
// it, so no rule for a removed bridge stays on the host.
func TestTheLastNetworkRemovedTakesItsRulesOffTheHost(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node:v1")
	runs := &hostRuns{}
	rt.SetExec(runs.exec)
	m := NewManager(rt, ManagerOptions{GuardHost: true})
	a := ClusterKey{Namespace: "team-a", Name: "a"}
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddNode(ctx, NodeSpec{Cluster: a, Machine: "a-cp", Image: "node:v1", Role: RoleControlPlane, Network: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	if len(runs.guard) != 1 || len(runs.guard[0]) != 1 {
		t.Fatalf("host-guard.sh runs %q, want one with the cluster's bridge", runs.guard)
	}
	if err := m.DeleteCluster(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatal(err)
	}
	if len(runs.guard) != 2 || len(runs.guard[1]) != 0 {
		t.Fatalf("host-guard.sh runs %q, want a second with no bridge (the chain removed)", runs.guard)
	}
	if runs.helpers[1].Image != "node:v1" {
		t.Errorf("the last helper ran %q, want the node image of the run before", runs.helpers[1].Image)
	}

	// An image the engine no longer has is not used: nothing is left to guard against either.
	b := ClusterKey{Namespace: "team-b", Name: "b"}
	if _, err := m.EnsureNetwork(ctx, b, NetworkSpec{Name: DefaultNetworkName(b)}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddNode(ctx, NodeSpec{Cluster: b, Machine: "b-cp", Image: "node:v1", Role: RoleControlPlane, Network: DefaultNetworkName(b)}); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteNode(ctx, b, "b-cp"); err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveImage(ctx, "node:v1"); err != nil {
		t.Fatal(err)
	}
	runs.guard = nil
	if err := m.DeleteCluster(ctx, b, DefaultNetworkName(b)); err != nil {
		t.Fatalf("deleting a cluster when no image is left for the helper: %v", err)
	}
	if len(runs.guard) != 0 {
		t.Errorf("host-guard.sh ran %q with an image the engine no longer has", runs.guard)
	}
}

// A subnet a cluster asks for must not overlap the host's own routes, read on the host (a
// manager in a pod sees its pod's routes only): default routes and special-purpose ranges are
// not in the way.
func TestAskedSubnetsMustNotOverlapTheHostsRoutes(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node:v1")
	runs := &hostRuns{routes: "default\n192.168.77.0/24\n10.20.30.40\n169.254.0.0/16\nfe80::/64\n"}
	rt.SetExec(runs.exec)
	m := NewManager(rt, ManagerOptions{Policy: testPolicy(t)})
	first := ClusterKey{Namespace: "ns", Name: "first"}
	if _, err := m.AddNode(ctx, NodeSpec{Cluster: first, Machine: "n", Image: "node:v1", Role: RoleWorker, Network: "none"}); err != nil {
		t.Fatal(err)
	}
	routes, err := m.HostRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := []netip.Prefix{netip.MustParsePrefix("192.168.77.0/24"), netip.MustParsePrefix("10.20.30.40/32")}; !slices.Equal(routes, w) {
		t.Errorf("the host's routes: %v, want %v", routes, w)
	}
	k := ClusterKey{Namespace: "ns", Name: "lan"}
	_, err = m.EnsureNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k), Subnets: []string{"192.168.77.0/25"}})
	if err == nil || !strings.Contains(err.Error(), "192.168.77.0/24") {
		t.Errorf("a subnet inside the host's LAN: %v, want a refusal naming the route", err)
	}
	if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k), Subnets: []string{"192.168.78.0/24"}}); err != nil {
		t.Errorf("a subnet beside the host's routes: %v", err)
	}
}
