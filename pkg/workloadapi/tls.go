package workloadapi

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"net"

	"github.com/pkg/errors"
	"sigs.k8s.io/cluster-api/util/certs"
)

// TLSConfig is how a simulated cluster's API server meets its clients, as a kubeadm cluster's
// does: a serving certificate signed by the cluster's CA for its endpoint's addresses and names,
// and a client certificate signed by the same CA required of every client (the kubeconfig
// Cluster API writes carries one). caKey is the CA's key, of any algorithm Cluster API makes;
// the serving key is ECDSA P-256, cheap to make for a thousand clusters.
func TLSConfig(caCert *x509.Certificate, caKey crypto.Signer, hosts []string) (*tls.Config, error) {
	cfg := certs.Config{CommonName: "kube-apiserver", Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	cfg.AltNames.DNSNames = []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost"}
	cfg.AltNames.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			cfg.AltNames.IPs = append(cfg.AltNames.IPs, ip)
		} else if h != "" {
			cfg.AltNames.DNSNames = append(cfg.AltNames.DNSNames, h)
		}
	}
	return mutualTLS(cfg, caCert, caKey, "h2", "http/1.1")
}

// mutualTLS is a server's TLS: a certificate of cfg signed by a CA, on an ECDSA P-256 key, and
// client certificates of the same CA required.
func mutualTLS(cfg certs.Config, caCert *x509.Certificate, caKey crypto.Signer, protocols ...string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, errors.Wrapf(err, "making the serving key of %s", cfg.CommonName)
	}
	cert, err := cfg.NewSignedCert(key, caCert, caKey)
	if err != nil {
		return nil, errors.Wrapf(err, "signing the serving certificate of %s with the cluster's CA", cfg.CommonName)
	}
	clients := x509.NewCertPool()
	clients.AddCert(caCert)
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Raw, caCert.Raw}, PrivateKey: key, Leaf: cert}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clients,
		NextProtos:   protocols,
	}, nil
}
