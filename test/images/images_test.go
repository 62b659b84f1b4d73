//go:build images

// Package images proves Dockyard's node image the way Dockyard's reconcilers use it, minus the
// controllers: node containers created by Dockyard's node layer (docker.Manager) on the real
// engine, bootstrap data rendered by Cluster API's kubeadm bootstrap provider (its cloudinit
// package and kubeadm types, with certificates and a bootstrap token made as it makes them),
// translated by pkg/bootstrap and run by the node layer's bootstrap runner. The control plane
// initialises and applies the CNI its image ships (images/cni/install-cni.sh, as the flavors
// do), a worker joins, a pod on the worker reaches a pod on the control
// plane over the pod network, and nothing is pulled from a registry.
//
// Run with `make test-images` (builds the images first). Everything the test creates carries
// the cluster label dockyard.x-k8s.io/cluster=dockyard-images/imgproof and is removed before
// and after; set DOCKYARD_IMAGES_KEEP=1 to keep a failed run's containers for inspection. The
// test ends with a table of timings and node memory; IMAGES_TIMINGS_DIR=<dir> also writes it
// there, one file per run. A failure prints the containers, each node's bootstrap output,
// failed units, kubelet and containerd journals, and the workload cluster's nodes, pods and
// warning events.
package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// Settings, from the environment `make test-images` sets.
var (
	kubernetesVersion = envOr("IMAGES_KUBERNETES_VERSION", "v1.34.4")
	nodeImage         = envOr("DOCKYARD_TEST_NODE_IMAGE", "localhost/dockyard/node:"+kubernetesVersion)
	flannelImage      = envOr("IMAGES_FLANNEL_IMAGE", "localhost/dockyard/flannel:v0.28.10")
)

// The test's cluster: its label (dockyard.x-k8s.io/cluster=dockyard-images/imgproof) is on
// every container, volume and network the test creates.
var cluster = docker.ClusterKey{Namespace: "dockyard-images", Name: "imgproof"}

const (
	// Not kind's default 10.244.0.0/16: the CNI the node applies must follow the cluster's.
	podSubnet        = "10.245.0.0/16"
	serviceSubnet    = "10.96.0.0/12"
	bootstrapTimeout = 10 * time.Minute
	// evictionHard is what Dockyard's cluster template gives kubelet (nodes share the host's
	// disk).
	evictionHard = "nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func TestNodeImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 38*time.Minute)
	defer cancel()

	// The engine the run chose (DOCKYARD_CONTAINER_RUNTIME; Docker by default).
	rt := dockerenv.Engine(t)
	dockerenv.RequireImages(t, rt, nodeImage, flannelImage)

	// Created before the cleanups below are registered, so it is removed after them: the
	// failure dump still finds the kubeconfig.
	workDir := t.TempDir()
	p := &proof{t: t, rt: rt, nodes: docker.NewManager(rt, docker.ManagerOptions{}), network: docker.DefaultNetworkName(cluster),
		workDir: workDir, timings: &timings{}}
	p.sweep("before")
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("DOCKYARD_IMAGES_KEEP") != "" {
			t.Logf("DOCKYARD_IMAGES_KEEP is set: leaving the containers of %s (remove them with this test or by labels %v)",
				cluster, cluster.ClusterLabels())
			return
		}
		p.sweep("after")
	})
	// Cleanups run last-in first-out: the dump sees the nodes before they go.
	t.Cleanup(func() {
		if t.Failed() {
			p.dump()
		}
		p.timings.print(t)
	})

	subnets, err := p.nodes.EnsureNetwork(ctx, cluster, docker.NetworkSpec{Name: p.network})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("network %s: %v", p.network, subnets)

	// 1. The control plane node container, created by the node layer, until systemd and
	// containerd are up.
	cp := p.startNode(ctx, "control-plane", docker.RoleControlPlane)
	// Bootstrap data may call curl and jq, as on kind's node images (Cluster API's own
	// end-to-end flavors do).
	for _, tool := range []string{"curl", "jq"} {
		if out, code, err := p.exec(ctx, cp.name, "sh", "-c", "command -v "+tool); err != nil || code != 0 {
			t.Errorf("%s is not in the node image: %v %s", tool, err, out)
		}
	}
	cpAddress := cp.handle.Address(p.network)
	endpoint := cpAddress + ":6443"

	// 2. Bootstrap data as CABPK renders it for the first control plane, run like the
	// DockyardMachine reconciler runs it.
	pki, err := newClusterPKI()
	if err != nil {
		t.Fatal(err)
	}
	initData, err := renderInitControlPlane(pki, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p.bootstrap(ctx, cp, initData, "kubeadm init")

	// 3. The workload cluster's admin kubeconfig, aimed at the port the node publishes on
	// 127.0.0.1. The node applied its own CNI after kubeadm.
	kc := p.kubeClient(ctx, cp)

	// 4. The node is Ready, CoreDNS runs, kubectl answers from the host.
	kc.waitNodeReady(ctx, t, cp.hostname, 6*time.Minute)
	p.timings.add("control-plane: `kubeadm init` finished to node Ready (the node's CNI applied by install-cni.sh)", time.Since(cp.bootstrapped))
	p.timings.add("control-plane: AddNode called to node Ready", time.Since(cp.created))
	kc.waitCoreDNS(ctx, t, 6*time.Minute)
	p.timings.add("control-plane: AddNode called to CoreDNS pods Ready", time.Since(cp.created))
	// The CNI is the node image's /kind/manifests/default-cni.yaml, rendered for the cluster's
	// pod subnet, running the flannel image the node preloads.
	netConf := kc.kubectl(ctx, t, "-n", "kube-flannel", "get", "configmap", "kube-flannel-cfg", "-o", `jsonpath={.data.net-conf\.json}`)
	if !strings.Contains(netConf, `"Network": "`+podSubnet+`"`) {
		t.Errorf("flannel's net-conf.json does not carry the pod subnet %s:\n%s", podSubnet, netConf)
	}
	if images := kc.kubectl(ctx, t, "-n", "kube-flannel", "get", "daemonset", "kube-flannel-ds", "-o", "jsonpath={.spec.template.spec.containers[*].image}"); strings.TrimSpace(strings.ReplaceAll(images, flannelImage, "")) != "" {
		t.Errorf("flannel's DaemonSet runs %s, want %s", images, flannelImage)
	}
	out := kc.kubectl(ctx, t, "get", "nodes", "-o", "wide")
	t.Logf("kubectl get nodes (from the host, through %s):\n%s", kc.server, out)
	if !strings.Contains(out, cp.hostname) || !strings.Contains(out, " Ready ") {
		t.Fatalf("kubectl get nodes from the host does not show %s Ready:\n%s", cp.hostname, out)
	}

	// 5. A worker joins with CABPK's node data and a bootstrap token made through the API.
	token, err := kc.createBootstrapToken(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w := p.startNode(ctx, "worker", docker.RoleWorker)
	joinData, err := renderJoinWorker(pki, endpoint, token)
	if err != nil {
		t.Fatal(err)
	}
	p.bootstrap(ctx, w, joinData, "kubeadm join")
	kc.waitNodeReady(ctx, t, w.hostname, 6*time.Minute)
	p.timings.add("worker: AddNode called to node Ready", time.Since(w.created))
	// Cluster API's Machine controller lifts the uninitialized taint CABPK puts on joining
	// nodes once it matched the Node; here the test does.
	kc.removeTaint(ctx, t, w.hostname, clusterv1.NodeUninitializedTaint.Key)
	for _, n := range []string{cp.hostname, w.hostname} {
		kc.waitNodeReady(ctx, t, n, time.Minute)
	}

	// A pod on the worker connects to a pod on the control plane node over the pod network.
	kc.podNetworkCheck(ctx, t, cp.hostname, w.hostname, flannelImage)

	// Nothing was pulled: not by containerd in either node, not by any kubelet.
	for _, n := range []*node{cp, w} {
		p.assertNoPulls(ctx, n)
	}
	kc.assertNoPullingEvents(ctx, t)
	out = kc.kubectl(ctx, t, "get", "nodes")
	t.Logf("kubectl get nodes (from the host):\n%s", out)
	if strings.Count(out, " Ready ") != 2 {
		t.Fatalf("want both nodes Ready from the host's kubectl:\n%s", out)
	}

	// 6. Faults as Dockyard injects them (the stop annotation): the node's own commands stop
	// kubelet's unit and set a static Pod's manifest aside, and start them again; each twice,
	// as a reconcile may repeat it.
	p.faults(ctx, cp)

	// 7. Memory of the node containers with the cluster idle.
	for _, n := range []*node{cp, w} {
		if mib, err := p.memoryMiB(ctx, n.name); err != nil {
			t.Logf("memory of %s: %v", n.name, err)
		} else {
			p.timings.addValue(fmt.Sprintf("%s node memory (cgroup usage without inactive file cache)", n.role), fmt.Sprintf("%d MiB", mib))
		}
	}
}

// faults stops and starts kubelet and the scheduler's static Pod in a node with the commands
// of pkg/nodeimage/nodecmd, and checks what each leaves: the unit's state, where the manifest is.
func (p *proof) faults(ctx context.Context, n *node) {
	t := p.t
	run := func(cmd []string) {
		t.Helper()
		for range 2 {
			if out, code, err := p.exec(ctx, n.name, cmd...); err != nil || code != 0 {
				t.Fatalf("%q in %s: exit %d, %v %s", cmd, n.name, code, err, out)
			}
		}
	}
	state := func(cmd ...string) string {
		out, _, _ := p.exec(ctx, n.name, cmd...)
		return strings.TrimSpace(out)
	}
	manifest := "/etc/kubernetes/manifests/kube-scheduler.yaml"
	run(nodecmd.StopService(nodecmd.Kubelet))
	run(nodecmd.StopService(nodecmd.KubeScheduler))
	if got := state("systemctl", "is-active", "kubelet"); got != "inactive" {
		t.Errorf("kubelet stopped: systemctl is-active says %q", got)
	}
	if got := state("sh", "-c", "ls "+manifest+" /etc/kubernetes/stopped-manifests/ 2>&1"); !strings.Contains(got, "No such file") || !strings.Contains(got, "kube-scheduler.yaml") {
		t.Errorf("the scheduler stopped: its manifest is not set aside: %s", got)
	}
	run(nodecmd.StartService(nodecmd.KubeScheduler))
	run(nodecmd.StartService(nodecmd.Kubelet))
	if got := state("systemctl", "is-active", "kubelet"); got != "active" {
		t.Errorf("kubelet started again: systemctl is-active says %q", got)
	}
	if got := state("ls", manifest); got != manifest {
		t.Errorf("the scheduler started again: its manifest is not back: %s", got)
	}
}

// proof holds what the steps share.
type proof struct {
	t       *testing.T
	rt      container.Runtime
	nodes   *docker.Manager
	network string
	workDir string
	timings *timings
	started []*node
	kube    *kubeClient
}

// node is one node container of the test.
type node struct {
	name string // the container's
	// hostname is the Kubernetes node name.
	hostname     string
	role         string
	handle       *docker.Node
	created      time.Time // when AddNode was called
	bootstrapped time.Time // when kubeadm finished in the node
}

// sweep removes everything carrying the test cluster's label: containers, volumes, network.
func (p *proof) sweep(when string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.nodes.DeleteCluster(ctx, cluster, p.network); err != nil {
		p.t.Errorf("removing the test's containers, volumes and network (%s): %v", when, err)
	}
	for _, list := range []func() (int, error){
		func() (int, error) { c, err := p.rt.ListContainers(ctx, cluster.ClusterLabels()); return len(c), err },
		func() (int, error) { v, err := p.rt.ListVolumes(ctx, cluster.ClusterLabels()); return len(v), err },
		func() (int, error) { n, err := p.rt.ListNetworks(ctx, cluster.ClusterLabels()); return len(n), err },
	} {
		if n, err := list(); err != nil || n != 0 {
			p.t.Errorf("after removing the test's objects (%s): %d left, %v", when, n, err)
		}
	}
}

// startNode creates a node container through the node layer and waits for systemd and
// containerd.
func (p *proof) startNode(ctx context.Context, machine string, role docker.Role) *node {
	t := p.t
	n := &node{role: string(role), created: time.Now()}
	h, err := p.nodes.AddNode(ctx, docker.NodeSpec{
		Cluster: cluster, Machine: machine, Image: nodeImage, Role: role, Network: p.network,
	})
	if err != nil {
		t.Fatalf("creating the %s node: %v", role, err)
	}
	n.name, n.hostname, n.handle = h.Name, h.Hostname, h
	p.started = append(p.started, n)
	p.timings.add(fmt.Sprintf("%s: AddNode (volume, create, start; the image's /var copied into the volume)", role), time.Since(n.created))

	deadline := time.Now().Add(4 * time.Minute)
	var last string
	for {
		st, err := n.handle.Ready(ctx)
		if err == nil && st.Ready {
			break
		}
		if st.Failed {
			t.Fatalf("node %s: %s", n.name, st.Detail)
		}
		last = fmt.Sprint(st.Detail, err)
		if time.Now().After(deadline) {
			t.Fatalf("node %s: systemd and containerd not up within 4m: %s", n.name, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ready := time.Now()
	if h, err = p.nodes.FindNode(ctx, cluster, machine); err != nil || h == nil {
		t.Fatalf("node %s: %v", n.name, err)
	}
	n.handle = h
	p.timings.add(fmt.Sprintf("%s: container start to systemd running and containerd active", role), ready.Sub(h.StartedAt))
	t.Logf("node %s (%s) is up at %s", n.name, role, h.Address(p.network))
	return n
}

// bootstrapPoll is how often the DockyardMachine reconciler looks at a running bootstrap.
const bootstrapPoll = 2 * time.Second

// bootstrap translates CABPK bootstrap data with pkg/bootstrap and runs it in the node with
// the node layer's runner, following it with BootstrapStatus at the reconciler's pace,
// until it succeeded. Durations come from the timestamps the data writes around kubeadm in
// the node (the node's clock is the host's).
func (p *proof) bootstrap(ctx context.Context, n *node, data []byte, what string) {
	t := p.t
	plan, err := bootstrap.Parse(bootstrap.FormatCloudConfig, data, bootstrap.Options{Hostname: n.hostname})
	if err != nil {
		t.Fatalf("translating the bootstrap data of %s: %v", n.name, err)
	}
	if len(plan.Ignored) > 0 {
		t.Logf("bootstrap data of %s: ignored %v", n.name, plan.Ignored)
	}
	start := time.Now()
	if err := n.handle.StartBootstrap(ctx, plan, bootstrapTimeout); err != nil {
		t.Fatal(err)
	}
	for {
		st, err := n.handle.BootstrapStatus(ctx, bootstrapTimeout)
		if err != nil {
			t.Fatal(err)
		}
		switch st.Phase {
		case bootstrap.Succeeded:
			kStart, kEnd, err := p.kubeadmTimes(ctx, n.name)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			n.bootstrapped = kEnd
			p.timings.add(fmt.Sprintf("%s: StartBootstrap (%d steps) to `%s` finished", n.role, len(plan.Steps), what), kEnd.Sub(start))
			p.timings.add(fmt.Sprintf("%s: `%s`", n.role, what), kEnd.Sub(kStart))
			return
		case bootstrap.NotStarted, bootstrap.Running:
		case bootstrap.Interrupted:
			// A status read while the plan finishes can see the state file before the plan
			// wrote its final state and the unit after it ended; a second read tells.
			time.Sleep(time.Second)
			if again, err := n.handle.BootstrapStatus(ctx, bootstrapTimeout); err == nil && again.Phase == bootstrap.Succeeded {
				t.Errorf("BootstrapStatus reported the finishing bootstrap of %s as %s, then %s: it reads the plan's state file "+
					"before the unit's state (docker/bootstrap.go), and a reconciler would give up on this node", n.name, st.Phase, again.Phase)
				continue
			}
			fallthrough
		default:
			t.Fatalf("bootstrap of %s: %s at step %d (exit %d, missing %q); output:\n%s",
				n.name, st.Phase, st.Step, st.ExitCode, st.MissingSentinel, st.Output)
		}
		if time.Since(start) > bootstrapTimeout+time.Minute {
			t.Fatalf("bootstrap of %s still %s after %s", n.name, st.Phase, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(bootstrapPoll):
		}
	}
}

// kubeadmTimes reads the timestamps the bootstrap data's pre- and post-kubeadm commands wrote
// around kubeadm.
func (p *proof) kubeadmTimes(ctx context.Context, name string) (start, end time.Time, err error) {
	out, code, err := p.exec(ctx, name, "cat", kubeadmStartFile, kubeadmEndFile)
	if err != nil || code != 0 {
		return start, end, errors.Errorf("reading the kubeadm timestamps: exit %d, %v: %s", code, err, out)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return start, end, errors.Errorf("kubeadm timestamps: %q", out)
	}
	var ts [2]float64
	for i := range ts {
		if _, err := fmt.Sscan(f[i], &ts[i]); err != nil {
			return start, end, errors.Wrapf(err, "kubeadm timestamp %q", f[i])
		}
	}
	unix := func(s float64) time.Time { return time.Unix(0, int64(s*float64(time.Second))) }
	return unix(ts[0]), unix(ts[1]), nil
}

// exec runs a command in a node and returns its combined output.
func (p *proof) exec(ctx context.Context, name string, cmd ...string) (string, int, error) {
	var out strings.Builder
	code, err := p.rt.Exec(ctx, name, container.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &out})
	return out.String(), code, err
}

// assertNoPulls checks containerd's journal in a node: CRI calls were logged (the check can
// see them) and none of them was PullImage.
func (p *proof) assertNoPulls(ctx context.Context, n *node) {
	out, _, err := p.exec(ctx, n.name, "journalctl", "--no-pager", "-o", "cat", "-u", "containerd")
	if err != nil {
		p.t.Fatal(err)
	}
	sandboxes, pulls := strings.Count(out, "RunPodSandbox"), strings.Count(out, "PullImage")
	p.t.Logf("containerd journal of %s: %d RunPodSandbox, %d PullImage", n.name, sandboxes, pulls)
	if sandboxes == 0 {
		p.t.Errorf("containerd's journal in %s shows no RunPodSandbox: the pull check cannot see CRI calls", n.name)
	}
	if pulls != 0 {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "PullImage") {
				lines = append(lines, l)
			}
		}
		p.t.Errorf("containerd in %s pulled images:\n%s", n.name, strings.Join(lines, "\n"))
	}
}

// memoryMiB is the memory a node container uses, as docker stats counts it: the cgroup's usage
// without inactive file cache. The node's cgroup namespace makes its own cgroup the root.
func (p *proof) memoryMiB(ctx context.Context, name string) (int64, error) {
	script := `if [ -f /sys/fs/cgroup/memory/memory.usage_in_bytes ]; then
  echo "$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes) $(awk '$1=="total_inactive_file"{print $2}' /sys/fs/cgroup/memory/memory.stat)"
else
  echo "$(cat /sys/fs/cgroup/memory.current) $(awk '$1=="inactive_file"{print $2}' /sys/fs/cgroup/memory.stat)"
fi`
	out, code, err := p.exec(ctx, name, "sh", "-c", script)
	if err != nil || code != 0 {
		return 0, errors.Errorf("exit %d, %v: %s", code, err, out)
	}
	var usage, inactive int64
	if _, err := fmt.Sscan(strings.TrimSpace(out), &usage, &inactive); err != nil {
		return 0, errors.Wrapf(err, "parsing %q", out)
	}
	if inactive < usage {
		usage -= inactive
	}
	return usage >> 20, nil
}

// dump prints what a person needs after a failure: the containers, and per node the
// bootstrap output, failed units and the kubelet and containerd journals; the workload
// cluster's nodes, pods and events when its API answers.
func (p *proof) dump() {
	t := p.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := p.rt.ListContainers(ctx, cluster.ClusterLabels())
	t.Logf("=== containers of %s (%v)", cluster, err)
	for _, c := range cs {
		t.Logf("%s\t%s\timage %s\t%v", c.Name, c.State, c.Image, c.Networks)
	}
	for _, c := range cs {
		if !c.Running {
			logs, _ := p.rt.ContainerLogs(ctx, c.Name, 60)
			t.Logf("=== %s: container output\n%s", c.Name, logs)
			continue
		}
		for _, d := range []struct{ title, script string }{
			{"bootstrap output", "tail -c 6000 /var/lib/dockyard/bootstrap/output.log; echo; cat /var/lib/dockyard/bootstrap/state"},
			{"failed units", "systemctl --failed --no-pager"},
			{"kubelet journal", "journalctl --no-pager -u kubelet -n 80"},
			{"containerd journal", "journalctl --no-pager -u containerd -n 50"},
			{"containers in containerd", "ctr --namespace k8s.io containers list"},
		} {
			out, _, err := p.exec(ctx, c.Name, "sh", "-c", d.script)
			t.Logf("=== %s: %s (%v)\n%s", c.Name, d.title, err, bootstrap.Redact(out))
		}
	}
	if p.kube != nil {
		p.kube.dump(ctx, t)
	}
}

// timings collects the figures the test prints at the end.
type timings struct {
	rows [][2]string
}

func (tm *timings) add(what string, d time.Duration) {
	tm.rows = append(tm.rows, [2]string{what, fmt.Sprintf("%.1f s", d.Seconds())})
}

func (tm *timings) addValue(what, value string) {
	tm.rows = append(tm.rows, [2]string{what, value})
}

func (tm *timings) print(t *testing.T) {
	if len(tm.rows) == 0 {
		return
	}
	var b strings.Builder
	for _, r := range tm.rows {
		fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
	}
	t.Logf("timings (node image %s):\n%s", nodeImage, b.String())
	if dir := os.Getenv("IMAGES_TIMINGS_DIR"); dir != "" {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("timings-%d.md", time.Now().Unix())), []byte(b.String()), 0o644)
	}
}
