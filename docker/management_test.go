package docker

import (
	"context"
	"slices"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

// startFake creates and starts a container of the fake engine on a network.
func startFake(t *testing.T, rt *fake.Runtime, name, network string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	if _, err := rt.InspectNetwork(ctx, network); container.IsNotFound(err) {
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.CreateContainer(ctx, container.ContainerSpec{Name: name, Image: "img", Network: network, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
}

func TestManagementSelectorFollowsTheNodeTheManagerRunsOn(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("img")
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "control-plane"})
	startFake(t, rt, "mgmt-md-0-abc", "dockyard-default-mgmt", map[string]string{
		clusterLabel: "default/mgmt", kindClusterLabel: "mgmt", kindRoleLabel: "worker",
	})
	startFake(t, rt, "stranger", "bridge", nil)

	for _, tc := range []struct {
		node    string
		want    map[string]string
		wantErr bool
	}{
		{node: "", want: nil},
		{node: "not-a-container", want: nil},
		{node: "kind-control-plane", want: map[string]string{kindClusterLabel: "kind"}},
		// Dockyard's label is exact (namespace and name); kind's holds only the name.
		{node: "mgmt-md-0-abc", want: map[string]string{clusterLabel: "default/mgmt"}},
		{node: "stranger", wantErr: true},
	} {
		got, err := ManagementSelector(ctx, rt, tc.node)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.node, err, tc.wantErr)
		}
		if len(got) != len(tc.want) || (len(got) > 0 && got[clusterLabel] != tc.want[clusterLabel]) ||
			(len(got) > 0 && got[kindClusterLabel] != tc.want[kindClusterLabel]) {
			t.Errorf("%q: selector %v, want %v", tc.node, got, tc.want)
		}
	}
}

func TestManagementNodesJoinEveryClusterNetworkAndLeaveItOnDelete(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("img")
	kind := map[string]string{kindClusterLabel: "kind"}
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "control-plane"})
	startFake(t, rt, "kind-worker", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "worker"})
	startFake(t, rt, "kind-external-load-balancer", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "external-load-balancer"})
	m := NewManager(rt, ManagerOptions{ManagementNodes: kind})
	if !m.HasManagementNodes() {
		t.Fatal("HasManagementNodes: false with a selector")
	}

	a := ClusterKey{Namespace: "ns", Name: "a"}
	b := ClusterKey{Namespace: "ns", Name: "b"}
	for _, k := range []ClusterKey{a, b} {
		n, err := m.ensureClusterNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k)})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"kind-control-plane", "kind-worker"}
		if !slices.Equal(n.Containers, want) {
			t.Errorf("network %s has %v, want the management nodes %v (load balancer left out)", n.Name, n.Containers, want)
		}
	}
	// A second pass changes nothing.
	calls := rt.Calls["ConnectNetwork"]
	if _, err := m.EnsureNetwork(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatal(err)
	}
	if rt.Calls["ConnectNetwork"] != calls {
		t.Errorf("EnsureNetwork connected again nodes already on the network")
	}

	// A workload node of cluster a is on a's network only: clusters stay isolated.
	startFake(t, rt, "a-node", DefaultNetworkName(a), a.MachineLabels("node"))
	c, _ := rt.InspectContainer(ctx, "a-node")
	if _, ok := c.Networks[DefaultNetworkName(b)]; ok {
		t.Errorf("a workload node joined another cluster's network: %v", c.Networks)
	}

	if err := m.DeleteCluster(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatalf("deleting a cluster whose network management nodes joined: %v", err)
	}
	if _, err := rt.InspectNetwork(ctx, DefaultNetworkName(a)); !container.IsNotFound(err) {
		t.Errorf("network of the deleted cluster: %v, want it removed", err)
	}
	nb, _ := rt.InspectNetwork(ctx, DefaultNetworkName(b))
	if !slices.Contains(nb.Containers, "kind-worker") {
		t.Errorf("deleting cluster a took the management nodes off b's network: %v", nb.Containers)
	}
}

func TestWithoutManagementNodesNetworksAreLeftAlone(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("img")
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind"})
	m := NewManager(rt, ManagerOptions{})
	k := ClusterKey{Namespace: "ns", Name: "a"}
	n, err := m.ensureClusterNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k)})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Containers) != 0 || rt.Calls["ConnectNetwork"] != 0 {
		t.Errorf("no selector, yet the network has %v", n.Containers)
	}
}

// The routes script runs on a management node when it joins or leaves a cluster network and
// the first time the manager sees it, not at every check of a network it is on already.
func TestManagementNodeRoutesAreKeptOnJoinLeaveAndFirstSight(t *testing.T) {
	ctx := context.Background()
	rt := fake.New("img")
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "control-plane"})
	var runs [][]string // the gateways each run was given
	rt.SetExec(func(_ context.Context, c *fake.Container, opts container.ExecOptions) (int, error) {
		if len(opts.Cmd) > 3 && opts.Cmd[2] == ownRoutesScript && c.Spec.Name == "kind-control-plane" {
			runs = append(runs, opts.Cmd[4:])
		}
		return 0, nil
	})
	kind := map[string]string{kindClusterLabel: "kind"}
	a := ClusterKey{Namespace: "ns", Name: "a"}
	gateways := func(networks ...string) []string {
		var gws []string
		for _, name := range networks {
			n, err := rt.InspectNetwork(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			gws = append(gws, n.Gateways...)
		}
		slices.Sort(gws)
		return gws
	}
	check := func(when string, want int, networks ...string) {
		t.Helper()
		if len(runs) != want {
			t.Fatalf("%s: the routes script ran %d times, want %d", when, len(runs), want)
		}
		if want == 0 {
			return
		}
		got := slices.Clone(runs[len(runs)-1])
		slices.Sort(got)
		if wantGWs := gateways(networks...); !slices.Equal(got, wantGWs) {
			t.Errorf("%s: the routes script got gateways %v, want those of %v: %v", when, got, networks, wantGWs)
		}
	}

	m := NewManager(rt, ManagerOptions{ManagementNodes: kind})
	if _, err := m.ensureClusterNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	check("joined", 1, "kind", DefaultNetworkName(a))
	if _, err := m.ensureClusterNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	check("checked again", 1, "kind", DefaultNetworkName(a))

	// A manager that restarted has not seen the node yet.
	m = NewManager(rt, ManagerOptions{ManagementNodes: kind})
	if _, err := m.ensureClusterNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	check("first sight", 2, "kind", DefaultNetworkName(a))

	if err := m.DeleteCluster(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatal(err)
	}
	check("left", 3, "kind")
}
