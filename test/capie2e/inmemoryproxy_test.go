package capie2e

import (
	"context"
	"crypto"
	"crypto/x509"
	"io"
	"net"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/secret"

	"github.com/dockyard-dev/dockyard/pkg/workloadapi"
)

func TestParseEndpoint(t *testing.T) {
	for address, want := range map[string]endpoint{
		"dockyard-in-memory.dockyard-system.svc:6443":               {service: "dockyard-in-memory", namespace: "dockyard-system", port: 6443},
		"dockyard-in-memory.dockyard-system.svc.cluster.local:7001": {service: "dockyard-in-memory", namespace: "dockyard-system", port: 7001},
		"10.244.0.7:6443":          {ip: "10.244.0.7", port: 6443},
		"[fd00:10:244::7]:6443":    {ip: "fd00:10:244::7", port: 6443},
		"172.18.0.3:6443":          {ip: "172.18.0.3", port: 6443},
		"lb.example.com:6443":      {port: 6443},
		"dockyard-in-memory:6443":  {port: 6443},
		"a.b.notsvc.example:6443":  {port: 6443},
		"in-memory.svc.other:6443": {port: 6443},
	} {
		got, err := parseEndpoint(address)
		if err != nil || got != want {
			t.Errorf("parseEndpoint(%q) = %+v, %v; want %+v", address, got, err, want)
		}
	}
	for _, address := range []string{"dockyard-in-memory.dockyard-system.svc", "host:http", "host:0", "host:70000"} {
		if got, err := parseEndpoint(address); err == nil {
			t.Errorf("parseEndpoint(%q) = %+v, want an error", address, got)
		}
	}
}

func TestChoosePod(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name string, age time.Duration, phase corev1.PodPhase, ready bool, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status: corev1.PodStatus{Phase: phase, PodIP: "10.244.0.9"}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{name: "none", want: ""},
		{name: "none running", pods: []corev1.Pod{pod("pending", 0, corev1.PodPending, false, false), pod("failed", 0, corev1.PodFailed, false, false)}, want: ""},
		{name: "being deleted", pods: []corev1.Pod{pod("old", time.Hour, corev1.PodRunning, true, true)}, want: ""},
		{name: "Ready first", pods: []corev1.Pod{pod("new", time.Minute, corev1.PodRunning, false, false), pod("old", time.Hour, corev1.PodRunning, true, false)}, want: "old"},
		{name: "newest of the Ready", pods: []corev1.Pod{pod("old", time.Hour, corev1.PodRunning, true, false), pod("new", time.Minute, corev1.PodRunning, true, false)}, want: "new"},
		{name: "replaced", pods: []corev1.Pod{pod("old", time.Hour, corev1.PodRunning, true, true), pod("new", time.Minute, corev1.PodRunning, false, false)}, want: "new"},
		{name: "by name", pods: []corev1.Pod{pod("b", time.Minute, corev1.PodRunning, true, false), pod("a", time.Minute, corev1.PodRunning, true, false)}, want: "a"},
	} {
		got := ""
		if p := choosePod(tc.pods); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("%s: chose %q, want %q", tc.name, got, tc.want)
		}
	}
}

// managementCluster is the part of a framework.ClusterProxy InMemoryProxy uses.
type managementCluster struct {
	framework.ClusterProxy
	client client.Client
	config *rest.Config
}

func (m managementCluster) GetClient() client.Client    { return m.client }
func (m managementCluster) GetRESTConfig() *rest.Config { return rest.CopyConfig(m.config) }

// forwards records the port-forwards a management cluster's API server was asked for.
type forwards struct {
	mu   sync.Mutex
	seen []string
}

func (f *forwards) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, s)
}

// await tells whether the port-forward want is asked for within 10 s (the API server forwards
// a stream once the connection has made it).
func (f *forwards) await(want string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if slices.Contains(f.list(), want) {
			return true
		}
	}
	return false
}

func (f *forwards) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// A workload cluster's kubeconfig as Cluster API writes it for an in-memory cluster (its
// endpoint the manager's headless Service, a client certificate of the cluster's CA) reaches
// the cluster's API server through a port-forward to the manager's Ready Pod, made by the
// management cluster's API server, with the API server's certificate checked for the Service's
// name; the Node condition MachineDeploymentRemediationSpec patches in is kept. A port where
// nothing listens in the Pod fails with what the port-forward reported, and an address of no
// Pod is dialed directly.
func TestInMemoryProxyReachesTheClusterThroughThePortForward(t *testing.T) {
	ctx := t.Context()
	f := newPortForwardFixture(t)
	proxy := f.proxy

	c := f.workloadClient("6443")
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-0"}, node); err != nil {
		t.Fatalf("reading the in-memory cluster's Node through the port-forward: %v", err)
	}
	if got := f.seen.list(); len(got) == 0 || got[0] != "dockyard-system/manager-ready:6443" {
		t.Errorf("port-forwards %v, want to dockyard-system/manager-ready:6443", got)
	}

	// framework.PatchNodeCondition's patch, as MachineDeploymentRemediationSpec makes it.
	helper, err := patch.NewHelper(node, c)
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
		Type: "e2e.remediation.condition", Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(),
	})
	if err := helper.Patch(ctx, node); err != nil {
		t.Fatalf("patching the Node's condition: %v", err)
	}
	got := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "worker-0"}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "e2e.remediation.condition" || got.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("the Node's conditions after the patch: %v", got.Status.Conditions)
	}

	err = f.workloadClient("7001").List(ctx, &corev1.NodeList{})
	if err == nil || !strings.Contains(err.Error(), "failed to connect to localhost:7001") {
		t.Errorf("a port where nothing listens in the Pod: %v, want the port-forward's error", err)
	}

	// An endpoint that carries the Pod's IP (DOCKYARD_IN_MEMORY_HOST='$(POD_IP)') reaches that
	// Pod the same way; an address of no Pod (the management cluster's own API server here) is
	// dialed directly.
	byIP, err := proxy.DialContext(ctx, "tcp", "10.244.0.8:6443")
	if err != nil {
		t.Fatalf("dialing a Pod's IP: %v", err)
	}
	defer byIP.Close()
	if !f.seen.await("dockyard-system/manager-not-ready:6443") {
		t.Errorf("dialing the IP of manager-not-ready: port-forwards %v", f.seen.list())
	}
	before := len(f.seen.list())
	conn, err := proxy.DialContext(ctx, "tcp", f.management.Listener.Addr().String())
	if err != nil {
		t.Fatalf("dialing an address of no Pod: %v", err)
	}
	_ = conn.Close()
	if after := f.seen.list(); len(after) != before {
		t.Errorf("an address of no Pod was port-forwarded: %v", after[before:])
	}
	if _, err := proxy.DialContext(ctx, "tcp", "dockyard-in-memory.elsewhere.svc:6443"); err == nil {
		t.Error("a Service the management cluster does not have was dialed")
	}
}

// portForwardFixture is an in-memory cluster's API server behind a management cluster's API
// server that port-forwards to it, both simulated by workloadapi.
type portForwardFixture struct {
	proxy InMemoryProxy
	// seen are the port-forwards the management cluster was asked for.
	seen *forwards
	// management is the management cluster's API server.
	management *httptest.Server
	// workloadClient is a client of the in-memory cluster's kubeconfig, its endpoint the
	// manager's Service on port.
	workloadClient func(port string) client.Client
}

// newPortForwardFixture serves an in-memory cluster's API server as the manager does (TLS of
// the cluster's CA for its endpoint's name, one Node) and a management cluster whose API server
// port-forwards port 6443 of the manager's Ready Pod to it; any other port reaches nothing.
func newPortForwardFixture(t *testing.T) *portForwardFixture {
	t.Helper()
	const host = "dockyard-in-memory.dockyard-system.svc"
	// The in-memory cluster's API server, as the manager serves it: TLS of the cluster's CA for
	// the endpoint's name, one Node.
	caCert, caKey := newClusterCA(t)
	cluster := workloadapi.NewStore()
	mustCreate(t, cluster, "nodes", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}})
	workload := httptest.NewUnstartedServer(workloadapi.NewServer(cluster, "v1.34.4"))
	tlsConfig, err := workloadapi.TLSConfig(caCert, caKey, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	workload.TLS = tlsConfig
	workload.StartTLS()
	t.Cleanup(workload.Close)

	// The management cluster: the manager's headless Service and its Pods; a port-forward to
	// the Pod's port 6443 reaches the in-memory cluster's API server, any other port nothing.
	management := workloadapi.NewStore()
	mustCreate(t, management, "services", &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dockyard-system", Name: "dockyard-in-memory"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"control-plane": "controller-manager"}},
	})
	for name, status := range map[string]corev1.PodStatus{
		"manager-pending":   {Phase: corev1.PodPending},
		"manager-not-ready": {Phase: corev1.PodRunning, PodIP: "10.244.0.8", PodIPs: []corev1.PodIP{{IP: "10.244.0.8"}}},
		"manager-ready": {Phase: corev1.PodRunning, PodIP: "10.244.0.9", PodIPs: []corev1.PodIP{{IP: "10.244.0.9"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	} {
		mustCreate(t, management, "pods", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "dockyard-system", Name: name, Labels: map[string]string{"control-plane": "controller-manager"}},
			Status:     status,
		})
	}
	seen := &forwards{}
	api := workloadapi.NewServer(management, "v1.34.4")
	api.SetForwarder(func(namespace, pod string, port int) (net.Conn, error) {
		seen.add(namespace + "/" + pod + ":" + strconv.Itoa(port))
		if port != 6443 {
			// What containerd reports when nothing listens on the Pod's port.
			return nil, errors.Errorf("failed to connect to localhost:%d inside namespace: connection refused", port)
		}
		return net.Dial("tcp", workload.Listener.Addr().String())
	})
	mgmt := httptest.NewServer(api)
	t.Cleanup(mgmt.Close)
	mgmtConfig := &rest.Config{Host: mgmt.URL}
	mgmtClient, err := client.New(mgmtConfig, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	f := &portForwardFixture{proxy: InMemoryProxy{ClusterProxy: managementCluster{client: mgmtClient, config: mgmtConfig}}, seen: seen, management: mgmt}
	f.workloadClient = func(port string) client.Client {
		t.Helper()
		kc, err := kubeconfig.New("c1", "https://"+host+":"+port, caCert, caKey)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		rc.Dial = f.proxy.DialContext
		rc.Timeout = 30 * time.Second
		c, err := client.New(rc, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	return f
}

// The connection reports what the port-forward's error stream said once its data stream ends,
// and only then.
func TestForwardedConnReadsTheErrorStreamAtTheEnd(t *testing.T) {
	failed := make(chan error, 1)
	failed <- errors.New("port-forward to ns/pod:1: connection refused")
	close(failed)
	c := &forwardedConn{conn: io.NopCloser(nil), data: nopReadWriteCloser{strings.NewReader("hello")}, failed: failed, addr: "ns/pod:1"}
	b := make([]byte, 16)
	if n, err := c.Read(b); n != 5 || err != nil {
		t.Fatalf("Read = %d, %v; want the data first", n, err)
	}
	if _, err := c.Read(b); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Read at the end = %v, want the error stream's message", err)
	}
	if _, err := c.Read(b); !errors.Is(err, io.EOF) {
		t.Errorf("Read after = %v, want EOF", err)
	}
}

type nopReadWriteCloser struct{ io.Reader }

func (nopReadWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopReadWriteCloser) Close() error                { return nil }

func newClusterCA(t *testing.T) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	ca := &secret.Certificate{Purpose: secret.ClusterCA}
	if err := ca.Generate(); err != nil {
		t.Fatal(err)
	}
	cert, err := certs.DecodeCertPEM(ca.KeyPair.Cert)
	if err != nil {
		t.Fatal(err)
	}
	key, err := certs.DecodePrivateKeyPEM(ca.KeyPair.Key)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// mustCreate stores a core object of resource in a simulated API server's Store.
func mustCreate(t *testing.T, s *workloadapi.Store, resource string, obj runtime.Object) {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	o := &unstructured.Unstructured{Object: u}
	o.SetGroupVersionKind(gvks[0])
	if _, err := s.Create(schema.GroupResource{Resource: resource}, o); err != nil {
		t.Fatal(err)
	}
}

// workloadOf is a management cluster's proxy that records what GetWorkloadCluster was asked.
type workloadOf struct {
	framework.ClusterProxy
	workload framework.ClusterProxy
	options  int
}

func (w *workloadOf) GetWorkloadCluster(_ context.Context, _, _ string, options ...framework.Option) framework.ClusterProxy {
	w.options = len(options)
	return w.workload
}

// A workload cluster's proxy is an InMemoryProxy too, so the in-memory clusters of a workload
// cluster that manages clusters (the clusterctl upgrade spec's) are reached through its own
// manager Pod; its connections go through the outer proxy's dial (one option more).
func TestInMemoryProxyWorkloadsAreInMemoryProxies(t *testing.T) {
	inner := &workloadOf{}
	outer := &workloadOf{workload: inner}
	got := InMemoryProxy{ClusterProxy: outer}.GetWorkloadCluster(t.Context(), "ns", "management", framework.WithMachineLogCollector(LogCollector{}))
	p, ok := got.(InMemoryProxy)
	if !ok {
		t.Fatalf("the workload cluster's proxy is a %T, want an InMemoryProxy", got)
	}
	if p.ClusterProxy != framework.ClusterProxy(inner) {
		t.Errorf("it wraps %v, want the management cluster's workload proxy", p.ClusterProxy)
	}
	if outer.options != 2 {
		t.Errorf("%d options reached the management cluster's proxy, want the caller's and the dial's", outer.options)
	}
}
