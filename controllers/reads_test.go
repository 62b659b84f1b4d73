package controllers

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// countingClient counts the reads a reconciler makes, by kind of object.
type countingClient struct {
	client.Client
	mu          sync.Mutex
	gets, lists map[string]int
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.count(&c.gets, obj)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.count(&c.lists, list)
	return c.Client.List(ctx, list, opts...)
}

func (c *countingClient) count(m *map[string]int, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = map[string]int{}
	}
	switch obj.(type) {
	case *corev1.Secret:
		(*m)["Secret"]++
	case *infrav1.DockyardClusterList:
		(*m)["DockyardClusterList"]++
	}
}

const testInfraKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: infra, cluster: {server: "https://192.0.2.1:6443"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: c, context: {cluster: infra, user: u, namespace: pods}}]
current-context: c
`

// closable is a fake engine the picker could have built.
type closable struct{ *inmemory.Balancing }

func (closable) Close() error { return nil }

// A reconcile chooses its cluster's engine once, from the DockyardCluster it holds: however
// many node-layer calls it makes, it reads the infrastructure's kubeconfig Secret once (from
// the cache) and lists no DockyardCluster. Before, every node-layer call listed the namespace's
// DockyardClusters and read the Secret.
func TestAReconcileResolvesItsEngineOnce(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	infra := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "infra"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testInfraKubeconfig)}}
	f := newFixture(t, m, dm, s, infra)
	dc := f.getDockyardCluster()
	dc.Spec.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	counting := &countingClient{Client: f.c}
	f.c = counting
	engine := inmemory.NewBalancing(inmemory.New(testNodeImage))
	inmemory.NewNodes(engine.Runtime)
	f.engines = infrastructure.New(f.nodes, infrastructure.Options{Secrets: counting,
		Connect: func(runtimes.Config) (runtimes.Runtime, error) { return closable{engine}, nil }})

	f.provisionCluster() // 3 reconciles
	reconciles := 3
	for range 4 {
		f.reconcileMachine(cpName)
		reconciles++
	}
	if calls := engine.CallTotal(); calls < 3*reconciles {
		t.Fatalf("%d engine calls in %d reconciles: the test proves nothing", engine.CallTotal(), reconciles)
	}
	expectCondition(t, f.getMachine(cpName), infrav1.BootstrapSucceededCondition, metav1.ConditionTrue, infrav1.BootstrapSucceededReason)
	if got := counting.lists["DockyardClusterList"]; got != 0 {
		t.Errorf("%d Lists of DockyardClusters in %d reconciles, want none", got, reconciles)
	}
	// The machine reads its bootstrap data too (once per reconcile that runs it).
	if got := counting.gets["Secret"]; got > 2*reconciles-3 {
		t.Errorf("%d Secret reads in %d reconciles (3 of the cluster, 4 of the machine), want the infrastructure's once per reconcile and the bootstrap data's", got, reconciles)
	}
	if n := len(engine.Fronts()); n != 1 {
		t.Errorf("%d fronts on the cluster's engine, want its load balancer", n)
	}
	if nodes, _ := engine.ListContainers(f.ctx, docker.ClusterKey{Namespace: testNS, Name: testCluster}.ClusterLabels()); len(nodes) != 1 {
		t.Errorf("%d containers of the cluster on its engine, want its control plane node", len(nodes))
	}
}
