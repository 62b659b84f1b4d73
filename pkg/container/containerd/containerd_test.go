package containerd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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
		Runtime: rt, Image: dockerenv.LoadBalancerImage(), Labels: labels, Prefix: prefix,
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
	if _, err := m.EnsureNetwork(ctx, cluster, network); err != nil {
		t.Fatal(err)
	}
	node, err := m.CreateNode(ctx, docker.NodeSpec{
		Cluster: cluster, Machine: "cp-0", Image: dockerenv.NodeImage(), Role: docker.RoleControlPlane, Network: network,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !node.Running || node.Networks[network].IPv4 == "" {
		t.Fatalf("node %+v", node)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := m.CheckNode(ctx, node.Name)
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
