//go:build kubernetes_engine

package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgo "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/kubernetes"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
	"github.com/dockyard-dev/dockyard/test/ci"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// infraKubeconfigEnv names the infrastructure cluster of the node layer's tests on the
// Kubernetes engine (make test-kubernetes-engine makes one with Dockyard on Docker).
const infraKubeconfigEnv = "DOCKYARD_TEST_INFRA_KUBECONFIG"

// kubernetesCluster returns a node manager on the Kubernetes engine (the namespace
// dockyard-test of the infrastructure cluster) and a cluster key unique to the test;
// everything of the cluster is removed afterwards.
func kubernetesCluster(t *testing.T) (*Manager, container.Runtime, ClusterKey) {
	t.Helper()
	path := os.Getenv(infraKubeconfigEnv)
	if path == "" {
		ci.Missing(t, infraKubeconfigEnv+" names no infrastructure cluster (make test-kubernetes-engine makes one and runs these tests)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	_, err = clientgo.NewForConfigOrDie(cfg).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rt, err := kubernetes.New(cfg, testNamespace)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	key := ClusterKey{Namespace: testNamespace, Name: "dk" + hex.EncodeToString(suffix)}
	m := NewManager(rt, ManagerOptions{Privilege: PrivilegeAuto})
	t.Cleanup(func() {
		if t.Failed() {
			dumpContainers(t, rt, key)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := m.DeleteCluster(ctx, key, DefaultNetworkName(key)); err != nil {
			t.Errorf("cleaning up cluster %s: %v", key, err)
		}
	})
	return m, rt, key
}

// A node of Dockyard's node image boots as a Pod on the Kubernetes engine, through the same
// node layer calls as on Docker: systemd and containerd run (its /var an emptyDir seeded from
// the image), and a bootstrap plan runs once.
func TestNodeBootsAsAPod(t *testing.T) {
	m, rt, key := kubernetesCluster(t)
	node := bootNode(t, m, key, "cp-0", RoleControlPlane)
	ctx := context.Background()
	if out, code := execOut(t, rt, node.Name, "ctr", "--namespace", "k8s.io", "version"); code != 0 {
		t.Errorf("containerd does not answer: %s", out)
	}
	if out, _ := execOut(t, rt, node.Name, "hostname"); out != node.Hostname {
		t.Errorf("hostname %q, want %q", out, node.Hostname)
	}
	if a := nodeAddress(node, DefaultNetworkName(key)); a == "" {
		t.Errorf("the node has no address on its network: %+v", node.Networks)
	}
	plan := &bootstrap.Plan{Steps: []bootstrap.Step{
		{File: &bootstrap.File{Path: "/etc/dockyard-test/secret.key", Content: []byte("s3cret\n"), Mode: 0o600, Owner: "root", Group: "root"}},
		{Command: &bootstrap.Command{Script: "echo run >> /var/lib/dockyard-test-runs; mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete"}},
	}}
	if err := m.startBootstrap(ctx, node.Name, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitBootstrap(t, m, node.Name, time.Minute, bootstrap.Succeeded)
	if err := m.startBootstrap(ctx, node.Name, plan, time.Minute); err != nil {
		t.Fatal(err)
	}
	if out, _ := execOut(t, rt, node.Name, "cat", "/var/lib/dockyard-test-runs"); out != "run" {
		t.Errorf("bootstrap ran %q", out)
	}
	if out, _ := execOut(t, rt, node.Name, "stat", "-c", "%a %U", "/etc/dockyard-test/secret.key"); out != "600 root" {
		t.Errorf("secret file: %q", out)
	}
	logs, err := rt.ContainerLogs(ctx, node.Name, 20)
	if err != nil || !strings.Contains(logs, "systemd") {
		t.Errorf("the node's console (systemd's boot): %q %v", logs, err)
	}
}

// What dockyard load image and export logs do on a cluster whose nodes are Pods: the node layer
// of the cluster's Kubernetes engine, made from the one of the engine the images are on (Docker)
// with ForEngine, copies an image from Docker into the node Pod over the exec API, and collects
// the node's logs; the front standing for the load balancer is described.
func TestLoadImagesAndLogsOfANodePod(t *testing.T) {
	sub, rt, key := kubernetesCluster(t)
	host := dockerenv.Engine(t)
	image := os.Getenv("DOCKYARD_TEST_INFRA_IMAGE")
	if image == "" {
		image = "localhost/conformance/e2e/busybox:1.37.0-1"
	}
	dockerenv.RequireImages(t, host, image)
	// The cluster's engine, chosen above the node layer as the CLI does: images come from the
	// host's engine, where they are built.
	m := NewManager(host, ManagerOptions{}).ForEngine(rt)
	bootNode(t, sub, key, "cp-0", RoleControlPlane)
	ctx := context.Background()
	if _, err := m.EnsureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: "unused", Network: DefaultNetworkName(key)}); err != nil {
		t.Fatal(err)
	}
	nodes, err := m.Nodes(ctx, key, "")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("the cluster's nodes through the host's Manager: %v %v", nodes, err)
	}
	var loaded []ImageLoad
	if err := nodes[0].LoadImages(ctx, []string{image}, func(l ImageLoad) { loaded = append(loaded, l) }); err != nil {
		t.Fatal(err)
	}
	if out, _ := execOut(t, rt, nodes[0].Name, "ctr", "--namespace", "k8s.io", "images", "list", "-q"); !strings.Contains(out, image) {
		t.Errorf("the node Pod does not hold %s after the load: %s", image, out)
	}
	if len(loaded) == 0 || !loaded[len(loaded)-1].Done {
		t.Errorf("loads reported: %+v", loaded)
	}
	dir := t.TempDir()
	logs, err := logdir.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	if err := nodes[0].CollectLogs(ctx, logs); err != nil {
		t.Fatal(err)
	}
	lb, err := m.FindLoadBalancer(ctx, key)
	if err != nil || lb == nil {
		t.Fatalf("the front: %v %v", lb, err)
	}
	if err := lb.CollectLogs(ctx, logs); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"journal.log", "kubelet.log", "console.log", "front.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s was not collected: %v", f, err)
		}
	}
}
