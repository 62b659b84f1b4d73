package docker

import (
	"context"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

func TestListAndRemoveClusters(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node:v1")
	m := NewManager(rt, ManagerOptions{})
	a := ClusterKey{Namespace: "ns1", Name: "a"}
	b := ClusterKey{Namespace: "ns2", Name: "a"}
	for _, k := range []ClusterKey{a, b} {
		if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.AddNode(ctx, NodeSpec{Cluster: k, Machine: "m1", Image: "node:v1", Role: RoleWorker, Network: DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
	}
	clusters, err := m.ListClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters) != 2 || clusters[0].Cluster != a || clusters[1].Cluster != b {
		t.Fatalf("clusters %+v", clusters)
	}
	if c := clusters[0]; len(c.Containers) != 1 || len(c.Volumes) != 1 || len(c.Networks) != 1 {
		t.Errorf("cluster a: %+v", c)
	}
	if err := m.RemoveCluster(ctx, clusters[0]); err != nil {
		t.Fatal(err)
	}
	clusters, err = m.ListClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters) != 1 || clusters[0].Cluster != b {
		t.Errorf("after removing a: %+v", clusters)
	}
}
