package workloadapi

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
)

// etcdCluster is a simulated cluster whose etcd Pods forward to its etcd, served over TLS with
// the cluster's CA, with the REST config of Cluster API's kubeconfig.
func etcdCluster(t *testing.T, members ...string) (*Etcd, *rest.Config, *tls.Config) {
	t.Helper()
	caCert, caKey := newCA(t)
	etcdCA, etcdKey := newCA(t)
	e, err := NewEtcd(etcdCA, etcdKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	store := NewStore()
	for _, m := range members {
		e.AddMember(m)
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-" + m}}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Create(schema.GroupResource{Resource: "pods"}, &unstructured.Unstructured{Object: content}); err != nil {
			t.Fatal(err)
		}
	}
	srv := NewServer(store, "v1.34.4")
	srv.SetForwarder(func(namespace, pod string, port int) (net.Conn, error) {
		member, ok := strings.CutPrefix(pod, "etcd-")
		if namespace != "kube-system" || !ok || port != 2379 {
			return nil, errors.Errorf("nothing listens on port %d of %s/%s", port, namespace, pod)
		}
		return e.Dial(member)
	})
	hs := httptest.NewUnstartedServer(srv)
	if hs.TLS, err = TLSConfig(caCert, caKey, nil); err != nil {
		t.Fatal(err)
	}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	kc, err := kubeconfig.New("c", hs.URL, caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return e, rc, etcdClientTLS(t, etcdCA, etcdKey)
}

// etcdClientTLS is the TLS of KubeadmControlPlane's etcd client: a client certificate of the
// etcd CA, and the member's certificate checked against it but for its host name.
func etcdClientTLS(t *testing.T, ca *x509.Certificate, caKey crypto.Signer) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := certs.Config{CommonName: "kube-apiserver-etcd-client", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	cert, err := cfg.NewSignedCert(key, ca, caKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{{Certificate: [][]byte{cert.Raw}, PrivateKey: key}},
		InsecureSkipVerify: true, //nolint:gosec // as KubeadmControlPlane: the chain is verified below, not the Pod's name
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate")
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots})
			return err
		},
	}
}

// KubeadmControlPlane's own etcd client reaches the simulated members through port-forward to
// their Pods, and lists, moves the leader, removes a member; a member down is not reached.
func TestKubeadmControlPlaneReachesEtcdThroughPortForward(t *testing.T) {
	ctx := context.Background()
	e, rc, tlsConfig := etcdCluster(t, "cp-0", "cp-1", "cp-2")
	connect := func(member string) (*etcd.Client, error) {
		return etcd.NewClient(ctx, etcd.ClientConfiguration{
			Endpoint:  "etcd-" + member,
			Proxy:     proxy.Proxy{Kind: "pods", Namespace: "kube-system", ResourceName: "etcd-" + member, KubeConfig: rc, Port: 2379},
			TLSConfig: tlsConfig, DialTimeout: 5 * time.Second, CallTimeout: 5 * time.Second,
		})
	}
	c, err := connect("cp-0")
	if err != nil {
		t.Fatalf("connecting to member cp-0: %v", err)
	}
	defer c.Close()
	members, err := c.Members(ctx)
	if err != nil || len(members) != 3 {
		t.Fatalf("members: %v, %v; want 3", members, err)
	}
	if c.LeaderID != members[0].ID || members[0].Name != "cp-0" {
		t.Errorf("leader %x, members %+v; want cp-0 leading", c.LeaderID, members[0])
	}
	var cp1 uint64
	for _, m := range members {
		if m.Name == "cp-1" {
			cp1 = m.ID
		}
	}
	if err := c.MoveLeader(ctx, cp1); err != nil {
		t.Fatal(err)
	}
	alarms, err := c.Alarms(ctx)
	if err != nil || len(alarms) != 0 {
		t.Errorf("alarms: %v, %v; want none", alarms, err)
	}
	c1, err := connect("cp-1")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if c1.LeaderID != cp1 {
		t.Errorf("after the move, leader %x, want cp-1's %x", c1.LeaderID, cp1)
	}
	var cp2 uint64
	for _, m := range members {
		if m.Name == "cp-2" {
			cp2 = m.ID
		}
	}
	if err := c1.RemoveMember(ctx, cp2); err != nil {
		t.Fatal(err)
	}
	if got := e.Members(); len(got) != 2 {
		t.Errorf("members after removing cp-2: %v", got)
	}

	e.SetDown("cp-0", true)
	if _, err := connect("cp-0"); err == nil {
		t.Error("a member that is down was reached")
	}
}
