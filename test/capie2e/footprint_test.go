package capie2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Two summaries of a management node 15 s apart, as the kubelet serves them
// (testdata/footprint: k8s.io/kubelet v0.34.4's stats.Summary marshalled): Dockyard's manager
// and Cluster API's core controller in both, a kubeadm bootstrap controller whose first
// reading has no CPU rate yet, and kube-system's API server, which is no controller but the
// management cluster's own, as are the node and its kubelet.
func TestFootprintSummarisesTheControllers(t *testing.T) {
	s := newFootprintStats(controllerNamespaces(), time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC))
	for _, name := range []string{"summary-0.json", "summary-1.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", "footprint", name))
		if err != nil {
			t.Fatal(err)
		}
		sum, err := parseSummary(raw)
		if err != nil {
			t.Fatal(err)
		}
		s.add(sum)
		s.samples++
	}
	r := s.report(time.Date(2026, 12, 7, 11, 0, 15, 0, time.UTC))
	r.Interval = DefaultFootprintInterval
	want := []ContainerFootprint{
		{Namespace: "capi-kubeadm-bootstrap-system", Pod: "capi-kubeadm-bootstrap-controller-manager-5f6d7-qwert", Container: "manager",
			PeakWorkingSet: 70 << 20, LastWorkingSet: 70 << 20},
		{Namespace: "capi-system", Pod: "capi-controller-manager-6b8d9f7c4-abcde", Container: "manager",
			PeakWorkingSet: 110 << 20, LastWorkingSet: 100 << 20, MeanMilliCPU: 200, HasCPU: true},
		{Namespace: "dockyard-system", Pod: "dockyard-controller-manager-7d9f8c6b5-x2x4q", Container: "manager",
			PeakWorkingSet: 400 << 20, LastWorkingSet: 400 << 20, MeanMilliCPU: 500, HasCPU: true},
	}
	if diff := cmp.Diff(want, r.Containers); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	wantPlatform := []ContainerFootprint{
		{Pod: "dockyard-capie2e-control-plane", Container: "(the node)",
			PeakWorkingSet: 3 << 30, LastWorkingSet: 3 << 30, MeanMilliCPU: 1200, HasCPU: true},
		{Pod: "dockyard-capie2e-control-plane", Container: "kubelet",
			PeakWorkingSet: 60 << 20, LastWorkingSet: 60 << 20, MeanMilliCPU: 0, HasCPU: true},
		{Namespace: "kube-system", Pod: "kube-apiserver-dockyard-capie2e-control-plane", Container: "kube-apiserver",
			PeakWorkingSet: 900 << 20, LastWorkingSet: 900 << 20, MeanMilliCPU: 600, HasCPU: true},
	}
	if diff := cmp.Diff(wantPlatform, r.Platform); diff != "" {
		t.Errorf("the management cluster's own (-want +got):\n%s", diff)
	}

	text := r.String()
	for _, line := range []string{
		"sampled every 15s from the kubelets' summary API",
		"from 2026-12-07T11:00:00Z to 2026-12-07T11:00:15Z (15s): 2 samples, 0 failed",
		"dockyard-system  dockyard-controller-manager-7d9f8c6b5-x2x4q  manager  400.0  400.0  500",
		"capi-system  capi-controller-manager-6b8d9f7c4-abcde  manager  110.0  100.0  200",
		"manager  70.0  70.0  n/a",
		"Restarts: none",
	} {
		if !strings.Contains(squeeze(text), line) {
			t.Errorf("footprint.txt lacks %q:\n%s", line, text)
		}
	}
	controllers, platform, _ := strings.Cut(text, "The management cluster's own Pods and nodes:")
	if strings.Contains(controllers, "kube-apiserver") || !strings.Contains(squeeze(platform), "kube-system  kube-apiserver-dockyard-capie2e-control-plane  kube-apiserver  900.0  900.0  600") ||
		!strings.Contains(squeeze(platform), "-  dockyard-capie2e-control-plane  (the node)  3072.0  3072.0  1200") {
		t.Errorf("footprint.txt does not list the API server and the node apart from the controllers:\n%s", text)
	}

	dir := filepath.Join(t.TempDir(), "scale")
	path, err := r.WriteFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != text || filepath.Base(path) != "footprint.txt" {
		t.Errorf("WriteFile wrote %s: %q, %v", path, got, err)
	}
}

// squeeze turns each run of two blanks or more into two, as between the table's columns.
func squeeze(s string) string {
	return regexp.MustCompile(` {2,}`).ReplaceAllString(s, "  ")
}

// A container that restarted between two samples starts its CPU counter again: the mean is
// taken over its new run, never from a negative difference.
func TestFootprintCPUOfARestartedContainer(t *testing.T) {
	at := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	reading := func(started, sec int, coreNs uint64) containerSummary {
		c := containerSummary{Name: "manager", StartTime: metav1.NewTime(at.Add(time.Duration(started) * time.Second))}
		c.CPU = &cpuSummary{Time: metav1.NewTime(at.Add(time.Duration(sec) * time.Second)), UsageCoreNanoSeconds: ptr.To(coreNs)}
		return c
	}
	cs := &containerStats{}
	cs.add(reading(0, 0, 50e9))
	cs.add(reading(0, 15, 60e9))
	cs.add(reading(20, 30, 1e9)) // restarted at 20 s
	cs.add(reading(20, 45, 4e9))
	if got, ok := cs.meanMilliCPU(); !ok || got != 200 {
		t.Errorf("mean CPU %v millicores (ok %v), want 200 over the run after the restart", got, ok)
	}
}

// A controller restarted during a spec is named, with how it last ended; a replaced Pod too;
// a Pod whose containers kept running is not.
func TestFootprintRestarts(t *testing.T) {
	pod := func(ns, name string, restarts int32, last *corev1.ContainerStateTerminated) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name: "manager", RestartCount: restarts, LastTerminationState: corev1.ContainerState{Terminated: last},
			}}},
		}
	}
	oom := &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(time.Date(2026, 12, 7, 11, 30, 0, 0, time.UTC))}
	before := []corev1.Pod{
		pod("dockyard-system", "dockyard-controller-manager-a", 1, nil),
		pod("capi-system", "capi-controller-manager-b", 0, nil),
		pod("capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-controller-manager-c", 0, nil),
	}
	after := []corev1.Pod{
		pod("dockyard-system", "dockyard-controller-manager-a", 3, oom),
		pod("capi-system", "capi-controller-manager-b", 0, nil),
		pod("capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-controller-manager-d", 0, nil),
	}
	want := []string{
		"Pod capi-kubeadm-control-plane-system/capi-kubeadm-control-plane-controller-manager-c is gone: the controller was replaced",
		"container manager of Pod dockyard-system/dockyard-controller-manager-a restarted 2 times (last ended: OOMKilled, exit code 137, at 2026-12-07T11:30:00Z)",
	}
	got := restarts(before, after)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restarts (-want +got):\n%s", diff)
	}
	if got := restarts(before, before); len(got) != 0 {
		t.Errorf("restarts of unchanged Pods: %q", got)
	}
	r := &FootprintReport{Restarts: got}
	if !strings.Contains(r.String(), "Restarts:\n  Pod capi-kubeadm-control-plane-system/") {
		t.Errorf("footprint.txt does not list the restarts:\n%s", r.String())
	}
}

func TestParseSummaryRefusesWhatIsNoSummary(t *testing.T) {
	if _, err := parseSummary([]byte("<html>Bad Gateway</html>")); err == nil {
		t.Error("parseSummary accepted HTML")
	}
}

// The host's busy CPU is the non-idle clock ticks over the time between two readings; the
// spec's process its own CPU time over the same; readings without counters give nothing.
func TestHostFootprint(t *testing.T) {
	start := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	a := hostReading{at: start, busy: 1000, all: 5000, self: 2 * time.Second, ticksKnown: true}
	b := hostReading{at: start.Add(10 * time.Second), busy: 2500, all: 7000, self: 7 * time.Second, ticksKnown: true}
	h := hostFootprint(a, b, 12.5)
	if h.Cores == 0 || h.BusyMilliCPU != 1500 || h.SelfMilliCPU != 500 || h.PeakLoad1 != 12.5 {
		t.Errorf("hostFootprint = %+v, want 1500 busy, 500 self, load 12.5", h)
	}
	if h := hostFootprint(hostReading{at: start}, b, 1); h != (HostFootprint{}) {
		t.Errorf("without a first reading of the counters: %+v, want nothing", h)
	}
	if r := readHost(); !r.ticksKnown || r.busy == 0 || r.busy > r.all {
		t.Errorf("readHost on this Linux host = %+v", r)
	}
}

// The API server's request counters, read before and after: what was served between, by kind,
// the most first; a counter that went down (the API server restarted) counts nothing.
func TestRequestFootprint(t *testing.T) {
	before := parseRequestCounts(`# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",dry_run="",group="cluster.x-k8s.io",resource="machines",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 10
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 100
`)
	after := parseRequestCounts(`apiserver_request_total{code="200",component="apiserver",dry_run="",group="cluster.x-k8s.io",resource="machines",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="cluster.x-k8s.io",resource="machines",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="POST",version="v1"} 12
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 3
`)
	got := requestFootprint(before, after, 1)
	want := RequestFootprint{Total: 39, Top: []RequestCount{{Kind: "PATCH machines/status", Count: 32}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requestFootprint (-want +got):\n%s", diff)
	}
	if s := got.String(); !strings.Contains(s, "served 39 requests") || !strings.Contains(s, "32  PATCH machines/status") {
		t.Errorf("String() = %q", s)
	}
}
