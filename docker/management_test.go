package docker

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// startFake creates and starts a container of the fake engine on a network.
func startFake(t *testing.T, rt *inmemory.Runtime, name, network string, labels map[string]string) {
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
	rt := inmemory.New("img")
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "control-plane"})
	startFake(t, rt, "mgmt-md-0-abc", "dockyard-default-mgmt", map[string]string{
		clusterLabel: "default/mgmt", kindClusterLabel: "mgmt", kindRoleLabel: "worker",
	})
	startFake(t, rt, "stranger", "bridge", nil)
	// A node of a Dockyard cluster (a cluster Dockyard made hosts the manager): its container is
	// <node>.<namespace>.
	startFake(t, rt, "team-md-0-xyz.team-a", "dockyard-team.team-a", map[string]string{
		clusterLabel: "team-a/team", kindClusterLabel: "team.team-a", kindRoleLabel: "worker",
	})
	// Two namespaces with a node of one name: which one the manager runs on is not known.
	for _, ns := range []string{"b1", "b2"} {
		startFake(t, rt, "twin-cp."+ns, "dockyard-twin."+ns, map[string]string{clusterLabel: ns + "/twin", kindRoleLabel: "control-plane"})
	}

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
		{node: "team-md-0-xyz", want: map[string]string{clusterLabel: "team-a/team"}},
		{node: "team-md-0", want: nil},
		{node: "twin-cp", wantErr: true},
	} {
		got, err := NewManager(rt, ManagerOptions{}).ManagementSelector(ctx, tc.node)
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
	rt := inmemory.New("img")
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
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
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
	rt := inmemory.New("img")
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

// The scripts that follow a management node's networks (isolate.sh with the subnets of its
// workload networks, own-routes.sh with its own network's gateways) run when it joins or leaves
// a cluster network, the first time a manager sees it, the first check after it restarted and
// the first a resync after the last run, not at every check of a network it is on already; a
// stopped node waits until it runs.
func TestManagementNodeIsSettledOnJoinLeaveFirstSightAndRestart(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("img")
	startFake(t, rt, "kind-control-plane", "kind", map[string]string{kindClusterLabel: "kind", kindRoleLabel: "control-plane"})
	runs := map[string][][]string{} // script name: the arguments of each run
	rt.SetExec(func(_ context.Context, c *inmemory.Container, opts container.ExecOptions) (int, error) {
		if len(opts.Cmd) > 3 && opts.Cmd[0] == "sh" && c.Spec.Name == "kind-control-plane" {
			switch opts.Cmd[2] {
			case isolateScript, ownRoutesScript:
				runs[opts.Cmd[3]] = append(runs[opts.Cmd[3]], opts.Cmd[4:])
			}
		}
		return 0, nil
	})
	kind := map[string]string{kindClusterLabel: "kind"}
	a := ClusterKey{Namespace: "ns", Name: "a"}
	b := ClusterKey{Namespace: "ns", Name: "b"}
	// want: the subnets of the workload networks, each with "-g" and the network's gateway (the
	// engine's host there), and the gateways of kind's network.
	want := func(workload ...string) map[string][]string {
		var addresses []string
		for _, n := range workload {
			wn, err := rt.InspectNetwork(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			addresses = append(addresses, wn.Subnets...)
			for _, gw := range wn.Gateways {
				addresses = append(addresses, "-g", gw)
			}
		}
		n, err := rt.InspectNetwork(ctx, "kind")
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]string{"isolate.sh": addresses, "own-routes.sh": n.Gateways}
	}
	// check counts each script's runs, and compares the last one's arguments with args unless nil.
	check := func(when string, times int, args map[string][]string) {
		t.Helper()
		for _, script := range []string{"isolate.sh", "own-routes.sh"} {
			got := runs[script]
			if len(got) != times {
				t.Fatalf("%s: %s ran %d times, want %d", when, script, len(got), times)
			}
			if args == nil { // nothing ran since the last check
				continue
			}
			last := slices.Sorted(slices.Values(got[len(got)-1]))
			if w := slices.Sorted(slices.Values(args[script])); !slices.Equal(last, w) {
				t.Errorf("%s: %s got %q, want %q", when, script, last, w)
			}
			// The same arguments are left in the node for its next start.
			var left string
			rt.WithContainer("kind-control-plane", func(c *inmemory.Container) {
				left = string(c.Files[atBootDir+"/"+strings.TrimSuffix(script, ".sh")+".args"])
			})
			if w := strings.Join(got[len(got)-1], "\n"); strings.TrimSuffix(left, "\n") != w {
				t.Errorf("%s: %s's arguments left for the node's next start are %q, want %q", when, script, left, w)
			}
		}
	}
	mgr := NewManager(rt, ManagerOptions{ManagementNodes: kind})
	ensureWith := func(m *Manager, k ClusterKey) {
		t.Helper()
		if _, err := m.ensureClusterNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
	}
	ensureWith(mgr, a)
	check("joined a", 1, want(DefaultNetworkName(a)))
	var unit string
	rt.WithContainer("kind-control-plane", func(c *inmemory.Container) { unit = string(c.Files["/etc/systemd/system/"+atBootUnit]) })
	if !strings.Contains(unit, "Before=kubelet.service") || !strings.Contains(unit, atBootDir+"/at-boot.sh") {
		t.Errorf("the unit that settles the node when it starts, before kubelet:\n%s", unit)
	}
	copies := rt.CallCount("CopyToContainer")
	ensureWith(mgr, a)
	check("checked a again", 1, nil)

	// Settled a resync ago: the management cluster's kube-proxy or CNI may have rewritten the
	// node's rules since.
	for id, s := range mgr.settled {
		s.at = s.at.Add(-ManagementResync)
		mgr.settled[id] = s
	}
	ensureWith(mgr, a)
	check("a resync later", 2, want(DefaultNetworkName(a)))
	if n := rt.CallCount("CopyToContainer"); n != copies {
		t.Errorf("the same arguments were left in the node again (%d copies, want %d)", n, copies)
	}

	// A manager that restarted has not seen the node yet.
	mgr = NewManager(rt, ManagerOptions{ManagementNodes: kind})
	ensureWith(mgr, a)
	check("first sight", 3, want(DefaultNetworkName(a)))

	// A node that restarted lost its rules and routes: the next check settles it again.
	rt.StopContainer("kind-control-plane", 137)
	ensureWith(mgr, a)
	check("stopped", 3, nil)
	if err := rt.StartContainer(ctx, "kind-control-plane"); err != nil {
		t.Fatal(err)
	}
	ensureWith(mgr, a)
	check("restarted", 4, want(DefaultNetworkName(a)))
	ensureWith(mgr, b)
	check("joined b", 5, want(DefaultNetworkName(a), DefaultNetworkName(b)))

	if err := mgr.DeleteCluster(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatal(err)
	}
	check("left a", 6, want(DefaultNetworkName(b)))
	if err := mgr.DeleteCluster(ctx, b, DefaultNetworkName(b)); err != nil {
		t.Fatal(err)
	}
	check("left b", 7, want())
}

// A management node's networks divide by their labels, not by the node's interface names
// (which the engine deals anew when the node restarts).
func TestManagementNetworksDivideByLabels(t *testing.T) {
	ctx := context.Background()
	a := ClusterKey{Namespace: "ns", Name: "a"}
	mgmt := ClusterKey{Name: "mgmt"}
	for _, tc := range []struct {
		name      string
		selector  map[string]string
		own       string            // the network the node is created on
		networks  map[string]string // the others, by name: the value of Dockyard's cluster label, "" for none
		workload  []string
		unsure    []string
		gatewayOf []string // the networks whose gateways own-routes.sh gets
	}{{
		name: "kind", selector: map[string]string{kindClusterLabel: "kind"}, own: "kind",
		networks: map[string]string{"dockyard-a.ns": a.String()},
		workload: []string{"dockyard-a.ns"}, gatewayOf: []string{"kind"},
	}, {
		name: "kind and a user's network", selector: map[string]string{kindClusterLabel: "kind"}, own: "kind",
		networks: map[string]string{"dockyard-a.ns": a.String(), "users": ""},
		workload: []string{"dockyard-a.ns", "users"}, gatewayOf: []string{"kind"},
	}, {
		name: "kind on another network and a user's network", selector: map[string]string{kindClusterLabel: "k"}, own: "k-net",
		networks: map[string]string{"dockyard-a.ns": a.String(), "users": ""},
		workload: []string{"dockyard-a.ns"}, unsure: []string{"k-net", "users"}, gatewayOf: []string{"dockyard-a.ns", "k-net", "users"},
	}, {
		name: "Dockyard's management cluster", selector: mgmt.ClusterLabels(), own: "dockyard-mgmt",
		networks: map[string]string{"dockyard-a.ns": a.String(), "users": ""},
		workload: []string{"dockyard-a.ns", "users"}, gatewayOf: []string{"dockyard-mgmt"},
	}, {
		name: "a moved cluster on a user's network", selector: a.ClusterLabels(), own: "users",
		networks: map[string]string{"dockyard-b.ns": "ns/b"},
		workload: []string{"dockyard-b.ns"}, gatewayOf: []string{"users"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rt := inmemory.New("img")
			label := func(network, owner string) {
				var labels map[string]string
				if owner != "" {
					labels = map[string]string{clusterLabel: owner}
				}
				if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: labels}); err != nil {
					t.Fatal(err)
				}
			}
			owner := ""
			if v, ok := tc.selector[clusterLabel]; ok && v == mgmt.String() {
				owner = v
			}
			label(tc.own, owner)
			startFake(t, rt, "node", tc.own, tc.selector)
			for name, owner := range tc.networks {
				label(name, owner)
				if err := rt.ConnectNetwork(ctx, name, "node"); err != nil {
					t.Fatal(err)
				}
			}
			c, err := rt.InspectContainer(ctx, "node")
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewManager(rt, ManagerOptions{ManagementNodes: tc.selector}).managementNetworks(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			var gateways []string
			for _, name := range tc.gatewayOf {
				n, _ := rt.InspectNetwork(ctx, name)
				gateways = append(gateways, n.Gateways...)
			}
			slices.Sort(gateways)
			slices.Sort(got.gateways)
			if !slices.Equal(got.workload, tc.workload) || !slices.Equal(got.unsure, tc.unsure) || !slices.Equal(got.gateways, gateways) {
				t.Errorf("workload %v, unsure %v, gateways %v; want %v, %v, %v (of %v)",
					got.workload, got.unsure, got.gateways, tc.workload, tc.unsure, gateways, tc.gatewayOf)
			}
		})
	}
}
