package capie2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
)

// DefaultFootprintInterval is how often a Footprint samples the controllers when its input
// names no interval.
const DefaultFootprintInterval = 15 * time.Second

// FootprintInput says what a Footprint watches.
type FootprintInput struct {
	// ClientSet reaches the management cluster's API server; the kubelets' summary API is read
	// through it (nodes/<node>/proxy/stats/summary).
	ClientSet kubernetes.Interface
	// Namespaces hold the controllers watched. Empty: Dockyard's manager and Cluster API's core,
	// kubeadm bootstrap and kubeadm control plane controllers, in the namespaces clusterctl init
	// installs them into.
	Namespaces []string
	// Interval between samples; DefaultFootprintInterval when zero.
	Interval time.Duration
}

// controllerNamespaces are the namespaces clusterctl init installs Dockyard's and Cluster API's
// controllers into.
func controllerNamespaces() []string {
	return []string{"dockyard-system", "capi-system", "capi-kubeadm-bootstrap-system", "capi-kubeadm-control-plane-system"}
}

// platformNamespace holds the management cluster's own Pods: its API server, etcd, controller
// manager and scheduler. A Footprint reports them beside the controllers, as the whole's cost.
const platformNamespace = "kube-system"

// Footprint samples, while a spec runs, the memory (working set) and CPU of every container of
// the management cluster's controllers from the kubelets' summary API, and notes their restarts;
// beside them, what the whole costs: the management cluster's own Pods (kube-system) and nodes,
// and the host the spec runs on (its CPU and load, and the spec's own process).
// StartFootprint starts it; Stop ends it and says what it saw. Its methods are not safe for
// concurrent use.
type Footprint struct {
	input     FootprintInput
	before    []corev1.Pod
	stats     *footprintStats
	hostStart hostReading
	// requests are the API server's request counters when the sampling began; nil when they
	// could not be read.
	requests requestCounts
	cancel   context.CancelFunc
	stopped  chan struct{}
}

// StartFootprint lists the controllers' Pods (their restart counts are the baseline Stop
// compares with), takes a first sample and samples every input.Interval until Stop. A sample
// that fails is counted and its error kept for the report; it does not stop the sampling.
func StartFootprint(ctx context.Context, input FootprintInput) (*Footprint, error) {
	if input.ClientSet == nil {
		return nil, errors.New("FootprintInput.ClientSet is required")
	}
	if len(input.Namespaces) == 0 {
		input.Namespaces = controllerNamespaces()
	}
	if input.Interval <= 0 {
		input.Interval = DefaultFootprintInterval
	}
	before, err := controllerPods(ctx, input.ClientSet, watchedNamespaces(input.Namespaces))
	if err != nil {
		return nil, err
	}
	f := &Footprint{
		input: input, before: before, stats: newFootprintStats(input.Namespaces, time.Now()),
		hostStart: readHost(), stopped: make(chan struct{}),
	}
	if f.requests, err = readRequestCounts(ctx, input.ClientSet); err != nil {
		ctrl.LoggerFrom(ctx).Info("The API server's request counters are not in the footprint", "err", err.Error())
	}
	f.sample(ctx)
	sampling, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	go func() {
		defer close(f.stopped)
		ticker := time.NewTicker(input.Interval)
		defer ticker.Stop()
		for {
			select {
			case <-sampling.Done():
				return
			case <-ticker.C:
				f.sample(sampling)
			}
		}
	}()
	return f, nil
}

// Stop ends the sampling, takes a last sample, lists the controllers' Pods again and returns
// the report: each container's peak and last working set and mean CPU, and the controllers
// that restarted (a container whose restart count went up, a Pod that is gone) since
// StartFootprint.
func (f *Footprint) Stop(ctx context.Context) (*FootprintReport, error) {
	f.cancel()
	<-f.stopped
	f.sample(ctx)
	after, err := controllerPods(ctx, f.input.ClientSet, watchedNamespaces(f.input.Namespaces))
	if err != nil {
		return nil, err
	}
	r := f.stats.report(time.Now())
	r.Interval = f.input.Interval
	r.Restarts = restarts(f.before, after)
	r.Host = hostFootprint(f.hostStart, readHost(), f.stats.peakLoad())
	if f.requests != nil {
		if now, err := readRequestCounts(ctx, f.input.ClientSet); err == nil {
			served := requestFootprint(f.requests, now, 12)
			r.Requests = &served
		}
	}
	return r, nil
}

// watchedNamespaces are the namespaces whose Pods' restarts fail a spec: the controllers' and
// the management cluster's own.
func watchedNamespaces(controllers []string) []string {
	return append(append([]string{}, controllers...), platformNamespace)
}

// sample reads every node's summary and adds the controllers' containers to the statistics.
func (f *Footprint) sample(ctx context.Context) {
	err := f.readSummaries(ctx)
	load := readLoad()
	f.stats.mu.Lock()
	defer f.stats.mu.Unlock()
	f.stats.samples++
	f.stats.load1 = max(f.stats.load1, load)
	if err != nil {
		f.stats.failed++
		f.stats.lastError = err.Error()
		ctrl.LoggerFrom(ctx).Info("Sampling the controllers' footprint failed", "err", err.Error())
	}
}

func (f *Footprint) readSummaries(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, f.input.Interval)
	defer cancel()
	nodes, err := f.input.ClientSet.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return errors.Wrap(err, "listing the management cluster's nodes")
	}
	for _, n := range nodes.Items {
		raw, err := f.input.ClientSet.CoreV1().RESTClient().Get().
			Resource("nodes").Name(n.Name).SubResource("proxy").Suffix("stats", "summary").DoRaw(ctx)
		if err != nil {
			return errors.Wrapf(err, "reading the summary API of node %s", n.Name)
		}
		s, err := parseSummary(raw)
		if err != nil {
			return errors.Wrapf(err, "node %s", n.Name)
		}
		f.stats.add(s)
	}
	return nil
}

// controllerPods lists the Pods of the controllers' namespaces.
func controllerPods(ctx context.Context, cs kubernetes.Interface, namespaces []string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, ns := range namespaces {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, errors.Wrapf(err, "listing the controllers' Pods in %s", ns)
		}
		out = append(out, pods.Items...)
	}
	return out, nil
}

// restarts says which controllers restarted between two listings of their Pods: a container
// whose restart count went up, or a Pod that is gone (replaced, evicted or deleted).
func restarts(before, after []corev1.Pod) []string {
	now := map[string]corev1.Pod{}
	for _, p := range after {
		now[string(p.UID)] = p
	}
	var out []string
	for _, p := range before {
		q, ok := now[string(p.UID)]
		if !ok {
			out = append(out, fmt.Sprintf("Pod %s/%s is gone: the controller was replaced", p.Namespace, p.Name))
			continue
		}
		counts := map[string]int32{}
		for _, c := range p.Status.ContainerStatuses {
			counts[c.Name] = c.RestartCount
		}
		for _, c := range q.Status.ContainerStatuses {
			if c.RestartCount <= counts[c.Name] {
				continue
			}
			msg := fmt.Sprintf("container %s of Pod %s/%s restarted %d times", c.Name, q.Namespace, q.Name, c.RestartCount-counts[c.Name])
			if t := c.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(" (last ended: %s, exit code %d, at %s)", t.Reason, t.ExitCode, t.FinishedAt.UTC().Format(time.RFC3339))
			}
			out = append(out, msg)
		}
	}
	sort.Strings(out)
	return out
}

// summary is the part of the kubelet's summary API (k8s.io/kubelet/pkg/apis/stats/v1alpha1)
// a Footprint reads.
type summary struct {
	Node struct {
		NodeName         string             `json:"nodeName"`
		StartTime        metav1.Time        `json:"startTime"`
		CPU              *cpuSummary        `json:"cpu"`
		Memory           *memorySummary     `json:"memory"`
		SystemContainers []containerSummary `json:"systemContainers"`
	} `json:"node"`
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Containers []containerSummary `json:"containers"`
	} `json:"pods"`
}

type containerSummary struct {
	Name      string         `json:"name"`
	StartTime metav1.Time    `json:"startTime"`
	CPU       *cpuSummary    `json:"cpu"`
	Memory    *memorySummary `json:"memory"`
}

type cpuSummary struct {
	Time                 metav1.Time `json:"time"`
	UsageNanoCores       *uint64     `json:"usageNanoCores"`
	UsageCoreNanoSeconds *uint64     `json:"usageCoreNanoSeconds"`
}

type memorySummary struct {
	WorkingSetBytes *uint64 `json:"workingSetBytes"`
}

func parseSummary(raw []byte) (*summary, error) {
	s := &summary{}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, errors.Wrap(err, "decoding the kubelet's summary")
	}
	return s, nil
}

// footprintStats accumulates the samples of each container.
type footprintStats struct {
	mu         sync.Mutex
	namespaces map[string]bool
	start      time.Time
	samples    int
	failed     int
	lastError  string
	load1      float64
	containers map[string]*containerStats
}

func (s *footprintStats) peakLoad() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load1
}

// containerStats are one container's samples: its peak and last working set, the first and
// last readings of its CPU counter in its current run, and the sum of the kubelet's CPU rates.
type containerStats struct {
	namespace, pod, container string
	platform                  bool
	peak, last                uint64
	started                   time.Time
	firstAt, lastAt           time.Time
	firstCPU, lastCPU         uint64
	rates                     uint64
	rateCount                 uint64
}

func newFootprintStats(namespaces []string, start time.Time) *footprintStats {
	set := map[string]bool{}
	for _, ns := range namespaces {
		set[ns] = true
	}
	return &footprintStats{namespaces: set, start: start, containers: map[string]*containerStats{}}
}

// add takes in one node's summary: the containers of Pods in the watched namespaces, those of
// the management cluster's own Pods, the node as a whole and its system containers (the
// kubelet, the container runtime).
func (s *footprintStats) add(sum *summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range sum.Pods {
		platform := p.PodRef.Namespace == platformNamespace
		if !platform && !s.namespaces[p.PodRef.Namespace] {
			continue
		}
		for _, c := range p.Containers {
			s.container(p.PodRef.Namespace, p.PodRef.Name, c.Name, platform).add(c)
		}
	}
	n := sum.Node
	s.container("", n.NodeName, "(the node)", true).add(containerSummary{Name: "(the node)", StartTime: n.StartTime, CPU: n.CPU, Memory: n.Memory})
	for _, c := range n.SystemContainers {
		if c.Name == "pods" {
			continue // the Pods, counted above
		}
		s.container("", n.NodeName, c.Name, true).add(c)
	}
}

func (s *footprintStats) container(namespace, pod, name string, platform bool) *containerStats {
	key := namespace + "/" + pod + "/" + name
	cs := s.containers[key]
	if cs == nil {
		cs = &containerStats{namespace: namespace, pod: pod, container: name, platform: platform}
		s.containers[key] = cs
	}
	return cs
}

func (cs *containerStats) add(c containerSummary) {
	if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
		cs.last = *c.Memory.WorkingSetBytes
		cs.peak = max(cs.peak, cs.last)
	}
	if c.CPU == nil {
		return
	}
	if c.CPU.UsageNanoCores != nil {
		cs.rates += *c.CPU.UsageNanoCores
		cs.rateCount++
	}
	if c.CPU.UsageCoreNanoSeconds == nil {
		return
	}
	counter, at := *c.CPU.UsageCoreNanoSeconds, c.CPU.Time.Time
	if cs.firstAt.IsZero() || !c.StartTime.Time.Equal(cs.started) || counter < cs.lastCPU {
		// The first reading of this run of the container: a restarted container's counter
		// starts again from zero.
		cs.started, cs.firstAt, cs.firstCPU = c.StartTime.Time, at, counter
	}
	cs.lastAt, cs.lastCPU = at, counter
}

// meanMilliCPU is the container's mean CPU in millicores: from its CPU counter over its latest
// run sampled, or, with fewer than two readings of it, the mean of the kubelet's rates.
// ok is false without any reading.
func (cs *containerStats) meanMilliCPU() (float64, bool) {
	if d := cs.lastAt.Sub(cs.firstAt); d > 0 {
		return float64(cs.lastCPU-cs.firstCPU) / float64(d.Nanoseconds()) * 1000, true
	}
	if cs.rateCount > 0 {
		return float64(cs.rates) / float64(cs.rateCount) / 1e6, true
	}
	return 0, false
}

// FootprintReport is what a Footprint saw while a spec ran.
type FootprintReport struct {
	// Start and End bound the sampling.
	Start, End time.Time
	// Interval between samples.
	Interval time.Duration
	// Samples taken, and how many of them failed (LastError says why the last one did).
	Samples, FailedSamples int
	LastError              string
	// Containers of the controllers, by namespace, Pod and container name.
	Containers []ContainerFootprint
	// Platform is the management cluster's own: its kube-system containers, and each node as a
	// whole (Namespace empty, Pod the node's name, Container "(the node)") with its system
	// containers (the kubelet, the runtime).
	Platform []ContainerFootprint
	// Host is the machine the spec ran on, the management cluster's nodes included.
	Host HostFootprint
	// Requests the management cluster's API server served; nil when its metrics could not be
	// read.
	Requests *RequestFootprint
	// Restarts name the controllers (or the management cluster's own Pods) that restarted
	// during the spec; empty when none did.
	Restarts []string
}

// ContainerFootprint is one controller container's footprint over a spec.
type ContainerFootprint struct {
	Namespace, Pod, Container string
	// PeakWorkingSet and LastWorkingSet are the largest and the last working set sampled, in
	// bytes.
	PeakWorkingSet, LastWorkingSet uint64
	// MeanMilliCPU is the container's mean CPU over the spec in millicores; HasCPU is false
	// when the kubelet reported none.
	MeanMilliCPU float64
	HasCPU       bool
}

func (s *footprintStats) report(end time.Time) *FootprintReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &FootprintReport{Start: s.start, End: end, Samples: s.samples, FailedSamples: s.failed, LastError: s.lastError}
	for _, cs := range s.containers {
		cpu, ok := cs.meanMilliCPU()
		c := ContainerFootprint{
			Namespace: cs.namespace, Pod: cs.pod, Container: cs.container,
			PeakWorkingSet: cs.peak, LastWorkingSet: cs.last, MeanMilliCPU: cpu, HasCPU: ok,
		}
		if cs.platform {
			r.Platform = append(r.Platform, c)
		} else {
			r.Containers = append(r.Containers, c)
		}
	}
	sortContainers(r.Containers)
	sortContainers(r.Platform)
	return r
}

func sortContainers(cs []ContainerFootprint) {
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		return a.Namespace+"/"+a.Pod+"/"+a.Container < b.Namespace+"/"+b.Pod+"/"+b.Container
	})
}

// String is the report as footprint.txt holds it: the sampling, a table of the containers
// and the restarts.
func (r *FootprintReport) String() string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "The management cluster's controllers, sampled every %s from the kubelets' summary API\n", r.Interval)
	fmt.Fprintf(b, "from %s to %s (%s): %d samples, %d failed", r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339),
		r.End.Sub(r.Start).Round(time.Second), r.Samples, r.FailedSamples)
	if r.LastError != "" {
		fmt.Fprintf(b, " (the last: %s)", r.LastError)
	}
	b.WriteString("\n\n")
	writeContainers(b, r.Containers)
	if len(r.Containers) == 0 {
		b.WriteString("(no sample had a container of the controllers)\n")
	}
	if len(r.Platform) > 0 {
		b.WriteString("\nThe management cluster's own Pods and nodes:\n")
		writeContainers(b, r.Platform)
	}
	if h := r.Host; h.Cores > 0 {
		fmt.Fprintf(b, "\nThe host: %d cores, busy %.0f millicores on average, load average (1 min) at most %.1f; the spec's own process %.0f millicores\n",
			h.Cores, h.BusyMilliCPU, h.PeakLoad1, h.SelfMilliCPU)
	}
	if r.Requests != nil {
		b.WriteString("\n" + r.Requests.String())
	}
	if len(r.Restarts) == 0 {
		b.WriteString("\nRestarts: none\n")
	} else {
		b.WriteString("\nRestarts:\n  " + strings.Join(r.Restarts, "\n  ") + "\n")
	}
	return b.String()
}

func writeContainers(b *strings.Builder, cs []ContainerFootprint) {
	w := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "namespace\tpod\tcontainer\tworking set, peak (MiB)\tlast (MiB)\tCPU, mean (millicores)")
	for _, c := range cs {
		cpu := "n/a"
		if c.HasCPU {
			cpu = fmt.Sprintf("%.0f", c.MeanMilliCPU)
		}
		ns := c.Namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%.1f\t%.1f\t%s\n", ns, c.Pod, c.Container, mib(c.PeakWorkingSet), mib(c.LastWorkingSet), cpu)
	}
	_ = w.Flush()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// WriteFile writes the report as footprint.txt into dir, which it makes if missing, and
// returns the file's path.
func (r *FootprintReport) WriteFile(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", errors.Wrapf(err, "making %s", dir)
	}
	path := filepath.Join(dir, "footprint.txt")
	if err := os.WriteFile(path, []byte(r.String()), 0o644); err != nil {
		return "", errors.Wrapf(err, "writing %s", path)
	}
	return path, nil
}
