package controllers

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// BenchmarkProvisionMachines drives N DockyardMachines from creation to provisioned through
// the real manager (both reconcilers, ClusterCache, webhooks) against a real kube-apiserver,
// with the fake container engine standing in for Docker. It reports machines provisioned per
// second, the p50 and p99 time from creating a DockyardMachine to seeing it provisioned, and
// the peak resident memory of the process running the manager.
//
//	go test ./controllers -run '^$' -bench BenchmarkProvisionMachines -benchtime 1x
func BenchmarkProvisionMachines(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			for range b.N {
				provisionMany(b, n)
			}
		})
	}
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
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-md-%d", name, i)}}
		if err := env.Client.Create(ctx, node); err != nil {
			b.Fatal(err)
		}
	}

	// Record when each machine is first seen provisioned, from the manager's own informer.
	var mu sync.Mutex
	created := map[string]time.Time{}
	provisioned := map[string]time.Time{}
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

	b.StartTimer()
	start := time.Now()
	for i := range n {
		mname := fmt.Sprintf("%s-md-%d", name, i)
		mu.Lock()
		created[mname] = time.Now()
		mu.Unlock()
		envMachine(ctx, b, cluster, mname, false)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		mu.Lock()
		b.Fatalf("only %d of %d machines provisioned after 10m", len(provisioned), n)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	var latencies []time.Duration
	mu.Lock()
	for m, t := range provisioned {
		latencies = append(latencies, t.Sub(created[m]))
	}
	mu.Unlock()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(n)/elapsed.Seconds(), "machines/s")
	b.ReportMetric(percentile(latencies, 0.50).Seconds(), "p50-s")
	b.ReportMetric(percentile(latencies, 0.99).Seconds(), "p99-s")
	b.ReportMetric(peakRSSMiB(), "peak-RSS-MiB")

	// Machines stop requeueing once Cluster API links them to their Nodes; do it for them and
	// clean up so the next run starts from an idle manager.
	cleanupBench(ctx, b, cluster, n, name)
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
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
	for i := range n {
		mname := fmt.Sprintf("%s-md-%d", name, i)
		m := &clusterv1.Machine{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: mname}, m); err == nil {
			original := m.DeepCopy()
			m.Status.NodeRef = clusterv1.MachineNodeReference{Name: mname}
			_ = env.Client.Status().Patch(ctx, m, client.MergeFrom(original))
		}
	}
	if err := env.Client.DeleteAllOf(ctx, &infrav1.DockyardMachine{}, client.InNamespace(cluster.Namespace)); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		list := &infrav1.DockyardMachineList{}
		if err := env.Client.List(ctx, list, client.InNamespace(cluster.Namespace)); err == nil && len(list.Items) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = env.Client.DeleteAllOf(ctx, &corev1.Node{}, client.MatchingLabels{})
}
