package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/runner"
	"github.com/dockyard-dev/dockyard/pkg/patch"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// testNamespace is the namespace of every cluster these tests make on the engine.
const testNamespace = "dockyard-test"

// sweepOnce removes, before this package's first engine cluster, what an interrupted earlier
// run left on the engine: every cluster of testNamespace, its containers, volumes and network.
var sweepOnce sync.Once

// engineCluster returns a node manager on the real engine and a cluster key unique to the test;
// everything carrying the cluster's label is removed afterwards.
//
// An engine test that makes and reads only its own cluster's objects calls t.Parallel: they run
// two at a time (most of their time is spent waiting on containers), after the tests that run
// alone. Those stay sequential that change the engine's host (the host guard's rules answer for
// every Dockyard network), or read what every test makes (the engine's events, its images).
func engineCluster(t *testing.T) (*Manager, container.Runtime, ClusterKey) {
	t.Helper()
	rt := dockerenv.Engine(t)
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	key := ClusterKey{Namespace: testNamespace, Name: "dy" + hex.EncodeToString(suffix)}
	sweepEngine(t, rt)
	m := NewManager(rt, ManagerOptions{Privilege: PrivilegeAuto})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := m.DeleteCluster(ctx, key, DefaultNetworkName(key)); err != nil {
			t.Errorf("cleaning up cluster %s: %v", key, err)
		}
		if t.Failed() {
			dumpContainers(t, rt, key)
		}
	})
	return m, rt, key
}

// engineTestLabel marks the containers and networks engine tests make outside a cluster of
// testNamespace, which sweepEngine removes when a run was cut short.
const engineTestLabel = "dockyard.x-k8s.io/engine-test"

// sweepEngine removes, once per run and before the first test's objects, what an interrupted
// earlier run left: clusters of testNamespace, and containers and networks of engineTestLabel.
func sweepEngine(t *testing.T, rt container.Runtime) {
	t.Helper()
	sweepOnce.Do(func() {
		sweepTestClusters(t, NewManager(rt, ManagerOptions{}), rt)
		ctx := context.Background()
		left := map[string]string{engineTestLabel: ""}
		cs, err := rt.ListContainers(ctx, left)
		if err != nil {
			t.Fatalf("listing the containers earlier runs left: %v", err)
		}
		for _, c := range cs {
			t.Logf("removing container %s, left on the engine by an earlier run", c.Name)
			if err := rt.RemoveContainer(ctx, c.Name); err != nil {
				t.Fatalf("removing container %s left by an earlier run: %v", c.Name, err)
			}
		}
		ns, err := rt.ListNetworks(ctx, left)
		if err != nil {
			t.Fatalf("listing the networks earlier runs left: %v", err)
		}
		for _, n := range ns {
			t.Logf("removing network %s, left on the engine by an earlier run", n.Name)
			if err := rt.RemoveNetwork(ctx, n.Name); err != nil {
				t.Fatalf("removing network %s left by an earlier run: %v", n.Name, err)
			}
		}
	})
}

// sweepTestClusters deletes every cluster of testNamespace found on the engine's containers,
// volumes and networks.
func sweepTestClusters(t *testing.T, m *Manager, rt container.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	keys := map[ClusterKey]bool{}
	add := func(labels map[string]string) {
		if ns, name, ok := strings.Cut(labels[clusterLabel], "/"); ok && ns == testNamespace {
			keys[ClusterKey{Namespace: ns, Name: name}] = true
		}
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatalf("listing containers to remove earlier runs' leftovers: %v", err)
	}
	for _, c := range cs {
		add(c.Labels)
	}
	vs, err := rt.ListVolumes(ctx, nil)
	if err != nil {
		t.Fatalf("listing volumes to remove earlier runs' leftovers: %v", err)
	}
	for _, v := range vs {
		add(v.Labels)
	}
	ns, err := rt.ListNetworks(ctx, nil)
	if err != nil {
		t.Fatalf("listing networks to remove earlier runs' leftovers: %v", err)
	}
	for _, n := range ns {
		add(n.Labels)
	}
	for key := range keys {
		t.Logf("removing cluster %s, left on the engine by an earlier run", key)
		if err := m.DeleteCluster(ctx, key, DefaultNetworkName(key)); err != nil {
			t.Fatalf("removing cluster %s left by an earlier run: %v", key, err)
		}
	}
}

// dumpContainers prints what a person debugging a failure needs: containers and their logs.
func dumpContainers(t *testing.T, rt container.Runtime, key ClusterKey) {
	ctx := context.Background()
	cs, _ := rt.ListContainers(ctx, key.ClusterLabels())
	for _, c := range cs {
		logs, _ := rt.ContainerLogs(ctx, c.Name, 40)
		t.Logf("container %s (%s): last output:\n%s", c.Name, c.State, logs)
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	took, err := waitFor(timeout, 200*time.Millisecond, check)
	if err != nil {
		t.Fatalf("%s: not true after %s: %v", what, timeout, err)
	}
	return took
}

// waitFor runs check every interval until it succeeds or timeout passes: how long it took, or
// check's last error.
func waitFor(timeout, interval time.Duration, check func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, err
		}
		time.Sleep(interval)
	}
}

// testServiceCIDRs are the Service ranges of the nodes bootNode creates.
var testServiceCIDRs = []string{"10.96.0.0/12", "fd00:100:64::/108"}

// bootNode creates a node container and waits until systemd and containerd run.
func bootNode(t *testing.T, m *Manager, key ClusterKey, machine string, role Role) *container.Container {
	t.Helper()
	return bootNodeSpec(t, m, NodeSpec{Cluster: key, Machine: machine, Role: role})
}

// bootNodeSpec is bootNode of a spec, on the cluster's default network from the test node image.
func bootNodeSpec(t *testing.T, m *Manager, spec NodeSpec) *container.Container {
	t.Helper()
	ctx := context.Background()
	dockerenv.RequireImages(t, m.runtime, dockerenv.NodeImage())
	spec.Network = DefaultNetworkName(spec.Cluster)
	spec.Image, spec.ServiceCIDRs = dockerenv.NodeImage(), testServiceCIDRs
	if _, err := m.EnsureNetwork(ctx, spec.Cluster, NetworkSpec{Name: spec.Network}); err != nil {
		t.Fatal(err)
	}
	node, err := m.createNode(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 2*time.Minute, "node "+node.Name+" booted", func() error {
		st, err := m.node(spec.Cluster, spec.Machine, node).Ready(ctx)
		if err != nil {
			return err
		}
		if !st.Ready {
			return errors.Errorf("%s", st.Detail)
		}
		return nil
	})
	t.Logf("node %s: systemd and containerd up %s after start", node.Name, took.Round(100*time.Millisecond))
	return node
}

func execOut(t *testing.T, rt container.Runtime, name string, cmd ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code, err := rt.Exec(context.Background(), name, container.ExecOptions{Cmd: cmd, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("exec %v in %s: %v", cmd, name, err)
	}
	return strings.TrimSpace(out.String()), code
}

func TestNodeContainerBootsWithSystemdWithoutPrivilege(t *testing.T) {
	m, rt, key := engineCluster(t)
	node := bootNode(t, m, key, "cp-0", RoleControlPlane)

	if out, _ := execOut(t, rt, node.Name, "systemctl", "is-system-running"); out != "running" && out != "degraded" {
		t.Errorf("systemd is %q", out)
	}
	if out, code := execOut(t, rt, node.Name, "ctr", "--namespace", "k8s.io", "version"); code != 0 {
		t.Errorf("containerd does not answer: %s", out)
	}
	// The node can manage its own cgroups: kubelet and containerd depend on it.
	probe := `for d in /sys/fs/cgroup/memory /sys/fs/cgroup; do if [ -d "$d" ]; then mkdir "$d/dockyard-probe" && rmdir "$d/dockyard-probe" && exit 0; fi; done; exit 1`
	if out, code := execOut(t, rt, node.Name, "sh", "-c", probe); code != 0 {
		t.Errorf("cgroups are not writable in the node: %s", out)
	}
	// The container's name is qualified by the namespace; the hostname (the Kubernetes node
	// name) is not.
	if out, _ := execOut(t, rt, node.Name, "hostname"); out != node.Hostname || node.Name != node.Hostname+"."+key.Namespace {
		t.Errorf("hostname %q, container %q, want %q and %q", out, node.Name, node.Hostname, node.Hostname+"."+key.Namespace)
	}
	if node.Labels["io.x-k8s.kind.cluster"] != key.Name+"."+key.Namespace || node.Labels["io.x-k8s.kind.role"] != "control-plane" {
		t.Errorf("kind labels: %v", node.Labels)
	}
	if len(node.Ports) != 1 || node.Ports[0].HostIP != "127.0.0.1" || node.Ports[0].HostPort == 0 {
		t.Errorf("API server port not published on loopback: %+v", node.Ports)
	}
	// Traffic to the Service ranges that kube-proxy did not translate is dropped in the node,
	// for IPv4 and IPv6, by one rule each.
	for _, c := range []struct{ cmd, cidr string }{{"iptables", testServiceCIDRs[0]}, {"ip6tables", testServiceCIDRs[1]}} {
		if out, code := execOut(t, rt, node.Name, c.cmd, "-w", "-t", "mangle", "-S", "POSTROUTING"); code != 0 ||
			strings.Count(out, "-A POSTROUTING -d "+c.cidr+" ") != 1 || !strings.Contains(out, "-j DROP") {
			t.Errorf("%s in the node: %s (exit %d), want one rule dropping traffic to %s", c.cmd, out, code, c.cidr)
		}
	}
}

func TestBootstrapPlanRunsOnceInARealNode(t *testing.T) {
	t.Parallel()
	m, rt, key := engineCluster(t)
	node := bootNode(t, m, key, "cp-0", RoleControlPlane)
	ctx := context.Background()

	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{File: &bootstrap.File{Path: "/etc/dockyard-test/secret.key", Content: []byte("s3cret\n"), Mode: 0o600, Owner: "root", Group: "root"}},
		{File: &bootstrap.File{Path: "/etc/dockyard-test/list.txt", Content: []byte("a\n"), Mode: 0o644}},
		{File: &bootstrap.File{Path: "/etc/dockyard-test/list.txt", Content: []byte("b\n"), Mode: 0o644, Append: true}},
		{File: &bootstrap.File{Path: "/etc/dockyard-test/nobody.txt", Content: []byte("x"), Mode: 0o640, Owner: "nobody", Group: "nogroup"}},
		// Like cloud-init, commands start in /: bootstrap data runs ./script.sh.
		{Command: &bootstrap.Command{Script: "pwd > /var/lib/dockyard-test-cwd; echo run >> /var/lib/dockyard-test-runs\necho \"home is $HOME\""}},
		{Command: &bootstrap.Command{Args: []string{"sh", "-c", `test "$(cat /etc/dockyard-test/list.txt)" = "$(printf 'a\nb')"`}}},
		// Like cloud-init's runcmd: one shell, so cd and export carry over, and a failing
		// command does not stop the rest; Cluster API's sentinel decides success.
		{Command: &bootstrap.Command{Script: "export DOCKYARD_TEST=carried; cd /tmp"}},
		{Command: &bootstrap.Command{Script: "false"}},
		{Command: &bootstrap.Command{Script: `test "$DOCKYARD_TEST" = carried && test "$(pwd)" = /tmp && mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete`}},
	}}
	if err := m.startBootstrap(ctx, node.Name, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitBootstrap(t, m, node.Name, time.Minute, bootstrap.Succeeded)

	for path, want := range map[string]string{
		"/etc/dockyard-test/secret.key": "600 root root",
		"/etc/dockyard-test/list.txt":   "644 root root",
		"/etc/dockyard-test/nobody.txt": "640 nobody nogroup",
	} {
		if out, _ := execOut(t, rt, node.Name, "stat", "-c", "%a %U %G", path); out != want {
			t.Errorf("%s: %q, want %q", path, out, want)
		}
	}
	if out, _ := execOut(t, rt, node.Name, "cat", "/var/lib/dockyard-test-cwd"); out != "/" {
		t.Errorf("bootstrap commands started in %q, want / (as cloud-init runs them)", out)
	}
	if out, _ := execOut(t, rt, node.Name, "cat", "/etc/dockyard-test/list.txt"); out != "a\nb" {
		t.Errorf("appended file: %q", out)
	}
	if _, code := execOut(t, rt, node.Name, "test", "-e", m.bootstrap.Path(runner.FilesDir)); code == 0 {
		t.Error("staged files (private keys) left in the node")
	}
	if out, _ := execOut(t, rt, node.Name, "cat", m.bootstrap.Path(runner.OutputFile)); !strings.Contains(out, "home is /root") {
		t.Errorf("bootstrap output: %q", out)
	}

	// Starting it again (a manager restarted, a retried reconcile) runs nothing twice.
	if err := m.startBootstrap(ctx, node.Name, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if out, _ := execOut(t, rt, node.Name, "cat", "/var/lib/dockyard-test-runs"); out != "run" {
		t.Errorf("bootstrap ran more than once: %q", out)
	}
	waitBootstrap(t, m, node.Name, time.Minute, bootstrap.Succeeded)
}

func TestBootstrapFailureAndTimeoutInARealNode(t *testing.T) {
	t.Parallel()
	m, rt, key := engineCluster(t)
	ctx := context.Background()

	failing := bootNode(t, m, key, "fail", RoleWorker)
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{Command: &bootstrap.Command{Script: "true"}},
		{Command: &bootstrap.Command{Script: "echo joining with abcdef.0123456789abcdef; echo 'preflight failed' >&2; (exit 3)"}},
		{Command: &bootstrap.Command{Script: "echo never"}},
	}}
	if err := m.startBootstrap(ctx, failing.Name, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	st := waitBootstrap(t, m, failing.Name, time.Minute, bootstrap.Failed)
	if st.Step != 2 || st.ExitCode != 3 {
		t.Errorf("failed at step %d with exit %d, want step 2 exit 3", st.Step, st.ExitCode)
	}
	// The commands after the failing one ran too, as cloud-init runs them.
	if !strings.Contains(st.Output, "preflight failed") || strings.Contains(st.Output, "0123456789abcdef") || !strings.Contains(st.Output, "never") {
		t.Errorf("output tail (redacted): %q", st.Output)
	}

	// A timeout short enough to wait for, long enough for the step to start and print on a
	// loaded host (with 3 s the test failed once while other suites ran).
	slow := bootNode(t, m, key, "slow", RoleWorker)
	if err := m.startBootstrap(ctx, slow.Name, &bootstrap.Plan{Steps: []bootstrap.Step{{Command: &bootstrap.Command{Script: "echo waiting; sleep 300"}}}}, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	// The node recorded the timeout it was started with; the caller's guess does not matter.
	st = waitBootstrap(t, m, slow.Name, time.Hour, bootstrap.TimedOut)
	if st.Step != 1 || !strings.Contains(st.Output, "waiting") {
		t.Errorf("timed out at step %d with output %q", st.Step, st.Output)
	}
	if out, _ := execOut(t, rt, slow.Name, "ls", "-A", m.bootstrap.Dir); strings.Contains(out, "steps") {
		t.Errorf("a timed-out plan left its staged steps: %q", out)
	}
}

// A plan killed outright (SIGKILL to every process of its unit: nothing of run.sh runs after
// it) still reports the step it was at, and leaves no staged file behind: those hold the
// node's private keys. On a loaded host systemd's SIGTERM on timeout can also reach the
// processes a shell trap forks, so nothing may depend on the plan's own shell cleaning up.
func TestBootstrapKilledOutrightLeavesNoStagedFiles(t *testing.T) {
	m, rt, key := engineCluster(t)
	ctx := context.Background()

	node := bootNode(t, m, key, "killed", RoleWorker)
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{File: &bootstrap.File{Path: "/etc/dockyard-test/secret.key", Content: []byte("-----BEGIN PRIVATE KEY-----\nx\n"), Mode: 0o600}},
		{Command: &bootstrap.Command{Script: "echo waiting; sleep 300"}},
	}}
	if err := m.startBootstrap(ctx, node.Name, plan, time.Hour); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the plan to reach its sleep", func() error {
		if out, _ := execOut(t, rt, node.Name, "cat", m.bootstrap.Path(runner.OutputFile)); !strings.Contains(out, "waiting") {
			return errors.Errorf("output %q", out)
		}
		return nil
	})
	if out, code := execOut(t, rt, node.Name, "systemctl", "kill", "--signal=KILL", "dockyard-bootstrap"); code != 0 {
		t.Fatalf("killing the bootstrap unit: %d %s", code, out)
	}
	st := waitBootstrap(t, m, node.Name, time.Hour, bootstrap.Interrupted)
	if st.Step != 2 {
		t.Errorf("interrupted at step %d, want 2", st.Step)
	}
	eventually(t, time.Minute, "the staged files to be removed", func() error {
		if out, code := execOut(t, rt, node.Name, "ls", "-A", m.bootstrap.Dir); code != 0 || strings.Contains(out, "files") {
			return errors.Errorf("bootstrap directory holds %q (exit %d)", out, code)
		}
		return nil
	})
}

func waitBootstrap(t *testing.T, m *Manager, node string, timeout time.Duration, want bootstrap.Phase) bootstrap.Status {
	t.Helper()
	var st bootstrap.Status
	eventually(t, 2*time.Minute, "bootstrap in "+node+" to be "+string(want), func() error {
		var err error
		if st, err = m.bootstrapStatus(context.Background(), node, timeout); err != nil {
			return err
		}
		if st.Phase != want {
			return errors.Errorf("phase %s (step %d, output %q)", st.Phase, st.Step, st.Output)
		}
		return nil
	})
	return st
}

// buildBackend compiles the test backend server (static, for any image).
func buildBackend(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "lbbackend")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/lbbackend")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test backend: %v\n%s", err, msg)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startBackend runs the test backend in a container on the cluster's network.
func startBackend(t *testing.T, rt container.Runtime, key ClusterKey, name string, bin []byte) string {
	t.Helper()
	return startBackendOn(t, rt, key, DefaultNetworkName(key), name, bin)
}

// startBackendOn runs the test backend in a container of the cluster on a network.
func startBackendOn(t *testing.T, rt container.Runtime, key ClusterKey, network, name string, bin []byte) string {
	t.Helper()
	ctx := context.Background()
	spec := container.ContainerSpec{
		Name: name, Image: dockerenv.LoadBalancerImage(), Labels: key.ClusterLabels(),
		Entrypoint: []string{"/lbbackend"}, Env: []string{"NAME=" + name}, Network: network,
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "lbbackend", Mode: 0o755, Size: int64(len(bin))})
	_, _ = tw.Write(bin)
	_ = tw.Close()
	if err := rt.CopyToContainer(ctx, name, "/", &buf); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}
	c, err := rt.InspectContainer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return nodeAddress(c, network)
}

func TestLoadBalancerForwardsReloadsAndDropsBackends(t *testing.T) {
	m, rt, key := engineCluster(t)
	ctx := context.Background()
	dockerenv.RequireImages(t, rt, dockerenv.LoadBalancerImage())
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	bin := buildBackend(t)
	b1, b2 := key.Name+"-b1", key.Name+"-b2"
	addr := map[string]string{b1: startBackend(t, rt, key, b1, bin), b2: startBackend(t, rt, key, b2, bin)}

	// The endpoint's port need not be the API servers': the load balancer serves the one asked.
	const endpointPort = 7443
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: dockerenv.LoadBalancerImage(), Network: network, Port: endpointPort})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://%s:%d/name", nodeAddress(lb, network), endpointPort)
	setBackends := func(names ...string) {
		t.Helper()
		changed, err := m.lbs.update(ctx, &LoadBalancer{Cluster: key}, "", func(context.Context) ([]haproxy.Backend, error) {
			var bs []haproxy.Backend
			for _, n := range names {
				bs = append(bs, haproxy.Backend{Name: n, Address: addr[n], Port: APIServerPort})
			}
			return bs, nil
		})
		if err != nil || !changed {
			t.Fatalf("updating backends to %v: changed %v err %v", names, changed, err)
		}
	}
	setBackends(b1, b2)

	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test backend's throwaway certificate
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure, DisableKeepAlives: true}}
	get := func(c *http.Client) (string, error) {
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	// Both backends receive new connections once their health checks pass.
	seen := map[string]bool{}
	eventually(t, time.Minute, "both backends serving", func() error {
		name, err := get(fresh)
		if err != nil {
			return err
		}
		seen[name] = true
		if !seen[b1] || !seen[b2] {
			return errors.Errorf("seen %v", seen)
		}
		return nil
	})

	// An established connection survives a reload that removes its own backend.
	keep := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure, MaxConnsPerHost: 1}}
	first, err := get(keep)
	if err != nil {
		t.Fatal(err)
	}
	other := b1
	if first == b1 {
		other = b2
	}
	setBackends(other)
	reused := false
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	}), http.MethodGet, url, nil)
	resp, err := keep.Do(req)
	if err != nil {
		t.Fatalf("established connection dropped by the reload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !reused || string(body) != first {
		t.Errorf("after the reload: reused connection %v, served by %q (was %q)", reused, body, first)
	}

	// New connections only reach the remaining backend.
	for range 20 {
		name, err := get(fresh)
		if err != nil {
			t.Fatalf("request after removing a backend: %v", err)
		}
		if name != other {
			t.Fatalf("removed backend %s still receives new connections", name)
		}
	}

	// An unchanged backend set changes nothing.
	changed, err := m.lbs.update(ctx, &LoadBalancer{Cluster: key}, "", func(context.Context) ([]haproxy.Backend, error) {
		return []haproxy.Backend{{Name: other, Address: addr[other], Port: APIServerPort}}, nil
	})
	if err != nil || changed {
		t.Errorf("same backends reloaded again: changed %v err %v", changed, err)
	}
}

func TestDeletingAClusterLeavesNothingOnTheEngine(t *testing.T) {
	t.Parallel()
	m, rt, key := engineCluster(t)
	ctx := context.Background()
	bootNode(t, m, key, "cp-0", RoleControlPlane)
	bootNode(t, m, key, "md-0", RoleWorker)
	if _, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: dockerenv.LoadBalancerImage(), Network: DefaultNetworkName(key)}); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteNode(ctx, key, "md-0"); err != nil {
		t.Fatal(err)
	}
	if c, err := m.getNode(ctx, key, "md-0"); err != nil || c != nil {
		t.Errorf("deleted node still there: %v %v", c, err)
	}
	if err := m.DeleteCluster(ctx, key, DefaultNetworkName(key)); err != nil {
		t.Fatal(err)
	}
	cs, _ := rt.ListContainers(ctx, key.ClusterLabels())
	vs, _ := rt.ListVolumes(ctx, key.ClusterLabels())
	ns, _ := rt.ListNetworks(ctx, key.ClusterLabels())
	if len(cs)+len(vs)+len(ns) != 0 {
		t.Errorf("left on the engine: containers %v, volumes %v, networks %v", cs, vs, ns)
	}
}

// TestManagementNodesReachWorkloadEndpointsWhileClustersStayIsolated plays a management cluster
// whose node is a container on the engine (like kind's, on a network of its own): it cannot
// reach a workload cluster's load balancer until a manager that knows its nodes ensures the
// workload network, while a node of another workload cluster still cannot.
func TestManagementNodesReachWorkloadEndpointsWhileClustersStayIsolated(t *testing.T) {
	t.Parallel()
	if dockerenv.EngineName() == "podman" {
		// Dockyard creates Podman networks isolated, but netavark 1.4 (Debian bookworm) removes
		// the FORWARD jump to its isolation chain when the last container of any isolated
		// network stops, and does not put it back: isolation then holds for no network.
		t.Skip("Podman with netavark 1.4 does not keep networks isolated (an upstream bug, docs/runtimes.md)")
	}
	m, rt, a := engineCluster(t)
	_, _, b := engineCluster(t)
	ctx := context.Background()
	dockerenv.RequireImages(t, rt, dockerenv.LoadBalancerImage())

	// The "kind" management cluster: one node on its own network, with kind's labels only.
	mgmtCluster := ClusterKey{Namespace: testNamespace, Name: a.Name + "-kind"}
	mgmtNode := mgmtCluster.Name + "-control-plane"
	t.Cleanup(func() {
		_ = rt.RemoveContainer(context.Background(), mgmtNode)
		_ = rt.RemoveNetwork(context.Background(), mgmtCluster.Name)
	})
	// The management node is of the node image, whose tools (ip, iptables) Dockyard uses there.
	dockerenv.RequireImages(t, rt, dockerenv.NodeImage())
	sleeper := func(name, network, image string, labels map[string]string, caps ...string) {
		t.Helper()
		spec := container.ContainerSpec{Name: name, Image: image, Labels: labels, Network: network,
			Entrypoint: []string{"sleep"}, Cmd: []string{"600"}, Security: container.SecuritySpec{CapAdd: caps}}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: mgmtCluster.Name}); err != nil {
		t.Fatal(err)
	}
	sleeper(mgmtNode, mgmtCluster.Name, dockerenv.NodeImage(), map[string]string{kindClusterLabel: mgmtCluster.Name, kindRoleLabel: "control-plane"}, "NET_ADMIN")

	// Workload cluster a's load balancer, and a node of workload cluster b.
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: a, Image: dockerenv.LoadBalancerImage(), Network: DefaultNetworkName(a)})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := nodeAddress(lb, DefaultNetworkName(a))
	if _, err := m.lbs.update(ctx, &LoadBalancer{Cluster: a}, "", func(context.Context) ([]haproxy.Backend, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := m.EnsureNetwork(ctx, b, NetworkSpec{Name: DefaultNetworkName(b)}); err != nil {
		t.Fatal(err)
	}
	otherNode := b.Name + "-node"
	sleeper(otherNode, DefaultNetworkName(b), dockerenv.LoadBalancerImage(), b.MachineLabels("node"))

	reaches := func(from string) bool {
		probe := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", endpoint, APIServerPort)
		_, code := execOut(t, rt, from, "timeout", "3", "bash", "-c", probe)
		return code == 0
	}
	eventually(t, 30*time.Second, "the load balancer answering its own network", func() error {
		if !reaches(lb.Name) {
			return errors.Errorf("%s:%d does not answer", endpoint, APIServerPort)
		}
		return nil
	})
	if reaches(mgmtNode) {
		t.Fatalf("%s reached %s before joining its network: the engine does not isolate networks, the test proves nothing\n%s",
			mgmtNode, endpoint, isolationReport(t, rt, mgmtNode, []string{mgmtCluster.Name, DefaultNetworkName(a), DefaultNetworkName(b)}))
	}

	selector, err := NewManager(rt, ManagerOptions{}).ManagementSelector(ctx, mgmtNode)
	if err != nil {
		t.Fatal(err)
	}
	mgr := NewManager(rt, ManagerOptions{ManagementNodes: selector})
	if _, err := mgr.EnsureNetwork(ctx, a, NetworkSpec{Name: DefaultNetworkName(a)}); err != nil {
		t.Fatal(err)
	}
	if !reaches(mgmtNode) {
		t.Errorf("management node %s cannot reach workload endpoint %s:%d after joining the cluster network", mgmtNode, endpoint, APIServerPort)
	}
	if reaches(otherNode) {
		t.Errorf("a node of workload cluster %s reaches cluster %s's endpoint: clusters must stay isolated", b, a)
	}

	// Deleting the workload cluster takes the management node off its network, then removes it.
	if err := mgr.DeleteCluster(ctx, a, DefaultNetworkName(a)); err != nil {
		t.Fatalf("deleting a cluster whose network the management node joined: %v", err)
	}
	if _, err := rt.InspectNetwork(ctx, DefaultNetworkName(a)); !container.IsNotFound(err) {
		t.Errorf("network %s: %v, want it removed", DefaultNetworkName(a), err)
	}
	if c, err := rt.InspectContainer(ctx, mgmtNode); err != nil || !c.Running {
		t.Errorf("management node after the delete: %+v, %v; want it running, untouched", c, err)
	}
}

// TestAFixedAPIServerPortSurvivesJoiningANetwork: Docker publishes a container's ports on its
// gateway network, the first of its networks by name; when the container joins a network whose
// name sorts first (as a management cluster's node joins workload networks), Docker publishes
// the ports anew there, on another host port unless the port is fixed. A node published on a
// fixed host port keeps it, so the management cluster's kubeconfig stays right.
func TestAFixedAPIServerPortSurvivesJoiningANetwork(t *testing.T) {
	m, rt, key := engineCluster(t)
	ctx := context.Background()
	dockerenv.RequireImages(t, rt, dockerenv.NodeImage())
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	node, err := m.createNode(ctx, NodeSpec{Cluster: key, Machine: "cp", Image: dockerenv.NodeImage(),
		Role: RoleControlPlane, Network: network, APIServerHostPort: port})
	if err != nil {
		t.Fatal(err)
	}
	published := func() []container.PortMapping {
		c, err := rt.InspectContainer(ctx, node.Name)
		if err != nil {
			t.Fatal(err)
		}
		return c.Ports
	}
	want := []container.PortMapping{{ContainerPort: APIServerPort, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: port}}
	if got := published(); !slices.Equal(got, want) {
		t.Fatalf("published %+v, want %+v", got, want)
	}
	other := "dockyard-a-" + key.Name // sorts before the node's network

	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: other, Labels: key.ClusterLabels()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.RemoveNetwork(context.Background(), other) })
	if err := rt.ConnectNetwork(ctx, other, node.Name); err != nil {
		t.Fatal(err)
	}
	if got := published(); !slices.Equal(got, want) {
		t.Errorf("after joining network %s the node publishes %+v, want %+v", other, got, want)
	}
	if err := rt.DisconnectNetwork(ctx, other, node.Name); err != nil {
		t.Fatal(err)
	}
}

// isolationReport is what a person needs when two networks of the engine are not isolated: the
// networks' subnets, the probing node's addresses and routes, and the host's forwarding rules
// (the engine's isolation chains live there).
func isolationReport(t *testing.T, rt container.Runtime, node string, networks []string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range networks {
		n, err := rt.InspectNetwork(context.Background(), name)
		if err != nil {
			fmt.Fprintf(&b, "network %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "network %s: subnets %v gateways %v\n", name, n.Subnets, n.Gateways)
	}
	out, _ := execOut(t, rt, node, "sh", "-c", "ip -4 -o addr; ip -4 route")
	fmt.Fprintf(&b, "%s addresses and routes:\n%s\n", node, out)
	for _, chain := range []string{"FORWARD", "DOCKER-USER", "DOCKER-ISOLATION-STAGE-1", "DOCKER-ISOLATION-STAGE-2"} {
		rules, err := exec.Command("iptables", "-S", chain).CombinedOutput()
		fmt.Fprintf(&b, "host iptables -S %s (%v):\n%s", chain, err, rules)
	}
	return b.String()
}

func TestNodeLogsOnTheEngine(t *testing.T) {
	t.Parallel()
	m, _, key := engineCluster(t)
	bootNode(t, m, key, "cp-0", RoleControlPlane)
	ctx := context.Background()
	const token = "abcdef.0123456789abcdef"
	node, err := m.FindNode(ctx, key, "cp-0")
	if err != nil || node == nil {
		t.Fatalf("node: %v", err)
	}
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{{Command: &bootstrap.Command{Script: "echo kubeadm join --token " + token}}}}
	if err := node.StartBootstrap(ctx, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitBootstrap(t, m, node.Name, time.Minute, bootstrap.Succeeded)

	dir := t.TempDir()
	out, err := logdir.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := node.CollectLogs(ctx, out); err != nil {
		t.Fatal(err)
	}
	checkTree(t, dir) // 0700 directories, 0600 files
	for file, want := range map[string]string{
		"journal.log":          "systemd",
		"containerd.log":       "containerd",
		"bootstrap-unit.log":   "Dockyard bootstrap",
		"bootstrap-output.log": "kubeadm join --token",
		"bootstrap-state":      "phase=succeeded",
		"kubelet-version.txt":  "Kubernetes v",
		"inspect.json":         node.Name,
		"processes.txt":        "containerd",
	} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if !strings.Contains(string(data), want) {
			t.Errorf("%s does not contain %q:\n%s", file, want, lastLines(string(data), 10))
		}
		if strings.Contains(string(data), token) {
			t.Errorf("%s carries the bootstrap token", file)
		}
	}
	if lb, err := m.FindLoadBalancer(ctx, key); err != nil || lb != nil {
		t.Errorf("a cluster without a load balancer: %v %v", lb, err)
	}
}

// An image is copied from the engine into a node once, and again when the engine's image of
// that name changes (a rebuild): a node always ends up with the engine's current image.
func TestLoadImagesIntoARealNodeFollowsTheEnginesImage(t *testing.T) {
	m, rt, key := engineCluster(t)
	c := bootNode(t, m, key, "w-0", RoleWorker)
	node := m.node(key, "w-0", c)
	ctx := context.Background()
	ref := "localhost/dockyard/load-test:" + strings.ToLower(key.Name)
	t.Cleanup(func() { _ = rt.RemoveImage(context.Background(), ref) })

	var loads []ImageLoad
	report := func(l ImageLoad) {
		if l.Done {
			loads = append(loads, l)
		}
	}
	for build := range 2 {
		id := putRandomImage(t, rt, ref)
		for range 2 {
			if err := node.LoadImages(ctx, []string{ref}, report); err != nil {
				t.Fatal(err)
			}
		}
		if len(loads) != build+1 || loads[build].Bytes == 0 || loads[build].Image != ref {
			t.Fatalf("after build %d: loads %+v, want one more (a second load of the same image copies nothing)", build, loads)
		}
		out, _ := execOut(t, rt, c.Name, "ctr", "--namespace", "k8s.io", "images", "list", "name=="+ref)
		if !strings.Contains(out, engineImageLabel+"="+id) {
			t.Errorf("the node's image is not the engine's %s:\n%s", id, out)
		}
	}
	if err := node.LoadImages(ctx, []string{"localhost/dockyard/no-such-image:v0"}, report); err == nil || !strings.Contains(err.Error(), "not on the container engine") {
		t.Errorf("loading an image the engine lacks: %v", err)
	}
}

// putRandomImage loads an image with one random layer into the engine under ref and returns
// its ID.
func putRandomImage(t *testing.T, rt container.Runtime, ref string) string {
	t.Helper()
	layer, err := random.Layer(1<<20, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	// ctr imports the images of the node's platform only.
	if img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: "linux", Architecture: runtime.GOARCH, RootFS: v1.RootFS{Type: "layers", DiffIDs: mustDiffIDs(t, img)}}); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := tarball.Write(tag, img, &archive); err != nil {
		t.Fatal(err)
	}
	if err := rt.LoadImages(context.Background(), &archive); err != nil {
		t.Fatal(err)
	}
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func mustDiffIDs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cfg.RootFS.DiffIDs
}

// A node's search list and containerd patches on the real engine: the engine writes the one,
// containerd restarts with the other, once; patches that do not apply change nothing.
func TestNodeSearchListAndContainerdPatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, rt, key := engineCluster(t)
	c := bootNodeSpec(t, m, NodeSpec{Cluster: key, Machine: "w-0", Role: RoleWorker, DNSSearch: &[]string{"corp.example", "lab.example"}})
	if out, _ := execOut(t, rt, c.Name, "cat", "/etc/resolv.conf"); !regexp.MustCompile(`(?m)^search corp\.example lab\.example$`).MatchString(out) {
		t.Errorf("resolv.conf of a node searching corp.example lab.example:\n%s", out)
	}

	node, err := m.FindNode(ctx, key, "w-0")
	if err != nil || node == nil {
		t.Fatalf("finding the node: %v", err)
	}
	patches := patch.Containerd{
		Merge:    []string{"[metrics]\n  address = \"127.0.0.1:1338\""},
		JSON6902: []string{`[{"op": "replace", "path": "/metrics/address", "value": "127.0.0.1:1339"}]`},
	}
	if err := node.ConfigureContainerd(ctx, patches); err != nil {
		t.Fatal(err)
	}
	if out, code := execOut(t, rt, c.Name, "curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:1339/v1/metrics"); code != 0 {
		t.Errorf("containerd serves no metrics at the patched address: %s", out)
	}
	pid, _ := execOut(t, rt, c.Name, "systemctl", "show", "-p", "MainPID", "--value", "containerd")
	if err := node.ConfigureContainerd(ctx, patches); err != nil {
		t.Fatal(err)
	}
	if again, _ := execOut(t, rt, c.Name, "systemctl", "show", "-p", "MainPID", "--value", "containerd"); again != pid {
		t.Errorf("containerd restarted (pid %s, then %s) for patches it runs with already", pid, again)
	}
	before, _ := execOut(t, rt, c.Name, "cat", containerdConfigFile)
	if err := node.ConfigureContainerd(ctx, patch.Containerd{JSON6902: []string{`[{"op": "remove", "path": "/nothing"}]`}}); err == nil || !strings.Contains(err.Error(), "containerdConfigPatchesJSON6902[0]") {
		t.Errorf("a patch that does not apply: %v, want an error naming it", err)
	}
	if after, _ := execOut(t, rt, c.Name, "cat", containerdConfigFile); after != before {
		t.Error("a patch that does not apply changed the configuration")
	}
}
