package workloadapi

import (
	"context"
	"crypto"
	"crypto/x509"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

func newCA(t *testing.T) (*x509.Certificate, crypto.Signer) {
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

// The kubeconfig Cluster API writes for a cluster (a client certificate signed by the cluster's
// CA) reaches its simulated API server, which proves itself with the same CA; a client without
// a certificate, or with one of another CA, is refused.
func TestOnlyClientsOfTheClustersCAAreServed(t *testing.T) {
	caCert, caKey := newCA(t)
	otherCert, otherKey := newCA(t)
	srv := httptest.NewUnstartedServer(NewServer(NewStore(), "v1.34.4"))
	cfg, err := TLSConfig(caCert, caKey, []string{"cluster.example"})
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = cfg
	srv.StartTLS()
	defer srv.Close()

	list := func(clientCA *x509.Certificate, clientCAKey crypto.Signer) error {
		t.Helper()
		kc, err := kubeconfig.New("c", srv.URL, clientCA, clientCAKey)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		// The server is proven by the cluster's CA in every case: only the client differs.
		rc.CAData = certs.EncodeCertPEM(caCert)
		return listNodes(rc)
	}
	if err := list(caCert, caKey); err != nil {
		t.Errorf("Cluster API's kubeconfig of the cluster: %v", err)
	}
	if err := list(otherCert, otherKey); err == nil {
		t.Error("a client certificate of another CA was served")
	}
	if err := listNodes(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: certs.EncodeCertPEM(caCert)}}); err == nil {
		t.Error("a client without a certificate was served")
	}
}

func listNodes(rc *rest.Config) error {
	c, err := client.New(rc, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	return c.List(context.Background(), &corev1.NodeList{})
}
