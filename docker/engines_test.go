package docker

import (
	"context"
	"testing"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

// A cluster's engine is resolved by the node layer: the same calls a controller makes land on
// the cluster's own engine, its handles keep working there, the other clusters stay on the
// Manager's, and every engine is resolved to one Manager (its own privilege probe and locks),
// heard of once.
func TestClustersRunOnTheEngineTheyResolveTo(t *testing.T) {
	ctx := context.Background()
	host, other := fake.New("node:v1", "lb:v1"), fake.New("node:v1", "lb:v1")
	onOther := ClusterKey{Namespace: "team-a", Name: "pods"}
	onHost := ClusterKey{Namespace: "team-a", Name: "local"}
	var added []container.Runtime
	m := NewManager(host, ManagerOptions{
		Engines: func(_ context.Context, c ClusterKey) (container.Runtime, error) {
			switch c {
			case onOther:
				return other, nil
			case ClusterKey{Namespace: "team-a", Name: "broken"}:
				return nil, errors.New("Secret infra not found")
			}
			return nil, nil
		},
		EngineAdded: func(rt container.Runtime) { added = append(added, rt) },
	})
	for _, k := range []ClusterKey{onOther, onHost} {
		if _, err := m.EnsureNetwork(ctx, k, DefaultNetworkName(k)); err != nil {
			t.Fatal(err)
		}
		if err := m.EnsureImage(ctx, k, "node:v1"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.AddNode(ctx, NodeSpec{Cluster: k, Machine: "m1", Image: "node:v1", Role: RoleControlPlane, Network: DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: k, Image: "lb:v1", Network: DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(rt container.Runtime, k ClusterKey) int {
		cs, err := rt.ListContainers(ctx, k.ClusterLabels())
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	if count(other, onOther) != 2 || count(host, onOther) != 0 || count(host, onHost) != 2 || count(other, onHost) != 0 {
		t.Errorf("containers: other engine %d/%d, host %d/%d", count(other, onOther), count(other, onHost), count(host, onHost), count(host, onOther))
	}
	node, err := m.FindNode(ctx, onOther, "m1")
	if err != nil || node == nil {
		t.Fatalf("the node on the other engine: %v %v", node, err)
	}
	if node.m == m || node.m.runtime != other {
		t.Error("the handle of a node on the other engine does not act there")
	}
	other.SetHost(fake.Host{CPUs: 32, MemoryBytes: 64 << 30, Architecture: "arm64"})
	if info, err := m.ClusterHostInfo(ctx, onOther); err != nil || info.CPUs != 32 || info.Arch != "arm64" {
		t.Errorf("the host of the other engine's cluster: %+v %v", info, err)
	}
	if info, err := m.ClusterHostInfo(ctx, onHost); err != nil || info.CPUs != fake.DefaultHost.CPUs {
		t.Errorf("the host of the host engine's cluster: %+v %v", info, err)
	}
	if len(added) != 1 || added[0] != other {
		t.Errorf("engines heard of: %d, want the other one once", len(added))
	}
	if err := m.DeleteCluster(ctx, onOther, DefaultNetworkName(onOther)); err != nil {
		t.Fatal(err)
	}
	if count(other, onOther) != 0 || count(host, onHost) != 2 {
		t.Error("deleting the cluster on the other engine removed the wrong containers")
	}
	if _, err := m.FindNode(ctx, ClusterKey{Namespace: "team-a", Name: "broken"}, "m1"); err == nil {
		t.Error("a cluster whose engine cannot be resolved was looked up on the Manager's engine")
	}
}

// An engine no cluster resolves to any more is forgotten and no longer watched: when its last
// cluster is deleted, or resolves to another engine (its kubeconfig Secret changed); not while
// another cluster still runs on it.
func TestEnginesNoClusterUsesAreRetired(t *testing.T) {
	ctx := context.Background()
	host, before, after := fake.New("node:v1"), fake.New("node:v1"), fake.New("node:v1")
	a, b := ClusterKey{Namespace: "team-a", Name: "a"}, ClusterKey{Namespace: "team-a", Name: "b"}
	on := map[ClusterKey]container.Runtime{a: before, b: before}
	var added, retired []container.Runtime
	m := NewManager(host, ManagerOptions{
		Engines:       func(_ context.Context, c ClusterKey) (container.Runtime, error) { return on[c], nil },
		EngineAdded:   func(rt container.Runtime) { added = append(added, rt) },
		EngineRetired: func(rt container.Runtime) { retired = append(retired, rt) },
	})
	for _, k := range []ClusterKey{a, b} {
		if _, err := m.EnsureNetwork(ctx, k, DefaultNetworkName(k)); err != nil {
			t.Fatal(err)
		}
	}
	on[a] = after // a's Secret changed; b still runs on the engine before
	if _, err := m.EnsureNetwork(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatal(err)
	}
	if len(retired) != 0 {
		t.Errorf("retired %d engines while cluster b runs on the one before", len(retired))
	}
	on[b] = after
	if _, err := m.FindNode(ctx, b, "m1"); err != nil {
		t.Fatal(err)
	}
	if len(retired) != 1 || retired[0] != before {
		t.Errorf("retired %v, want the engine before once no cluster is on it", retired)
	}
	for _, k := range []ClusterKey{a, b} {
		if err := m.DeleteCluster(ctx, k, DefaultNetworkName(k)); err != nil {
			t.Fatal(err)
		}
	}
	if len(retired) != 2 || retired[1] != after {
		t.Errorf("retired %v, want the engine after once its clusters are deleted", retired)
	}
	if len(added) != 2 {
		t.Errorf("added %d engines, want 2", len(added))
	}
	// A cluster back on a retired engine has it watched again.
	if _, err := m.EnsureNetwork(ctx, a, DefaultNetworkName(a)); err != nil || len(added) != 3 || added[2] != after {
		t.Errorf("an engine used again: added %v, %v", added, err)
	}
}
