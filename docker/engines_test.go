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
