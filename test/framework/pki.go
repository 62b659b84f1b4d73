package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/errors"
)

// certificateAuthority signs every certificate of one management plane: the API server's and
// the webhook servers' serving certificates and the administrator's client certificate. One CA
// keeps the kubeconfig and every caBundle identical.
type certificateAuthority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// keyPair is a certificate and its private key, PEM encoded.
type keyPair struct {
	certPEM []byte
	keyPEM  []byte
}

func newCertificateAuthority() (*certificateAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, errors.Wrap(err, "generating the CA key")
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: "dockyard-test-management-plane-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, errors.Wrap(err, "signing the CA certificate")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, errors.Wrap(err, "parsing the CA certificate")
	}
	return &certificateAuthority{cert: cert, key: key, certPEM: pemEncode("CERTIFICATE", der)}, nil
}

// keyPEM returns the CA's private key, PKCS #8 PEM encoded.
func (ca *certificateAuthority) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, errors.Wrap(err, "encoding the CA key")
	}
	return pemEncode("PRIVATE KEY", der), nil
}

// servingCert returns a TLS server certificate for the loopback names and addresses.
func (ca *certificateAuthority) servingCert(commonName string, dnsNames []string, ips []net.IP) (keyPair, error) {
	return ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// clientCert returns a TLS client certificate: the API server maps the common name to the user
// and the organizations to its groups.
func (ca *certificateAuthority) clientCert(user string, groups ...string) (keyPair, error) {
	return ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *certificateAuthority) sign(tmpl *x509.Certificate) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, errors.Wrap(err, "generating a key")
	}
	now := time.Now()
	tmpl.SerialNumber = serialNumber()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(7 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return keyPair{}, errors.Wrapf(err, "signing the certificate of %s", tmpl.Subject.CommonName)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, errors.Wrap(err, "encoding a key")
	}
	return keyPair{certPEM: pemEncode("CERTIFICATE", der), keyPEM: pemEncode("PRIVATE KEY", keyDER)}, nil
}

// serviceAccountKey returns the key the API server signs service account tokens with, and its
// public half, PEM encoded. RSA: every Kubernetes version accepts it for RS256.
func serviceAccountKey() (private, public []byte, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, errors.Wrap(err, "generating the service account key")
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, errors.Wrap(err, "encoding the service account public key")
	}
	return pemEncode("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), pemEncode("PUBLIC KEY", pub), nil
}

// write stores the pair as <dir>/<name>.crt and <dir>/<name>.key.
func (kp keyPair) write(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, kp.certPEM, 0o644); err != nil {
		return "", "", errors.Wrapf(err, "writing %s", certFile)
	}
	if err := os.WriteFile(keyFile, kp.keyPEM, 0o600); err != nil {
		return "", "", errors.Wrapf(err, "writing %s", keyFile)
	}
	return certFile, keyFile, nil
}

func pemEncode(blockType string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
}

func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
