package docker

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
	"github.com/dockyard-dev/dockyard/test/bootstrapdata"
)

// A cluster's nodes on the in-memory engine boot through the node layer as on any engine: the
// bootstrap data is parsed into a plan and played by the runner's protocol, and kubeadm init in
// the first control plane node's plan makes the cluster's API server behind its load balancer,
// which a client of the cluster's CA reaches and where the node is Ready; a worker joins; a
// node removed leaves the cluster; bootstrap data naming no front of the engine fails the node
// as kubeadm would.
func TestNodesOnTheInMemoryEngineRunKubeadm(t *testing.T) {
	ctx := context.Background()
	e, m, key, network, endpoint, certificates := inMemoryCluster(ctx, t)
	cp := kubeadmNode(ctx, t, m, key, network, "mem-cp-1", RoleControlPlane, bootstrapdata.Init(endpoint, certificates))
	expectBootstrapped(ctx, t, cp)
	md := kubeadmNode(ctx, t, m, key, network, "mem-md-1", RoleWorker, bootstrapdata.Join(endpoint))
	expectBootstrapped(ctx, t, md)

	cl, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	nodes := func() []string {
		var list corev1.NodeList
		if err := cl.List(ctx, &list); err != nil {
			t.Fatalf("listing the workload cluster's Nodes at %s: %v", endpoint, err)
		}
		var names []string
		for _, n := range list.Items {
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			names = append(names, fmt.Sprintf("%s ready=%v %s", n.Name, ready, n.Status.NodeInfo.KubeletVersion))
		}
		return names
	}
	t.Logf("the workload cluster at %s: %v", endpoint, nodes())
	want := []string{cp.Hostname + " ready=true v1.34.4", md.Hostname + " ready=true v1.34.4"}
	if got := nodes(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Nodes %v, want %v", got, want)
	}
	var kubeadmConfig corev1.ConfigMap
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, &kubeadmConfig); err != nil ||
		!strings.HasPrefix(kubeadmConfig.Data["ClusterConfiguration"], "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: "+endpoint) {
		t.Errorf("kubeadm-config %q (%v), want the ClusterConfiguration kubeadm init was given", kubeadmConfig.Data["ClusterConfiguration"], err)
	}
	if err := m.DeleteNode(ctx, key, "mem-md-1"); err != nil {
		t.Fatal(err)
	}
	if got := nodes(); len(got) != 1 {
		t.Errorf("Nodes after the worker's removal: %v, want the control plane node only", got)
	}
	if kept := e.Nodes.Commands[NodeName(key, "mem-md-1")]; kept != nil {
		t.Errorf("the engine still keeps the removed worker's commands: %q", kept)
	}

	lost := kubeadmNode(ctx, t, m, key, network, "mem-md-2", RoleWorker, bootstrapdata.Join("127.0.0.1:1"))
	st, err := lost.BootstrapStatus(ctx, time.Minute)
	if err != nil || st.Phase != bootstrap.Failed || !strings.Contains(st.Output, "couldn't validate the identity of the API Server") {
		t.Errorf("a worker joining no front: %+v (%v), want its bootstrap failed as kubeadm's", st, err)
	}
}

// inMemoryCluster makes the network and load balancer of a cluster on an in-memory engine, and
// the cluster's certificates; endpoint is the load balancer's.
func inMemoryCluster(ctx context.Context, t *testing.T) (e *inmemory.Engine, m *Manager, key ClusterKey, network, endpoint string, certificates secret.Certificates) {
	t.Helper()
	return inMemoryClusterOn(ctx, t, inmemory.NewEngine(inmemory.EngineOptions{}))
}

// inMemoryClusterOn is inMemoryCluster on an engine of the test's.
func inMemoryClusterOn(ctx context.Context, t *testing.T, e *inmemory.Engine) (_ *inmemory.Engine, m *Manager, key ClusterKey, network, endpoint string, certificates secret.Certificates) {
	t.Helper()
	m = NewManager(e, ManagerOptions{})
	key = ClusterKey{Namespace: "ns", Name: "mem"}
	network, err := m.ClusterNetwork(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Port: APIServerPort})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.DeleteCluster(ctx, key, network) })
	endpoint = fmt.Sprintf("%s:%d", lb.Address(network), lb.Port)
	if lb.Address(network) != "127.0.0.1" || lb.Port == 0 {
		t.Fatalf("load balancer at %s, want a port of 127.0.0.1", endpoint)
	}
	certificates = secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certificates.Generate(); err != nil {
		t.Fatal(err)
	}
	return e, m, key, network, endpoint, certificates
}

// Faults are what a node's own commands do (nodecmd.StopService, StartService), played by the
// in-memory engine on the cluster's API: kubelet stopped turns the Node Unknown and unreachable
// until it starts again; etcd stopped takes its static Pod away and its member stops answering;
// the only API server stopped leaves the endpoint refusing connections; a network delay slows
// its answers.
func TestFaultsOfInMemoryNodes(t *testing.T) {
	ctx := context.Background()
	_, m, key, network, endpoint, certificates := inMemoryCluster(ctx, t)
	cp := kubeadmNode(ctx, t, m, key, network, "mem-cp-1", RoleControlPlane, bootstrapdata.Init(endpoint, certificates))
	expectBootstrapped(ctx, t, cp)
	cl, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	ready := func() (corev1.ConditionStatus, bool) {
		t.Helper()
		var n corev1.Node
		if err := cl.Get(ctx, client.ObjectKey{Name: cp.Hostname}, &n); err != nil {
			t.Fatal(err)
		}
		tainted := false
		for _, taint := range n.Spec.Taints {
			tainted = tainted || taint.Key == corev1.TaintNodeUnreachable
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status, tainted
			}
		}
		return "", tainted
	}
	run(ctx, t, cp, nodecmd.StopService(nodecmd.Kubelet))
	if status, tainted := ready(); status != corev1.ConditionUnknown || !tainted {
		t.Errorf("kubelet stopped: Ready %q, unreachable taint %v; want Unknown and tainted", status, tainted)
	}
	run(ctx, t, cp, nodecmd.StopService(nodecmd.Kubelet)) // stopping a stopped kubelet succeeds
	run(ctx, t, cp, nodecmd.StartService(nodecmd.Kubelet))
	if status, tainted := ready(); status != corev1.ConditionTrue || tainted {
		t.Errorf("kubelet started again: Ready %q, unreachable taint %v; want True and no taint", status, tainted)
	}

	etcdPod := client.ObjectKey{Namespace: "kube-system", Name: "etcd-" + cp.Hostname}
	run(ctx, t, cp, nodecmd.StopService(nodecmd.Etcd))
	if err := cl.Get(ctx, etcdPod, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("etcd stopped: its Pod %v, want NotFound", err)
	}
	run(ctx, t, cp, nodecmd.StartService(nodecmd.Etcd))
	if err := cl.Get(ctx, etcdPod, &corev1.Pod{}); err != nil {
		t.Errorf("etcd started again: its Pod %v", err)
	}

	run(ctx, t, cp, nodecmd.StopService(nodecmd.KubeAPIServer))
	if fresh, err := bootstrapdata.Client(endpoint, certificates); err == nil {
		// client-go retries a GET whose connection closes; one try is enough here.
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := fresh.List(short, &corev1.NodeList{}); err == nil {
			t.Errorf("the only API server stopped: the endpoint %s still serves", endpoint)
		}
	}
	run(ctx, t, cp, nodecmd.StartService(nodecmd.KubeAPIServer))
	fresh, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.List(ctx, &corev1.NodeList{}); err != nil {
		t.Errorf("the API server started again: %v", err)
	}

	// A network delay on the control plane node delays its API server's answers (a lower
	// bound: each answer waits at least the delay), until it is taken away.
	run(ctx, t, cp, nodecmd.SetNetworkDelay(300*time.Millisecond))
	slow, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := slow.List(ctx, &corev1.NodeList{}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("a request through a node with a 300ms network delay took %s", took)
	}
	run(ctx, t, cp, nodecmd.SetNetworkDelay(0))
}

// kubeadmNode adds a node and starts the bootstrap of a cloud-config on it.
func kubeadmNode(ctx context.Context, t *testing.T, m *Manager, key ClusterKey, network, machine string, role Role, cloudConfig string) *Node {
	t.Helper()
	n, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: machine, Image: "localhost/dockyard/node:v1.34.4", Role: role, Network: network})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := bootstrap.Parse(bootstrap.FormatCloudConfig, []byte(cloudConfig), bootstrap.Options{Hostname: n.Hostname})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.StartBootstrap(ctx, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	return n
}

// records is a StateStore in the test's memory, shared by the engines of one test as the
// management cluster's Secrets are by managers.
type records struct {
	mu   sync.Mutex
	data map[string][]byte
	// ownerless groups have no owner to keep their records: Save writes nothing. anew lists
	// the saves that made a record afresh.
	ownerless map[string]bool
	anew      []string
}

func (r *records) Save(_ context.Context, group string, state []byte, anew bool) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ownerless[group] {
		return false, nil
	}
	if anew {
		r.anew = append(r.anew, group)
	}
	r.data[group] = state
	return true, nil
}

func (r *records) Load(_ context.Context, group string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.data[group], nil
}

func (r *records) Groups(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Collect(maps.Keys(r.data)), nil
}

func (r *records) Delete(_ context.Context, group string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.data, group)
	return nil
}

// An in-memory cluster outlives its engine: saved to its record, it is served again, on the
// same endpoint and with the same nodes, objects and etcd members, by the engine of a manager
// started again; a record that appears is taken in by a running engine (a cluster moved there)
// and one deleted is let go (moved away); a cluster deleted through the node layer loses its
// record.
func TestInMemoryClustersOutliveTheEngine(t *testing.T) {
	ctx := context.Background()
	store := &records{data: map[string][]byte{}}
	persistent := func(store inmemory.StateStore) *inmemory.Engine {
		return inmemory.NewEngine(inmemory.EngineOptions{State: store, GroupLabel: clusterLabel, SyncInterval: time.Hour})
	}
	first, m, key, network, endpoint, certificates := inMemoryClusterOn(ctx, t, persistent(store))
	cp := kubeadmNode(ctx, t, m, key, network, "mem-cp-1", RoleControlPlane, bootstrapdata.Init(endpoint, certificates))
	md := kubeadmNode(ctx, t, m, key, network, "mem-md-1", RoleWorker, bootstrapdata.Join(endpoint))
	run(ctx, t, md, nodecmd.StopService(nodecmd.Kubelet))

	// A record the store does not write (no owner found for it): the cluster stays, however
	// often the engine syncs.
	store.ownerless = map[string]bool{key.String(): true}
	for range 2 {
		if err := first.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := m.FindNode(ctx, key, "mem-cp-1"); err != nil || n == nil {
		t.Fatalf("a cluster whose record was not written was let go: %+v, %v", n, err)
	}
	store.ownerless = nil

	if err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if groups, _ := store.Groups(ctx); len(groups) != 1 || groups[0] != key.String() {
		t.Fatalf("records after a sync: %v, want one of %s", groups, key)
	}
	// The manager's process ends: its engine is gone, its record stays.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	again := persistent(store)
	t.Cleanup(func() { _ = again.Close() })
	m2 := NewManager(again, ManagerOptions{})
	for _, machine := range []string{"mem-cp-1", "mem-md-1"} {
		n, err := m2.FindNode(ctx, key, machine)
		if err != nil || n == nil || !n.Running {
			t.Fatalf("node %s after the restart: %+v, %v", machine, n, err)
		}
		if st, err := n.BootstrapStatus(ctx, time.Minute); err != nil || st.Phase != bootstrap.Succeeded {
			t.Errorf("node %s's bootstrap after the restart: %+v (%v)", machine, st, err)
		}
	}
	cl, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		t.Fatalf("the cluster at %s after the restart: %v", endpoint, err)
	}
	ready := map[string]corev1.ConditionStatus{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready[n.Name] = c.Status
			}
		}
	}
	if len(ready) != 2 || ready[cp.Hostname] != corev1.ConditionTrue || ready[md.Hostname] != corev1.ConditionUnknown {
		t.Errorf("Nodes after the restart: %v, want %s Ready and %s Unknown (its kubelet stopped)", ready, cp.Hostname, md.Hostname)
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "etcd-" + cp.Hostname}, &corev1.Pod{}); err != nil {
		t.Errorf("etcd's static Pod after the restart: %v", err)
	}

	// The record deleted (the cluster moved away): the engine lets the cluster go.
	record, _ := store.Load(ctx, key.String())
	if err := store.Delete(ctx, key.String()); err != nil {
		t.Fatal(err)
	}
	if err := again.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := m2.FindNode(ctx, key, "mem-cp-1"); err != nil || n != nil {
		t.Errorf("a node of the cluster whose record went: %+v, %v", n, err)
	}
	if conn, err := net.DialTimeout("tcp", endpoint, time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("the endpoint %s of the cluster whose record went still listens", endpoint)
	}

	// The record back (the cluster moved here): the running engine takes it in.
	if _, err := store.Save(ctx, key.String(), record, true); err != nil {
		t.Fatal(err)
	}
	if err := again.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := m2.FindNode(ctx, key, "mem-cp-1"); err != nil || n == nil {
		t.Errorf("a node of the cluster whose record came: %+v, %v", n, err)
	}
	if fresh, err := bootstrapdata.Client(endpoint, certificates); err != nil || fresh.List(ctx, &nodes) != nil {
		t.Errorf("the cluster whose record came does not serve at %s", endpoint)
	}

	// Deleted, and made again under its name before a sync: its next save makes the record
	// anew (for the new cluster's owner), and the engine keeps the new cluster.
	if err := m2.DeleteCluster(ctx, key, network); err != nil {
		t.Fatal(err)
	}
	store.anew = nil
	_, m3, _, network3, endpoint3, certificates3 := inMemoryClusterOn(ctx, t, again)
	kubeadmNode(ctx, t, m3, key, network3, "mem-cp-1", RoleControlPlane, bootstrapdata.Init(endpoint3, certificates3))
	if err := again.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(store.anew, []string{key.String()}) {
		t.Errorf("the cluster made again was saved anew %v times, want once: %v", len(store.anew), store.anew)
	}
	if n, err := m3.FindNode(ctx, key, "mem-cp-1"); err != nil || n == nil {
		t.Errorf("the cluster made again under its name was let go: %+v, %v", n, err)
	}

	// Deleted through the node layer, the cluster's record goes with it.
	if err := m2.DeleteCluster(ctx, key, network); err != nil {
		t.Fatal(err)
	}
	if err := again.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if groups, _ := store.Groups(ctx); len(groups) != 0 {
		t.Errorf("records after the cluster's deletion: %v", groups)
	}
}

// expectBootstrapped fails the test unless a node's bootstrap succeeded.
func expectBootstrapped(ctx context.Context, t *testing.T, n *Node) {
	t.Helper()
	if st, err := n.BootstrapStatus(ctx, time.Minute); err != nil || st.Phase != bootstrap.Succeeded {
		t.Fatalf("node %s's bootstrap: %+v (%v)", n.Name, st, err)
	}
}

// run runs a command in a node, failing the test when it fails.
func run(ctx context.Context, t *testing.T, n *Node, cmd []string) {
	t.Helper()
	if out, err := n.Run(ctx, nil, cmd...); err != nil {
		t.Fatalf("%q in %s: %v (%s)", cmd, n.Name, err, out)
	}
}

// A cluster moved to a running manager is reconciled there before the engine's next sync takes
// its record in, while the manager it came from still serves it until its own next sync. The
// target's first calls for the cluster must neither make it anew nor serve it on another port
// (its endpoint is fixed in its DockyardCluster): they wait, failing, until the record can be
// taken in, and then find the cluster as it was, on its own port.
func TestAClusterMovedToARunningEngineIsTakenInBeforeItIsMadeAnew(t *testing.T) {
	ctx := context.Background()
	source, target := &records{data: map[string][]byte{}}, &records{data: map[string][]byte{}}
	persistent := func(store inmemory.StateStore) *inmemory.Engine {
		e := inmemory.NewEngine(inmemory.EngineOptions{State: store, GroupLabel: clusterLabel, SyncInterval: time.Hour})
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	from, m, key, network, endpoint, certificates := inMemoryClusterOn(ctx, t, persistent(source))
	kubeadmNode(ctx, t, m, key, network, "mem-cp-1", RoleControlPlane, bootstrapdata.Init(endpoint, certificates))
	to := persistent(target)
	if err := from.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	// clusterctl move: the record is written on the target and deleted on the source, whose
	// engine lets the cluster go only at its next sync.
	record, _ := source.Load(ctx, key.String())
	if _, err := target.Save(ctx, key.String(), record, true); err != nil {
		t.Fatal(err)
	}
	_ = source.Delete(ctx, key.String())

	// The target's reconcilers, before either engine synced.
	m2 := NewManager(to, ManagerOptions{})
	reconcile := func() (*LoadBalancer, error) {
		if _, err := m2.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
			return nil, err
		}
		return m2.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Port: APIServerPort})
	}
	if lb, err := reconcile(); err == nil {
		t.Fatalf("the moved cluster was made again on the target while its port was still the source's: load balancer at port %d, endpoint %s", lb.Port, endpoint)
	}

	if err := from.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var lb *LoadBalancer
	var err error
	for range 2 { // the first may find what the take-in restored and call again
		if lb, err = reconcile(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the moved cluster once its source let it go: %v", err)
	}
	if got := fmt.Sprintf("%s:%d", lb.Address(network), lb.Port); got != endpoint {
		t.Errorf("the moved cluster's load balancer at %s, want its endpoint %s", got, endpoint)
	}
	cl, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil || len(nodes.Items) != 1 {
		t.Errorf("the moved cluster at %s: %d Nodes, %v; want its control plane's", endpoint, len(nodes.Items), err)
	}
}
