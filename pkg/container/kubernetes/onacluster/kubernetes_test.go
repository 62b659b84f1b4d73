package onacluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgo "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dockyard-dev/dockyard/pkg/container/conformance"
	"github.com/dockyard-dev/dockyard/pkg/container/kubernetes"
	"github.com/dockyard-dev/dockyard/test/ci"
)

const (
	testLabel = "dockyard.x-k8s.io/runtime-test"
	// kubeconfigEnv names the infrastructure cluster the tests run on (make test-kubernetes-engine
	// makes one with Dockyard on Docker).
	kubeconfigEnv = "DOCKYARD_TEST_INFRA_KUBECONFIG"
	namespace     = "dockyard-engine-test"
)

// testImage is an image the infrastructure cluster's nodes hold (DOCKYARD_TEST_INFRA_IMAGE
// overrides it); it has sh, sleep, cat, printenv, hostname, kill and tar.
func testImage() string {
	if v := os.Getenv("DOCKYARD_TEST_INFRA_IMAGE"); v != "" {
		return v
	}
	return "localhost/conformance/e2e/busybox:1.37.0-1"
}

// engineTest connects to the infrastructure cluster, makes the test namespace, and sweeps what
// carries the test's labels before and after.
func engineTest(t *testing.T) (*kubernetes.Runtime, map[string]string) {
	t.Helper()
	path := os.Getenv(kubeconfigEnv)
	if path == "" {
		ci.Missing(t, kubeconfigEnv+" names no infrastructure cluster (make test-kubernetes-engine makes one and runs these tests)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := kubernetes.NewFromKubeconfig(b, namespace)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	cs := clientgo.NewForConfigOrDie(cfg)
	_, err = cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// A node lists the images it holds in its status at its next update (every 10 s or so).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		ok, err := rt.ImageExists(context.Background(), testImage())
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the infrastructure cluster's nodes do not list %s after a minute (%v): load it into them first", testImage(), err)
		}
	}
	labels := map[string]string{testLabel: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))}
	sweep := func() { conformance.Sweep(context.Background(), t, rt, labels) }
	sweep()
	t.Cleanup(sweep)
	return rt, labels
}

// clientset is a client of the infrastructure cluster, for what the engine does not show.
func clientset(t *testing.T) clientgo.Interface {
	t.Helper()
	b, err := os.ReadFile(os.Getenv(kubeconfigEnv))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	return clientgo.NewForConfigOrDie(cfg)
}

func TestConformanceOnKubernetes(t *testing.T) {
	rt, labels := engineTest(t)
	conformance.Run(t, conformance.Subject{
		Runtime: rt, Image: testImage(), Labels: labels, Prefix: "dockyard-k8s-conf",
		Entrypoint: []string{"sh", "-c"}, Cmd: []string{"exec sleep 600"},
		NoIPv6: true, NoHostCgroups: true, PullsWhereRun: true, Balances: true, Zoned: true,
		NotApplicable: map[string]string{
			"Lifecycle": "a Pod's PID 1 cannot be killed from inside it, its ports are published by a Service and not on a host, " +
				"and its CPU shares are the kubelet's (TestPodLifecycle covers the rest)",
			"HostPorts":      "ports are published by Services, on the cluster's addresses, not on a host's",
			"Copy":           "a Pod that is not running has no exec to copy with (copies into running Pods are in Exec's and TestVolumeSeeded's checks)",
			"OptionalBinds":  "the host a Pod lands on is chosen after it is created: optional binds are left out and required ones are the kubelet's",
			"Networks":       "a network is a NetworkPolicy and has no subnet: the cluster's network gives Pods their addresses",
			"FixedAddresses": "the cluster's network gives Pods their addresses",
			"Events":         "a Pod's PID 1 cannot be killed from inside it (TestPodEvents sees a Pod start, die and go)",
			"Images":         "images reach the nodes from a registry: nothing is saved from or loaded into the cluster",
		},
	})
}
