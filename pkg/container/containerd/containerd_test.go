package containerd_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	containerdruntime "github.com/dockyard-dev/dockyard/pkg/container/containerd"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

const testLabel = "dockyard.x-k8s.io/runtime-test"

// engine connects to Dockyard's containerd (DOCKYARD_CONTAINERD_ENDPOINT, else the run's
// endpoint when the run chose containerd, else the default socket). When it does not answer,
// the test fails if the run chose containerd (make test-engine CONTAINER_RUNTIME=containerd)
// and skips loudly otherwise (dockerenv.Unavailable), so `go test ./...` needs only Docker.
func engine(t *testing.T) *containerdruntime.Runtime {
	t.Helper()
	endpoint := os.Getenv("DOCKYARD_CONTAINERD_ENDPOINT")
	if endpoint == "" {
		endpoint = dockerenv.EngineEndpoint(runtimes.Containerd)
	}
	socket := strings.TrimPrefix(endpoint, "unix://")
	if socket == "" {
		socket = containerdruntime.DefaultEndpoint
	}
	if _, err := os.Stat(socket); err != nil { // no need to wait for a dial to time out
		dockerenv.Unavailable(t, runtimes.Containerd, fmt.Sprintf("NO CONTAINERD: %v. These tests need Dockyard's containerd: run hack/ensure-containerd.sh", err))
	}
	rt, err := containerdruntime.New(endpoint, containerdruntime.Options{})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err = rt.Info(ctx); err != nil {
			_ = rt.Close()
		}
	}
	if err != nil {
		dockerenv.Unavailable(t, runtimes.Containerd, fmt.Sprintf("NO CONTAINERD at %q: %v. These tests need Dockyard's containerd: run hack/ensure-containerd.sh", endpoint, err))
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// requireImage ends the test (dockerenv.Unavailable) when containerd lacks an image.
func requireImage(t *testing.T, rt container.Runtime, ref string) {
	t.Helper()
	ok, err := rt.ImageExists(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		dockerenv.Unavailable(t, runtimes.Containerd, fmt.Sprintf("containerd has no image %s: run `make engine-images CONTAINER_RUNTIME=containerd`", ref))
	}
}

// engineTest returns the engine and a label unique to the test, and sweeps everything carrying
// it before and after.
func engineTest(t *testing.T) (*containerdruntime.Runtime, map[string]string) {
	t.Helper()
	rt := engine(t)
	requireImage(t, rt, dockerenv.LoadBalancerImage())
	labels := map[string]string{testLabel: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))}
	sweep := func() {
		// The suite's unlabelled containers (the events test's stranger) too, when a failed
		// run left them: they would keep its networks.
		all, _ := rt.ListContainers(context.Background(), nil)
		for _, c := range all {
			if strings.HasPrefix(c.Name, prefix+"-") {
				_ = rt.RemoveContainer(context.Background(), c.Name)
			}
		}
		conformance.Sweep(context.Background(), t, rt, labels)
	}
	sweep()
	t.Cleanup(sweep)
	return rt, labels
}

// prefix starts the names of everything the suite creates here.
const prefix = "dockyard-ctrd-conf"

func subject(rt container.Runtime, labels map[string]string) conformance.Subject {
	return conformance.Subject{
		Runtime: rt, Image: dockerenv.LoadBalancerImage(), Labels: labels, Prefix: prefix, NoIPv6: true,
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"exec sleep 600"},
	}
}

func TestRuntimeConformsOnContainerd(t *testing.T) {
	rt, labels := engineTest(t)
	conformance.Run(t, subject(rt, labels))
}

func TestInfoOnContainerd(t *testing.T) {
	rt := engine(t)
	info, err := rt.Info(context.Background())
	if err != nil || info.Name != "containerd" || info.Version == "" || info.CgroupDriver != "cgroupfs" {
		t.Errorf("info %+v %v", info, err)
	}
}

// A node container made the way Dockyard's node layer makes it (capabilities without
// privilege, tmpfs /run and /tmp, a /var volume filled from the image, a fixed address on the
// cluster's network, the image's entrypoint) boots systemd, and containerd answers in it.
func TestNodeBootsOnContainerd(t *testing.T) {
	rt := engine(t)
	requireImage(t, rt, dockerenv.NodeImage())
	ctx := context.Background()
	cluster := docker.ClusterKey{Namespace: "ctrd-test", Name: "boot"}
	labels := cluster.ClusterLabels()
	conformance.Sweep(ctx, t, rt, labels)
	t.Cleanup(func() { conformance.Sweep(context.Background(), t, rt, labels) })

	m := docker.NewManager(rt, docker.ManagerOptions{Privilege: docker.PrivilegeNever})
	network := docker.DefaultNetworkName(cluster)
	if _, err := m.EnsureNetwork(ctx, cluster, docker.NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	node, err := m.AddNode(ctx, docker.NodeSpec{
		Cluster: cluster, Machine: "cp-0", Image: dockerenv.NodeImage(), Role: docker.RoleControlPlane, Network: network,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !node.Running || node.Address(network) == "" {
		t.Fatalf("node %s is %s at %q", node.Name, node.State, node.Address(network))
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := node.Ready(ctx)
		if err == nil && st.Ready {
			break
		}
		if st.Failed || time.Now().After(deadline) {
			logs, _ := rt.ContainerLogs(ctx, node.Name, 40)
			t.Fatalf("node %s not ready: %+v %v\n%s", node.Name, st, err, logs)
		}
		time.Sleep(2 * time.Second)
	}
	var out strings.Builder
	code, err := rt.Exec(ctx, node.Name, container.ExecOptions{
		Cmd: []string{"sh", "-c", "systemctl is-system-running; ctr version | grep -m1 Version; test -s /var/lib/dpkg/status && echo var-filled"}, Stdout: &out, Stderr: &out,
	})
	t.Logf("node %s: exit %d %v\n%s", node.Name, code, err, out.String())
	if err != nil || !strings.Contains(out.String(), "var-filled") {
		t.Errorf("the node's /var volume was not filled from the image")
	}
	if err := m.DeleteNode(ctx, cluster, "cp-0"); err != nil {
		t.Error(err)
	}
}

// What the runtime builds itself where Docker has it built in: loopback up, /etc/hosts naming
// the peers (no DNS server), volumes filled from the image, terminal output in the logs,
// published ports on 127.0.0.1, reachability within a network and isolation between networks.
func TestNetworkingAndFilesOnContainerd(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	img := dockerenv.LoadBalancerImage()
	name := func(s string) string { return prefix + "-own-" + s }
	for _, n := range []string{name("net"), name("other")} {
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: n, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.CreateVolume(ctx, container.VolumeSpec{Name: name("vol"), Labels: labels}); err != nil {
		t.Fatal(err)
	}
	// A listens on 8080 with a configuration copied into its volume before its first start
	// (the tmpfs is empty at every start: the entrypoint copies it from the volume).
	server := container.ContainerSpec{
		Name: name("a"), Hostname: "alpha", Image: img, Labels: labels, Network: name("net"), NetworkAliases: []string{"alias-a"},
		Tty: true, Entrypoint: []string{"sh", "-c"},
		Cmd:   []string{"echo tty-out; cp /usr/local/etc/haproxy/test.cfg /etc/test/ && exec haproxy -db -f /etc/test/test.cfg"},
		Ports: []container.PortMapping{{ContainerPort: 8080, HostIP: "127.0.0.1"}},
		Mounts: []container.Mount{
			{Type: container.MountVolume, Source: name("vol"), Target: "/usr/local/etc/haproxy"},
			{Type: container.MountTmpfs, Target: "/etc/test"},
		},
	}
	if err := rt.CreateContainer(ctx, server); err != nil {
		t.Fatal(err)
	}
	cfg := "defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\nfrontend f\n  bind *:8080\n  default_backend b\nbackend b\n"
	if err := rt.CopyToContainer(ctx, name("a"), "/usr/local/etc/haproxy", tarOf(t, "test.cfg", cfg)); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name("a")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, network string }{{name("b"), name("net")}, {name("c"), name("other")}} {
		spec := container.ContainerSpec{Name: c.name, Image: img, Labels: labels, Network: c.network, Entrypoint: []string{"sleep"}, Cmd: []string{"600"}}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, c.name); err != nil {
			t.Fatal(err)
		}
	}
	a, err := rt.InspectContainer(ctx, name("a"))
	if err != nil {
		t.Fatal(err)
	}
	sh := func(c, cmd string) (int, string) {
		var out strings.Builder
		code, err := rt.Exec(ctx, c, container.ExecOptions{Cmd: []string{"bash", "-c", cmd}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("%s in %s: %v", cmd, c, err)
		}
		return code, out.String()
	}
	probe := func(target string) string { return "timeout 3 bash -c 'exec 3<>/dev/tcp/" + target + "/8080'" }
	dockerenv.WaitFor(t, 20*time.Second, "haproxy in "+name("a"), func() error {
		if code, out := sh(name("a"), probe("127.0.0.1")); code != 0 {
			return errors.Errorf("127.0.0.1:8080 in the container: exit %d %s", code, out)
		}
		return nil
	})
	for cmd, want := range map[string]int{
		"test -s /usr/local/etc/haproxy/haproxy.cfg": 0, // the volume was filled from the image
		"cat /sys/class/net/lo/flags | grep -qx 0x9": 0, // loopback up
		probe(a.Networks[name("net")].IPv4):          0, // its own address
		"test \"$(hostname)\" = alpha":               0,
		"grep -qw " + name("b") + " /etc/hosts":      0,
		"grep -qw " + name("c") + " /etc/hosts":      1, // not on its networks
	} {
		if code, out := sh(name("a"), cmd); code != want {
			t.Errorf("in %s: %s: exit %d, want %d: %s", name("a"), cmd, code, want, out)
		}
	}
	for _, target := range []string{"alias-a", "alpha", name("a")} {
		if code, out := sh(name("b"), probe(target)); code != 0 {
			t.Errorf("%s cannot reach %s:8080 on their network: exit %d %s", name("b"), target, code, out)
		}
	}
	if code, _ := sh(name("c"), probe(a.Networks[name("net")].IPv4)); code == 0 {
		t.Errorf("%s on another network reached %s: networks are not isolated", name("c"), name("a"))
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", a.Ports[0].HostPort), 3*time.Second)
	if err != nil {
		t.Errorf("the published port %+v: %v", a.Ports, err)
	} else {
		conn.Close()
	}
	logs, err := rt.ContainerLogs(ctx, name("a"), 10)
	if err != nil || !strings.Contains(logs, "tty-out") {
		t.Errorf("the terminal's output in the logs: %q %v", logs, err)
	}
}

func tarOf(t *testing.T, name, content string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}
