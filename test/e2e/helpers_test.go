//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	kindconstants "sigs.k8s.io/kind/pkg/cluster/constants"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/envtest"
	"github.com/dockyard-dev/dockyard/test/framework"
)

const testNamespacePrefix = "dockyard-e2e"

// Generous waits: two cores boot every node of a cluster.
const (
	clusterTimeout = 15 * time.Minute
	poll           = 2 * time.Second
)

// timingReport collects the wall time of each phase for docs/performance.md.
type timingReport struct {
	mu    sync.Mutex
	lines []string
}

func (r *timingReport) add(phase string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf("| %s | %s |", phase, d.Round(100*time.Millisecond)))
	fmt.Fprintf(GinkgoWriter, "TIMING %s: %s\n", phase, d.Round(100*time.Millisecond))
}

const timingsHeader = "| phase | wall time |\n|---|---|\n"

// rows are the table's rows, without its header.
func (r *timingReport) rows() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return ""
	}
	return strings.Join(r.lines, "\n") + "\n"
}

// clusterSpec is one workload cluster of the suite.
type clusterSpec struct {
	name         string
	namespace    string
	controlPlane int
	workers      int
	// mgmt is the client of the management cluster holding the cluster's objects; the
	// suite's plane when nil.
	mgmt client.Client
	// template is the flavor's file in templates/; cluster-template.yaml when empty.
	template string
}

func (c clusterSpec) client() client.Client {
	if c.mgmt != nil {
		return c.mgmt
	}
	return plane.Client()
}

func (c clusterSpec) key() docker.ClusterKey {
	return docker.ClusterKey{Namespace: c.namespace, Name: c.name}
}

// createCluster creates the namespace and the objects of the cluster's flavor (templates/
// cluster-template.yaml by default), rendered with clusterctl's variable processor.
func createCluster(ctx context.Context, c clusterSpec) { createClusterWith(ctx, c, nil) }

// createClusterWith is createCluster with more template variables; the objects are created with
// the cluster's own client (c.mgmt: a team's, say), the namespace by the suite.
func createClusterWith(ctx context.Context, c clusterSpec, vars map[string]string) {
	Expect(client.IgnoreAlreadyExists(plane.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}))).To(Succeed())
	values := map[string]string{
		"CLUSTER_NAME":                c.name,
		"NAMESPACE":                   c.namespace,
		"KUBERNETES_VERSION":          kubernetesVersion,
		"CONTROL_PLANE_MACHINE_COUNT": fmt.Sprint(c.controlPlane),
		"WORKER_MACHINE_COUNT":        fmt.Sprint(c.workers),
		"DOCKYARD_NODE_IMAGE":         nodeImageRepo + ":" + kubernetesVersion,
		"DOCKYARD_LB_IMAGE":           lbImage,
	}
	for k, v := range vars {
		values[k] = v
	}
	template := c.template
	if template == "" {
		template = "cluster-template.yaml"
	}
	rendered, err := framework.RenderTemplate(filepath.Join(envtest.RepoRoot(), "templates", template), values)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.CreateObjects(ctx, c.client(), rendered)).To(Succeed())
}

func getCluster(ctx context.Context, c clusterSpec) *clusterv1.Cluster {
	cluster := &clusterv1.Cluster{}
	Expect(c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, cluster)).To(Succeed())
	return cluster
}

// machines lists the cluster's Machines, control planes when controlPlane is true.
func machines(ctx context.Context, c clusterSpec, controlPlane bool) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	Expect(c.client().List(ctx, list, client.InNamespace(c.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
	var out []clusterv1.Machine
	for _, m := range list.Items {
		if _, cp := m.Labels[clusterv1.MachineControlPlaneLabel]; cp == controlPlane {
			out = append(out, m)
		}
	}
	return out
}

// workloadClient reads the cluster's kubeconfig secret, the way users get it.
func workloadClient(ctx context.Context, c clusterSpec) (client.Client, []byte) {
	secret := &corev1.Secret{}
	Expect(c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name + "-kubeconfig"}, secret)).To(Succeed())
	kubeconfig := secret.Data["value"]
	return clientFor(kubeconfig), kubeconfig
}

// clientFor is a client of the cluster a kubeconfig reaches, each request bounded by 10 s.
func clientFor(kubeconfig []byte) client.Client {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.Timeout = 10 * time.Second
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// waitMachinesRunning waits until the cluster has exactly the given machines, all Running
// with their Nodes Ready and carrying the DockyardMachine's providerID.
func waitMachinesRunning(ctx context.Context, c clusterSpec, controlPlanes, workers int) {
	Eventually(func(g Gomega) {
		cps, ws := machines(ctx, c, true), machines(ctx, c, false)
		g.Expect(cps).To(HaveLen(controlPlanes), "control plane machines")
		g.Expect(ws).To(HaveLen(workers), "worker machines")
		wl, _ := workloadClient(ctx, c)
		for _, m := range append(cps, ws...) {
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "machine %s is being deleted", m.Name)
			g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "machine %s phase", m.Name)
			dm := &infrav1.DockyardMachine{}
			g.Expect(c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: m.Spec.InfrastructureRef.Name}, dm)).To(Succeed())
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node yet", m.Name)
			node := &corev1.Node{}
			g.Expect(wl.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node)).To(Succeed())
			g.Expect(node.Spec.ProviderID).To(Equal(dm.Spec.ProviderID), "node %s providerID", node.Name)
			g.Expect(nodeReady(node)).To(BeTrue(), "node %s is not Ready", node.Name)
		}
		wlNodes := &corev1.NodeList{}
		g.Expect(wl.List(ctx, wlNodes)).To(Succeed())
		g.Expect(wlNodes.Items).To(HaveLen(controlPlanes+workers), "nodes in the workload cluster")
	}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// loadBalancerBackends returns the control plane nodes in the cluster's haproxy configuration.
func loadBalancerBackends(ctx context.Context, c clusterSpec) []string {
	var out bytes.Buffer
	code, err := engine.Exec(ctx, docker.LoadBalancerName(c.key()), container.ExecOptions{
		Cmd: []string{"cat", docker.LoadBalancerConfigPath}, Stdout: &out,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(code).To(Equal(0))
	var backends []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "server" {
			backends = append(backends, f[1])
		}
	}
	sort.Strings(backends)
	return backends
}

// nodeContainer is the name of a Machine's node container, from its providerID (Dockyard's
// "dockyard:////<container>"); its Kubernetes node name is the container's hostname.
func nodeContainer(m clusterv1.Machine) string {
	return strings.TrimPrefix(m.Spec.ProviderID, infrav1.ProviderIDPrefix)
}

// execInNode runs a command in a node container and returns its output.
func execInNode(ctx context.Context, node string, cmd ...string) (string, int) {
	var out bytes.Buffer
	code, err := engine.Exec(ctx, node, container.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &out})
	Expect(err).NotTo(HaveOccurred())
	return out.String(), code
}

// kubectl runs the kubectl built with the node image's Kubernetes version from the host.
func kubectl(kubeconfig []byte, args ...string) (string, error) {
	cache := os.Getenv("DOCKYARD_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "dockyard")
	}
	path := filepath.Join(artifacts, "kubeconfig-"+fmt.Sprint(time.Now().UnixNano()))
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return "", err
	}
	defer os.Remove(path)
	bin := filepath.Join(cache, "build", "kubernetes-"+kubernetesVersion, "bin", "kubectl")
	cmd := exec.Command(bin, append([]string{"--kubeconfig", path, "--request-timeout", "20s"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func meta(list client.ObjectList) int {
	switch l := list.(type) {
	case *clusterv1.MachineList:
		return len(l.Items)
	case *infrav1.DockyardMachineList:
		return len(l.Items)
	case *infrav1.DockyardClusterList:
		return len(l.Items)
	}
	return -1
}

// waitClusterAvailable waits until Cluster API reports the cluster's control plane initialized
// and the cluster Available; on a timeout it says why not (Available's reason and message,
// which name the conditions that are not yet true).
func waitClusterAvailable(ctx context.Context, c clusterSpec, timeout time.Duration) {
	Eventually(func(g Gomega) {
		cluster := getCluster(ctx, c)
		g.Expect(ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false)).To(BeTrue(), "cluster %s: control plane not initialized", c.name)
		available := conditions.Get(cluster, clusterv1.AvailableCondition)
		g.Expect(available).NotTo(BeNil(), "cluster %s has no Available condition", c.name)
		g.Expect(available.Status).To(Equal(metav1.ConditionTrue), "cluster %s not Available: %s: %s", c.name, available.Reason, available.Message)
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// apiPoller sends requests through the load balancer while a rollout runs and counts the
// failed ones.
type apiPoller struct {
	stop     chan struct{}
	done     chan struct{}
	total    int
	failures []string
}

func startAPIPoller(ctx context.Context, c clusterSpec) *apiPoller {
	wl, _ := workloadClient(ctx, c)
	p := &apiPoller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := wl.List(rctx, &corev1.NamespaceList{})
			cancel()
			p.total++
			if err != nil {
				p.failures = append(p.failures, fmt.Sprintf("%s: %v", time.Now().Format(time.TimeOnly), err))
			}
		}
	}()
	return p
}

func (p *apiPoller) finish() (int, []string) {
	close(p.stop)
	<-p.done
	return p.total, p.failures
}

// dumpEngine writes the engine's Dockyard containers and, for nodes, the tails of the
// kubelet journal and of the bootstrap output.
func dumpEngine(ctx context.Context, w io.Writer) {
	clusters, err := nodes.ListClusters(ctx)
	if err != nil {
		fmt.Fprintf(w, "listing Dockyard's clusters on the engine: %v\n", err)
		return
	}
	fmt.Fprintf(w, "\n===== Dockyard containers on the engine =====\n")
	var running []string
	for _, cl := range clusters {
		for _, name := range cl.Containers {
			c, err := engine.InspectContainer(ctx, name)
			if err != nil {
				fmt.Fprintf(w, "%s\t%v\n", name, err)
				continue
			}
			role := c.Labels["io.x-k8s.kind.role"]
			fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", c.Name, c.State, role, c.Networks)
			if c.Running && role != kindconstants.ExternalLoadBalancerNodeRoleValue {
				running = append(running, c.Name)
			}
		}
	}
	for _, name := range running {
		for _, cmd := range [][]string{
			{"tail", "-n", "40", "/var/lib/dockyard/bootstrap/output.log"},
			{"journalctl", "--no-pager", "-n", "40", "-u", "kubelet"},
			{"journalctl", "--no-pager", "-n", "20", "-u", "containerd"},
		} {
			var out bytes.Buffer
			_, _ = engine.Exec(ctx, name, container.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &out})
			fmt.Fprintf(w, "\n----- %s: %s -----\n%s", name, strings.Join(cmd, " "), bootstrap.Redact(out.String()))
		}
	}
}

// whenDone logs how long a phase took.
func whenDone(phase string, start time.Time) {
	timings.add(phase, time.Since(start))
}

var _ = By

// dockyardCLI is the dockyard command line, built into a directory of its own.
type dockyardCLI struct{ bin, dir string }

// newDockyardCLI builds the command line into a new empty directory.
func newDockyardCLI(ctx context.Context) *dockyardCLI {
	dir := GinkgoT().TempDir()
	cli := &dockyardCLI{bin: filepath.Join(dir, "dockyard"), dir: dir}
	build := exec.CommandContext(ctx, "go", "build", "-o", cli.bin, "./cmd/dockyard")
	// Static, as README says to build it: the binary makes Dockyard's manager image of itself.
	build.Dir, build.Env = envtest.RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the dockyard command line:\n%s", out)
	return cli
}

// run runs the command line against the suite's management plane and returns its standard
// output; its progress goes to the log. It runs in a directory that holds only the binary and
// what it writes there itself, without --clusterctl-config: the clusterctl repository it carries
// is all it has.
func (c *dockyardCLI) run(ctx context.Context, args ...string) string {
	out, err := c.exec(ctx, []string{"--management-kubeconfig", plane.Kubeconfig()}, args...)
	Expect(err).NotTo(HaveOccurred(), "dockyard %s", strings.Join(args, " "))
	return out
}

// exec runs the command line with the global flags before args, in the directory that holds
// only the binary, and returns its standard output; its progress goes to the log.
func (c *dockyardCLI) exec(ctx context.Context, global []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, slices.Concat(global, []string{"--kubeconfig-dir", c.dir}, args)...)
	cmd.Dir = c.dir
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, GinkgoWriter), GinkgoWriter
	if slices.Equal(args[:min(2, len(args))], []string{"get", "kubeconfig"}) {
		// A kubeconfig holds the cluster's admin client key: it stays out of the log.
		cmd.Stdout = &stdout
	}
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "dockyard %s: %s\n", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return stdout.String(), err
}

// deleteCluster deletes a cluster with dockyard delete cluster and finds nothing of it left on
// the engine.
func (c *dockyardCLI) deleteCluster(ctx context.Context, cl clusterSpec) {
	c.run(ctx, "delete", "cluster", cl.name, "-n", cl.namespace)
	left, err := nodes.Leftovers(ctx, cl.key())
	Expect(err).NotTo(HaveOccurred())
	Expect(left).To(BeNil(), "what dockyard delete cluster left of %s/%s", cl.namespace, cl.name)
}
