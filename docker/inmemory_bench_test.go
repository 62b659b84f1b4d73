package docker

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/patch"
	"github.com/dockyard-dev/dockyard/test/bootstrapdata"
)

var (
	benchInMemoryRest        = flag.Duration("bench-inmemory-rest", 30*time.Second, "how long BenchmarkIdleInMemoryClusters leaves its clusters at rest to measure their CPU")
	benchInMemoryHeapProfile = flag.String("bench-inmemory-heap-profile", "", "write a heap profile here when BenchmarkIdleInMemoryClusters's clusters are at rest")
)

// inMemoryBenchWorkers is how many clusters boot at once, as the manager's DockyardMachine
// workers would boot their nodes.
const inMemoryBenchWorkers = 4

// BenchmarkIdleInMemoryClusters boots clusters of one control plane and nine workers on one
// in-memory engine through the node layer, as the DockyardCluster and DockyardMachine
// reconcilers do (the network, the load balancer, each node added, checked, configured and
// bootstrapped with kubeadm's cloud-config), with records kept as the manager keeps them. Then,
// at rest, it reports per cluster the live heap, goroutines, boot time, record size, one save of
// every record and their restore into a new engine (a manager started again); the process's
// CPU over -bench-inmemory-rest at rest, with a sync every DefaultSyncInterval as the manager
// runs, and its resident memory. The clusters share one set of CAs: Cluster API's bootstrap
// provider makes them, not the manager, and each cluster keeps its own copy. Run with
// -benchtime 1x: each run boots its clusters once.
func BenchmarkIdleInMemoryClusters(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			for range b.N {
				benchIdleInMemoryClusters(b, n)
			}
		})
	}
}

// benchRecords is a StateStore in memory that counts what it holds, as the manager's Secrets.
type benchRecords struct {
	records
}

func (r *benchRecords) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	total := 0
	for _, d := range r.data {
		total += len(d)
	}
	return total
}

func benchIdleInMemoryClusters(b *testing.B, n int) {
	ctx := context.Background()
	certificates := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certificates.Generate(); err != nil {
		b.Fatal(err)
	}
	store := &benchRecords{records{data: map[string][]byte{}}}
	// The sync loop stays idle: the benchmark syncs itself, to time one save of every record.
	opts := inmemory.EngineOptions{Address: "127.0.0.4", State: store, GroupLabel: clusterLabel, SyncInterval: time.Hour}
	e := inmemory.NewEngine(opts)
	closed := false
	defer func() {
		if !closed {
			_ = e.Close()
		}
	}()
	m := NewManager(container.WithTimeouts(e, container.DefaultTimeouts), ManagerOptions{})
	heap0, goroutines0 := liveHeap(), runtime.NumGoroutine()

	began := time.Now()
	endpoints := bootInMemoryClusters(ctx, b, m, n, certificates)
	boot := time.Since(began)

	began = time.Now()
	if err := e.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	save := time.Since(began)
	if got := len(store.data); got != n {
		b.Fatalf("%d records after a sync, want %d", got, n)
	}

	millicores := restingCPU(ctx, b, e, *benchInMemoryRest)
	heap, goroutines := liveHeap(), runtime.NumGoroutine()
	writeHeapProfile(b)
	rss := residentMiB()

	// The manager stops and starts again: a new engine takes in every record.
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	closed = true
	began = time.Now()
	again := inmemory.NewEngine(opts)
	restore := time.Since(began)
	defer func() { _ = again.Close() }()
	expectInMemoryClusters(ctx, b, again, n, endpoints, certificates)

	per := float64(n)
	b.ReportMetric(float64(heap-heap0)/1024/per, "heap-KiB/cluster")
	b.ReportMetric(float64(goroutines-goroutines0)/per, "goroutines/cluster")
	b.ReportMetric(float64(boot.Milliseconds())/per, "boot-ms/cluster")
	b.ReportMetric(float64(store.size())/1024/per, "record-KiB/cluster")
	b.ReportMetric(float64(save.Microseconds())/1000/per, "save-ms/cluster")
	b.ReportMetric(float64(restore.Microseconds())/1000/per, "restore-ms/cluster")
	b.ReportMetric(millicores, "idle-millicores")
	b.ReportMetric(rss, "RSS-MiB")
	b.ReportMetric(0, "ns/op")
}

// bootInMemoryClusters boots n clusters of 1+9, inMemoryBenchWorkers at a time, and returns
// their endpoints.
func bootInMemoryClusters(ctx context.Context, b *testing.B, m *Manager, n int, certificates secret.Certificates) []string {
	b.Helper()
	endpoints := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, inMemoryBenchWorkers)
	for range inMemoryBenchWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				endpoint, err := bootInMemoryCluster(ctx, m, benchClusterKey(i), certificates)
				if err != nil {
					errs <- err
					return
				}
				endpoints[i] = endpoint
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return endpoints
}

func benchClusterKey(i int) ClusterKey {
	return ClusterKey{Namespace: "bench", Name: fmt.Sprintf("c-%04d", i)}
}

// bootInMemoryCluster makes a cluster's network and load balancer, then its control plane node
// (kubeadm init) and nine workers (kubeadm join), and returns its endpoint.
func bootInMemoryCluster(ctx context.Context, m *Manager, key ClusterKey, certificates secret.Certificates) (string, error) {
	network, err := m.ClusterNetwork(ctx, key, "")
	if err != nil {
		return "", err
	}
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		return "", err
	}
	lb, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Port: APIServerPort})
	if err != nil {
		return "", err
	}
	endpoint := fmt.Sprintf("%s:%d", lb.Address(network), lb.Port)
	if err := bootInMemoryNode(ctx, m, key, network, "cp-0", RoleControlPlane, bootstrapdata.Init(endpoint, certificates)); err != nil {
		return "", err
	}
	join := bootstrapdata.Join(endpoint)
	for w := range 9 {
		if err := bootInMemoryNode(ctx, m, key, network, fmt.Sprintf("md-0-%d", w), RoleWorker, join); err != nil {
			return "", err
		}
	}
	return endpoint, nil
}

// bootInMemoryNode does what the DockyardMachine reconciler does for a new node: adds it,
// waits for it to be ready, configures its containerd, starts its bootstrap data and waits
// for it to succeed.
func bootInMemoryNode(ctx context.Context, m *Manager, key ClusterKey, network, machine string, role Role, cloudConfig string) error {
	node, err := m.AddNode(ctx, NodeSpec{Cluster: key, Machine: machine, Image: "localhost/dockyard/node:v1.34.4", Role: role, Network: network})
	if err != nil {
		return err
	}
	for {
		st, err := node.Ready(ctx)
		if err != nil {
			return err
		}
		if st.Ready {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := node.ConfigureContainerd(ctx, patch.Containerd{}); err != nil {
		return err
	}
	plan, err := bootstrap.Parse(bootstrap.FormatCloudConfig, []byte(cloudConfig), bootstrap.Options{Hostname: node.Hostname})
	if err != nil {
		return err
	}
	if err := node.StartBootstrap(ctx, plan, time.Minute); err != nil {
		return err
	}
	for {
		st, err := node.BootstrapStatus(ctx, time.Minute)
		switch {
		case err != nil:
			return err
		case st.Phase == bootstrap.Succeeded:
			return nil
		case st.Phase != bootstrap.Running && st.Phase != bootstrap.NotStarted:
			return errors.Errorf("node %s's bootstrap: %+v", node.Name, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// restingCPU is the process's CPU in millicores over d while the clusters rest, the engine
// synced every DefaultSyncInterval as the manager's engine is.
func restingCPU(ctx context.Context, b *testing.B, e *inmemory.Engine, d time.Duration) float64 {
	b.Helper()
	runtime.GC()
	cpu0, began := processCPU(b), time.Now()
	sync := time.NewTicker(inmemory.DefaultSyncInterval)
	defer sync.Stop()
	rest := time.After(d)
	for {
		select {
		case <-sync.C:
			if err := e.Sync(ctx); err != nil {
				b.Fatal(err)
			}
		case <-rest:
			return float64(processCPU(b)-cpu0) / float64(time.Since(began)) * 1000
		}
	}
}

// processCPU is the CPU time the process used so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// residentMiB is the process's resident memory (VmRSS), 0 where /proc does not say.
func residentMiB() float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kib, _ := strconv.ParseFloat(f[1], 64)
			return kib / 1024
		}
	}
	return 0
}

func writeHeapProfile(b *testing.B) {
	if *benchInMemoryHeapProfile == "" {
		return
	}
	f, err := os.Create(*benchInMemoryHeapProfile)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// expectInMemoryClusters fails the benchmark unless the engine holds every cluster's nodes and
// serves the first and the last cluster with their ten Nodes.
func expectInMemoryClusters(ctx context.Context, b *testing.B, e *inmemory.Engine, n int, endpoints []string, certificates secret.Certificates) {
	b.Helper()
	if got := len(e.ContainerNames()); got < n*10 {
		b.Fatalf("%d containers restored, want the %d nodes and the load balancers", got, n*10)
	}
	for _, i := range []int{0, n - 1} {
		cl, err := bootstrapdata.Client(endpoints[i], certificates)
		if err != nil {
			b.Fatal(err)
		}
		var nodes corev1.NodeList
		if err := cl.List(ctx, &nodes); err != nil || len(nodes.Items) != 10 {
			b.Fatalf("cluster %s restored at %s: %d Nodes (%v), want 10", benchClusterKey(i), endpoints[i], len(nodes.Items), err)
		}
	}
}
