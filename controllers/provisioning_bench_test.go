package controllers

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// BenchmarkProvisionMachines drives N DockyardMachines from creation to provisioned through
// the real manager (both reconcilers, ClusterCache, webhooks) against a real kube-apiserver,
// with the fake container engine standing in for Docker. The machines are created by
// benchWorkers goroutines at once, like a MachineDeployment scaled up. It reports machines
// provisioned per second, the p50 and p99 time from creating a DockyardMachine to seeing it
// provisioned, reconciles and API server writes per machine (the benchmark's own three creates
// included), and the peak resident memory of the process running the manager. The manager's
// clients have the shipped limits (cmd/manager's) unless -bench-raised-client-limits is given; the
// name says which (client=shipped or client=raised).
//
//	go test ./controllers -run '^$' -bench 'BenchmarkProvisionMachines/.*/machines=1000$' -benchtime 1x
func BenchmarkProvisionMachines(b *testing.B) {
	b.Run("client="+clientLimits(), func(b *testing.B) {
		for _, n := range []int{100, 1000, 3000, 10000} {
			b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
				for range b.N {
					provisionMany(b, n)
				}
			})
		}
	})
}

// benchHeapProfile names a file for the heap profile taken when the last machine is provisioned
// (after a garbage collection), to tell the manager's caches from the fake engine's containers
// and the benchmark's bookkeeping, which share the process:
//
//	go test ./controllers -run '^$' -bench 'machines=10000$' -benchtime 1x -args -bench-heap-profile=heap.prof
var benchHeapProfile = flag.String("bench-heap-profile", "", "write a heap profile here when every machine of BenchmarkProvisionMachines is provisioned")

// benchWorkers is how many goroutines create the benchmark's objects.
const benchWorkers = 16

// parallel runs do for 0..n-1 on benchWorkers goroutines and returns the first error.
func parallel(n int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  = make(chan int)
		once  sync.Once
		first error
	)
	for range benchWorkers {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func provisionMany(b *testing.B, n int) {
	ctx := context.Background()
	name := fmt.Sprintf("bench%d", time.Now().UnixNano()%1_000_000)
	b.StopTimer()
	cluster, _ := envCluster(ctx, b, name, false)
	patchClusterStatus(ctx, b, cluster, func(c *clusterv1.Cluster) {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	})
	// The kubelets register their Nodes right away in the "workload cluster" (the same API
	// server), so each machine also goes through setting its Node's providerID.
	if err := parallel(n, func(i int) error {
		return env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-md-%d", name, i)}})
	}); err != nil {
		b.Fatal(err)
	}

	// Record when each machine is first seen provisioned, from the manager's own informer.
	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	provisioned := make(map[string]time.Time, n)
	done := make(chan struct{})
	informer, err := env.Manager.GetCache().GetInformer(ctx, &infrav1.DockyardMachine{})
	if err != nil {
		b.Fatal(err)
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		dm, ok := obj.(*infrav1.DockyardMachine)
		if !ok || dm.Namespace != cluster.Namespace || !ptr.Deref(dm.Status.Initialization.Provisioned, false) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := provisioned[dm.Name]; !seen {
			provisioned[dm.Name] = time.Now()
			if len(provisioned) == n {
				close(done)
			}
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = informer.RemoveEventHandler(reg) }()

	reconciles0, writes0 := reconcileCount(b, "dockyardmachine"), apiWrites(ctx, b)
	b.StartTimer()
	start := time.Now()
	if err := parallel(n, func(i int) error {
		mname := fmt.Sprintf("%s-md-%d", name, i)
		mu.Lock()
		created[mname] = time.Now()
		mu.Unlock()
		return createEnvMachine(ctx, cluster, mname, false)
	}); err != nil {
		b.Fatal(err)
	}
	timeout := 10*time.Minute + time.Duration(n)*100*time.Millisecond
	select {
	case <-done:
	case <-time.After(timeout):
		mu.Lock()
		b.Fatalf("only %d of %d machines provisioned after %s", len(provisioned), n, timeout)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	liveHeap := liveHeapMiB(b)

	latencies := make([]time.Duration, 0, n)
	mu.Lock()
	for m, t := range provisioned {
		latencies = append(latencies, t.Sub(created[m]))
	}
	mu.Unlock()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(n)/elapsed.Seconds(), "machines/s")
	b.ReportMetric(percentile(latencies, 0.50).Seconds(), "p50-s")
	b.ReportMetric(percentile(latencies, 0.99).Seconds(), "p99-s")
	b.ReportMetric((reconcileCount(b, "dockyardmachine")-reconciles0)/float64(n), "reconciles/machine")
	b.ReportMetric((apiWrites(ctx, b)-writes0)/float64(n), "writes/machine")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")
	b.ReportMetric(liveHeap, "live-heap-MiB")

	// Machines stop requeueing once Cluster API links them to their Nodes; do it for them and
	// clean up so the next run starts from an idle manager.
	cleanupBench(ctx, b, cluster, n, name)
}

// reconcileCount is how many reconciles the named controller has run in this process.
func reconcileCount(b *testing.B, controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// apiWrites is how many create, update, patch and delete requests the API server has served,
// from its own metrics.
func apiWrites(ctx context.Context, b *testing.B) float64 {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		if !strings.Contains(line, `verb="POST"`) && !strings.Contains(line, `verb="PUT"`) &&
			!strings.Contains(line, `verb="PATCH"`) && !strings.Contains(line, `verb="DELETE"`) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// liveHeapMiB collects garbage and returns the Go heap still in use, writing it as a heap
// profile when -bench-heap-profile asks for one.
func liveHeapMiB(b *testing.B) float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if *benchHeapProfile != "" {
		f, err := os.Create(*benchHeapProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	// Right after a collection, the allocated bytes are the live ones (HeapInuse would add
	// the unused parts of its spans).
	return float64(ms.HeapAlloc) / (1 << 20)
}

// peakRSSMiB is the process's peak resident set size (VmHWM): the manager, its caches and the
// benchmark's own client, which share the process.
func peakRSSMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

func cleanupBench(ctx context.Context, b *testing.B, cluster *clusterv1.Cluster, n int, name string) {
	_ = parallel(n, func(i int) error {
		mname := fmt.Sprintf("%s-md-%d", name, i)
		m := &clusterv1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: mname}, m); err == nil {
			original := m.DeepCopy()
			m.Status.NodeRef = clusterv1.MachineNodeReference{Name: mname}
			_ = env.Client.Status().Patch(ctx, m, client.MergeFrom(original))
		}
		return nil
	})
	// One delete each: a delete collection of thousands outlasts the API server's timeout.
	if err := parallel(n, func(i int) error {
		dm := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: fmt.Sprintf("%s-md-%d", name, i)}}
		return client.IgnoreNotFound(env.Client.Delete(ctx, dm))
	}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5*time.Minute + time.Duration(n)*50*time.Millisecond)
	for time.Now().Before(deadline) {
		list := &infrav1.DockyardMachineList{}
		if err := env.Client.List(ctx, list, client.InNamespace(cluster.Namespace)); err == nil && len(list.Items) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = parallel(n, func(i int) error {
		return client.IgnoreNotFound(env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-md-%d", name, i)}}))
	})
}
