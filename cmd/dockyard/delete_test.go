package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
)

// Deleting the management cluster deletes every workload cluster at once and waits for them a
// bounded time; what is left of them on the engine is then removed by its labels, and a cluster
// whose nodes ran elsewhere is named as abandoned. Before, it waited for each cluster in turn,
// ten minutes each, and gave up with an error at the first that never went, leaving the
// management cluster and every cluster after it.
func TestDeletingTheWorkloadClustersEndsWhateverTheyDo(t *testing.T) {
	ctx := context.Background()
	var objs []client.Object
	for _, c := range []struct {
		ns, name string
		infra    *infrav1.KubernetesInfrastructure
	}{{"team-a", "stuck", nil}, {"team-a", "pods", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}}, {"team-b", "stuck", nil}} {
		objs = append(objs,
			&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Finalizers: []string{clusterv1.ClusterFinalizer}},
				Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: c.name}}},
			&infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name},
				Spec: infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{Kubernetes: c.infra}}})
	}
	c := fakeclient.NewClientBuilder().WithScheme(dyscheme.New()).WithObjects(objs...).Build()
	rt := inmemory.New("node")
	nodes := docker.NewManager(rt, docker.ManagerOptions{})
	for _, k := range []docker.ClusterKey{{Namespace: "team-a", Name: "stuck"}, {Namespace: "team-b", Name: "stuck"}} {
		if _, err := nodes.EnsureNetwork(ctx, k, docker.NetworkSpec{Name: docker.DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes.AddNode(ctx, docker.NodeSpec{Cluster: k, Machine: "m", Image: "node", Role: docker.RoleWorker, Network: docker.DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
	}
	other := docker.ClusterKey{Namespace: "team-c", Name: "not-of-this-management"}
	if _, err := nodes.AddNode(ctx, docker.NodeSpec{Cluster: other, Machine: "m", Image: "node", Role: docker.RoleWorker, Network: "none"}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if err := deleteWorkloadClusters(ctx, c, nodes, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s for a wait of 3s", took)
	}
	all, err := nodes.ListClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Cluster != other {
		t.Errorf("left on the engine: %+v; want only the cluster no Cluster of this management cluster names", all)
	}
	list := &clusterv1.ClusterList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for _, cl := range list.Items {
		if cl.DeletionTimestamp.IsZero() {
			t.Errorf("cluster %s/%s was not deleted", cl.Namespace, cl.Name)
		}
	}
}
