package workloadapi

import (
	"context"
	"crypto"
	"crypto/x509"
	"net"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	kcp "sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// servedCluster is a simulated cluster of v1.34.4 served on a loopback port (closed when the
// test ends), the CAs it was made with, and the REST config of Cluster API's kubeconfig for it.
type servedCluster struct {
	*Cluster
	rest           *rest.Config
	caCert, etcdCA *x509.Certificate
	caKey, etcdKey crypto.Signer
}

func newServedCluster(t *testing.T) servedCluster {
	t.Helper()
	sc := servedCluster{}
	sc.caCert, sc.caKey = newCA(t)
	sc.etcdCA, sc.etcdKey = newCA(t)
	c, err := NewCluster(ClusterOptions{KubernetesVersion: "v1.34.4", CACert: sc.caCert, CAKey: sc.caKey, EtcdCACert: sc.etcdCA, EtcdCAKey: sc.etcdKey})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Serve(l) }()
	t.Cleanup(func() { _ = c.Close() })
	kc, err := kubeconfig.New("c", "https://"+l.Addr().String(), sc.caCert, sc.caKey)
	if err != nil {
		t.Fatal(err)
	}
	if sc.rest, err = clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig(); err != nil {
		t.Fatal(err)
	}
	sc.Cluster = c
	return sc
}

// What kubeadm leaves in a cluster, as Cluster API reads it through the cluster's endpoint with
// its kubeconfig: Nodes Ready with their provider IDs, a control plane node's static Pods and
// etcd member, kubeadm's ConfigMaps, kube-proxy (which KubeadmControlPlane's own upgrade step
// moves to a new version); kubeadm reset takes a node's part away.
func TestKubeadmsLeavingsAsClusterAPIReadsThem(t *testing.T) {
	ctx := context.Background()
	sc := newServedCluster(t)
	c, rc, etcdCA, etcdKey := sc.Cluster, sc.rest, sc.etcdCA, sc.etcdKey

	cp := func(name string) Node {
		return Node{Name: name, ProviderID: "dockyard:////" + name, KubernetesVersion: "v1.34.4", ControlPlane: true}
	}
	if err := c.Init(ctx, cp("cp-0"), "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.4\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Join(ctx, cp("cp-1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Join(ctx, Node{Name: "md-0", ProviderID: "dockyard:////md-0", KubernetesVersion: "v1.34.4"}); err != nil {
		t.Fatal(err)
	}

	cl, err := client.New(rc, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 3 {
		t.Fatalf("Nodes: %v, want cp-0, cp-1, md-0", names(nodes.Items))
	}
	for _, n := range nodes.Items {
		// What Cluster API's NodeHealthy reads: Ready, and no memory, disk or PID pressure.
		healthy := map[corev1.NodeConditionType]corev1.ConditionStatus{}
		for _, c := range n.Status.Conditions {
			healthy[c.Type] = c.Status
		}
		ready := healthy[corev1.NodeReady] == corev1.ConditionTrue && healthy[corev1.NodeMemoryPressure] == corev1.ConditionFalse &&
			healthy[corev1.NodeDiskPressure] == corev1.ConditionFalse && healthy[corev1.NodePIDPressure] == corev1.ConditionFalse
		if !ready || n.Spec.ProviderID != "dockyard:////"+n.Name || n.Status.NodeInfo.KubeletVersion != "v1.34.4" {
			t.Errorf("Node %s: Ready %v, providerID %q, kubelet %q", n.Name, ready, n.Spec.ProviderID, n.Status.NodeInfo.KubeletVersion)
		}
	}
	for _, name := range []string{"kube-apiserver-cp-1", "kube-controller-manager-cp-1", "kube-scheduler-cp-1", "etcd-cp-1"} {
		var pod corev1.Pod
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: name}, &pod); err != nil {
			t.Errorf("static Pod %s: %v", name, err)
		} else if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName != "cp-1" {
			t.Errorf("static Pod %s: %s on %q", name, pod.Status.Phase, pod.Spec.NodeName)
		}
	}
	var cm corev1.ConfigMap
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, &cm); err != nil || cm.Data["ClusterConfiguration"] == "" {
		t.Errorf("kubeadm-config: %v, %v", cm.Data, err)
	}

	// KubeadmControlPlane's upgrade of kube-proxy, with its own code.
	w := &kcp.Workload{Client: cl}
	if err := w.UpdateKubeProxyImageInfo(ctx, &controlplanev1.KubeadmControlPlane{Spec: controlplanev1.KubeadmControlPlaneSpec{Version: "v1.35.0"}}); err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-proxy"}, &ds); err != nil || ds.Spec.Template.Spec.Containers[0].Image != "registry.k8s.io/kube-proxy:v1.35.0" {
		t.Errorf("kube-proxy after KubeadmControlPlane's upgrade step: %v, %v", ds.Spec.Template.Spec.Containers, err)
	}

	members := func() []string {
		t.Helper()
		ec, err := etcd.NewClient(ctx, etcd.ClientConfiguration{
			Endpoint:  "etcd-cp-0",
			Proxy:     proxy.Proxy{Kind: "pods", Namespace: "kube-system", ResourceName: "etcd-cp-0", KubeConfig: rc, Port: 2379},
			TLSConfig: etcdClientTLS(t, etcdCA, etcdKey), DialTimeout: 5 * time.Second, CallTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer ec.Close()
		ms, err := ec.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	if got := members(); len(got) != 2 {
		t.Errorf("etcd members %v, want cp-0 and cp-1", got)
	}
	if err := c.Reset(ctx, "cp-1"); err != nil {
		t.Fatal(err)
	}
	if got := members(); len(got) != 1 || got[0] != "cp-0" {
		t.Errorf("etcd members after cp-1's reset: %v, want cp-0", got)
	}
	if err := cl.Get(ctx, client.ObjectKey{Name: "cp-1"}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node cp-1 after its reset: %v, want NotFound", err)
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "etcd-cp-1"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("etcd-cp-1 after the reset: %v, want NotFound", err)
	}
}

// The etcd and CoreDNS images are kubeadm's for the node's Kubernetes minor, as Cluster API's
// upgrade checks read them back; an unknown minor gets the newest known.
func TestKubeadmsImagesFollowTheKubernetesVersion(t *testing.T) {
	for _, tc := range []struct{ version, etcd, coreDNS string }{
		// The minors a chained upgrade to v1.34 passes through (kubeadm v1.31.14 and v1.32.13).
		{"v1.31.14", "3.5.24-0", "v1.11.3"},
		{"v1.32.13", "3.5.24-0", "v1.11.3"},
		{"v1.33.13", "3.5.24-0", "v1.12.0"},
		{"v1.34.4", "3.6.5-0", "v1.12.1"},
		{"v1.99.0", "3.6.5-0", "v1.12.1"},
	} {
		etcd, coreDNS := imagesOf(tc.version)
		if etcd != tc.etcd || coreDNS != tc.coreDNS {
			t.Errorf("%s: etcd %s, CoreDNS %s; want %s, %s", tc.version, etcd, coreDNS, tc.etcd, tc.coreDNS)
		}
		pod := staticPod("etcd", Node{Name: "n", KubernetesVersion: tc.version})
		if want := "registry.k8s.io/etcd:" + tc.etcd; pod.Spec.Containers[0].Image != want {
			t.Errorf("%s: etcd's static Pod runs %s, want %s", tc.version, pod.Spec.Containers[0].Image, want)
		}
	}
}
