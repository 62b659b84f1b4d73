package infrastructure

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// testCA is a CA certificate in PEM.
func testCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// The engine of an infrastructure acts for one owner: the management cluster (its API
// server's CA, however the manager or the command line reaches it) and the DockyardCluster's
// namespace. Without a management cluster it is the ID given, or "unknown". Its spec check is
// the node layer's policy.
func TestEnginesActForTheManagementClusterAndNamespace(t *testing.T) {
	ctx := context.Background()
	var objs []corev1.Secret
	for _, ns := range []string{"team-a", "team-b"} {
		objs = append(objs, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infra"},
			Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testKubeconfig)}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(&objs[0], &objs[1]).Build()
	cfg := policy.DefaultConfig()
	cfg.ManagementInfrastructureNamespaces = []string{"*"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := docker.NewManager(inmemory.New(), docker.ManagerOptions{Policy: p})
	owner := func(opts Options, namespace string, k *infrav1.KubernetesInfrastructure) string {
		t.Helper()
		opts.Secrets, opts.Policy = c, p
		dc := dockyardCluster("dev", k)
		dc.Namespace = namespace
		tg, err := New(host, opts).resolve(ctx, dc)
		if err != nil {
			t.Fatal(err)
		}
		return tg.config.Kubernetes.Owner
	}
	remote := &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	ca := testCA(t, "management")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, append([]byte("\n"), ca...), 0o600); err != nil {
		t.Fatal(err)
	}
	byData := &rest.Config{Host: "https://127.0.0.1:39111", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	inCluster := &rest.Config{Host: "https://10.96.0.1:443", TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}}

	a := owner(Options{Management: byData}, "team-a", remote)
	if !strings.HasSuffix(a, "/team-a") || strings.HasPrefix(a, "unknown") || len(a) > 64 {
		t.Errorf("owner %q, want the management cluster's CA and the namespace team-a", a)
	}
	if got := owner(Options{Management: inCluster}, "team-a", remote); got != a {
		t.Errorf("the same management cluster reached at its in-cluster address with its CA in a file: owner %q, want %q", got, a)
	}
	if got := owner(Options{Management: byData}, "team-a", &infrav1.KubernetesInfrastructure{}); got != a {
		t.Errorf("the management cluster as the infrastructure: owner %q, want %q", got, a)
	}
	for what, got := range map[string]string{
		"another namespace":                 owner(Options{Management: byData}, "team-b", remote),
		"another management cluster":        owner(Options{Management: &rest.Config{Host: byData.Host, TLSClientConfig: rest.TLSClientConfig{CAData: testCA(t, "other")}}}, "team-a", remote),
		"a management cluster without a CA": owner(Options{Management: &rest.Config{Host: "https://mgmt.example:6443"}}, "team-a", remote),
	} {
		if got == a || got == "" {
			t.Errorf("%s: owner %q, want another than %q", what, got, a)
		}
	}
	if got := owner(Options{ManagementID: "ci-7"}, "team-a", remote); got != "ci-7/team-a" {
		t.Errorf("no management cluster, an ID given: owner %q", got)
	}
	if got := owner(Options{}, "team-a", remote); got != "unknown/team-a" {
		t.Errorf("no management cluster: owner %q", got)
	}

	tg, err := New(host, Options{Secrets: c, Policy: p}).resolve(ctx, dockyardCluster("dev", remote))
	if err != nil {
		t.Fatal(err)
	}
	check := tg.config.Kubernetes.SpecCheck
	if check == nil {
		t.Fatal("the engine has no spec check")
	}
	spec := container.ContainerSpec{Name: "dev-md-0.team-a", Image: "kindest/node:v1.34.0",
		Mounts: []container.Mount{{Type: container.MountBind, Source: "/lib/modules", Target: "/lib/modules", ReadOnly: true, Optional: true}}}
	if err := check(spec); err != nil {
		t.Errorf("a node's spec: %v", err)
	}
	spec.Mounts = append(spec.Mounts, container.Mount{Type: container.MountBind, Source: "/etc", Target: "/host/etc"})
	if err := check(spec); !policy.IsRefused(err) || !strings.Contains(err.Error(), policy.HostPathsFlag) {
		t.Errorf("a spec mounting /etc: %v, want a refusal naming %s", err, policy.HostPathsFlag)
	}
}
