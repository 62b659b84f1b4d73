package docker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// A node handle knows its machine, cluster and role, found again by its machine or among the
// cluster's control plane nodes.
func TestNodeHandlesOfACluster(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "dev"}
	network, err := m.ClusterNetwork(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	cp, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "dev-cp-1", Image: "node", Role: RoleControlPlane, Network: network})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "dev-md-1", Image: "node", Role: RoleWorker, Network: network}); err != nil {
		t.Fatal(err)
	}
	if cp.Name != NodeName(key, "dev-cp-1") || cp.Machine != "dev-cp-1" || cp.Cluster != key || cp.Role != RoleControlPlane ||
		!cp.Running || cp.Hostname != NodeHostname(key.Name, "dev-cp-1") || cp.Address(network) == "" {
		t.Errorf("created node %+v: running %v, hostname %q, address %q", cp, cp.Running, cp.Hostname, cp.Address(network))
	}

	found, err := m.FindNode(ctx, key, "dev-md-1")
	if err != nil || found == nil || found.Role != RoleWorker || found.Machine != "dev-md-1" {
		t.Errorf("found %+v (%v), want the worker", found, err)
	}
	if missing, err := m.FindNode(ctx, key, "dev-md-2"); err != nil || missing != nil {
		t.Errorf("found %+v (%v) for a machine without a node", missing, err)
	}

	controlPlane, err := m.Nodes(ctx, key, RoleControlPlane)
	if err != nil || len(controlPlane) != 1 {
		t.Fatalf("control plane nodes %+v (%v), want one", controlPlane, err)
	}
	if n := controlPlane[0]; n.Name != cp.Name || n.Machine != "dev-cp-1" || n.Address(network) != cp.Address(network) {
		t.Errorf("control plane node %+v at %q, want %s at %q", n, n.Address(network), cp.Name, cp.Address(network))
	}
}

// What a controller does with a node goes through the handle: checks, bootstrap, files, the
// output of a stopped node and starting it again.
func TestANodeHandleRunsTheNodesOperations(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node")
	inmemory.NewNodes(rt)
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "dev"}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "dev-md-1", Image: "node", Role: RoleWorker, Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := node.Ready(ctx); err != nil || !st.Ready {
		t.Fatalf("node state %+v (%v), want ready", st, err)
	}
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{File: &bootstrap.File{Path: "/etc/dockyard-test", Content: []byte("hello"), Mode: 0o644}},
		{Command: &bootstrap.Command{Script: "true"}},
	}}
	if err := node.StartBootstrap(ctx, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	if st, err := node.BootstrapStatus(ctx, time.Minute); err != nil || st.Phase != bootstrap.Succeeded {
		t.Errorf("bootstrap %+v (%v), want succeeded", st, err)
	}
	if content, err := node.Run(ctx, nil, "cat", "/etc/dockyard-test"); err != nil || content != "hello" {
		t.Errorf("read %q (%v), want the bootstrap's file", content, err)
	}

	rt.StopContainer(node.Name, 137)
	if node, err = m.FindNode(ctx, key, "dev-md-1"); err != nil || node.Running || node.State != "exited" || node.ExitCode != 137 {
		t.Fatalf("stopped node %+v (%v): state %s, exit code %d", node, err, node.State, node.ExitCode)
	}
	if out, err := node.Console(ctx, 5); err != nil || !strings.Contains(out, node.Name) {
		t.Errorf("output %q (%v), want the fake's logs of %s", out, err, node.Name)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if node, err = m.FindNode(ctx, key, "dev-md-1"); err != nil || !node.Running {
		t.Errorf("node %+v (%v) after Start, want it running", node, err)
	}
}

// A node container that never ran and that the engine refuses to start is removed by Start, so
// the next attempt creates it anew: here the privileged container a manager leaves when it is
// stopped between a refused privileged start and its retry without privilege.
func TestANodeThatNeverStartedIsRemovedWhenItCannotStart(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node")
	rt.StartHook = func(spec container.ContainerSpec) error {
		if spec.Security.Privileged {
			return errors.New("OCI runtime create failed: unable to apply caps: operation not permitted")
		}
		return nil
	}
	key := ClusterKey{Namespace: "ns", Name: "dev"}
	spec := NodeSpec{Cluster: key, Machine: "dev-md-1", Image: "node", Role: RoleWorker}
	// The container the stopped manager left: created privileged, refused, never started.
	if _, err := NewManager(rt, ManagerOptions{Privilege: PrivilegeAlways}).createNode(ctx, spec); err == nil {
		t.Fatal("a privileged node started on an engine that refuses privileged containers")
	}

	m := NewManager(rt, ManagerOptions{Privilege: PrivilegeAuto})
	left, err := m.FindNode(ctx, key, "dev-md-1")
	if err != nil || left == nil || !left.NeverStarted() {
		t.Fatalf("the left container: %+v (%v), want one that never started", left, err)
	}
	if err := left.Start(ctx); err == nil || !strings.Contains(err.Error(), "created anew") {
		t.Fatalf("starting the left container: %v, want the engine's refusal and its removal", err)
	}
	if again, err := m.FindNode(ctx, key, "dev-md-1"); err != nil || again != nil {
		t.Fatalf("after the refused start: %+v (%v), want no container", again, err)
	}
	node, err := m.AddNode(ctx, spec)
	if err != nil || !node.Running {
		t.Fatalf("the node created anew: %+v (%v), want it running without privilege", node, err)
	}

	// A container that ran before is never removed by a refused start.
	rt.StopContainer(node.Name, 0)
	rt.StartHook = func(container.ContainerSpec) error { return errors.New("engine busy") }
	stopped, err := m.FindNode(ctx, key, "dev-md-1")
	if err != nil || stopped == nil || stopped.NeverStarted() {
		t.Fatalf("the stopped node: %+v (%v)", stopped, err)
	}
	if err := stopped.Start(ctx); err == nil {
		t.Fatal("start succeeded through a refusing engine")
	}
	if kept, err := m.FindNode(ctx, key, "dev-md-1"); err != nil || kept == nil {
		t.Fatalf("a node that ran before was removed: %+v (%v)", kept, err)
	}
}

// A node is told its cluster's Service ranges (its entrypoint keeps untranslated traffic to
// them in the node); a range that is no CIDR never reaches the node's environment.
func TestNodesAreToldTheirClustersServiceRanges(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node")
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "dev"}
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	ranges := []string{"10.96.0.0/12", "fd00:100:64::/108"}
	node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "dev-cp-1", Image: "node", Role: RoleControlPlane, Network: network, ServiceCIDRs: ranges})
	if err != nil {
		t.Fatal(err)
	}
	rt.WithContainer(node.Name, func(c *inmemory.Container) {
		if want := "DOCKYARD_SERVICE_CIDRS=10.96.0.0/12,fd00:100:64::/108"; !slices.Contains(c.Spec.Env, want) {
			t.Errorf("environment %v, want %s", c.Spec.Env, want)
		}
	})

	_, err = m.AddNode(ctx, NodeSpec{Cluster: key, Machine: "dev-md-1", Image: "node", Role: RoleWorker, Network: network,
		ServiceCIDRs: []string{"10.96.0.0/12 -j ACCEPT"}})
	if err == nil || !strings.Contains(err.Error(), `Service range "10.96.0.0/12 -j ACCEPT" is not a CIDR`) {
		t.Fatalf("a node with a bad Service range: %v, want it refused with the range named", err)
	}
	if found, err := m.FindNode(ctx, key, "dev-md-1"); err != nil || found != nil {
		t.Errorf("after the refusal: %+v (%v), want no container", found, err)
	}
}
