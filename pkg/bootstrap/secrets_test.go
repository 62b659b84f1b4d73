package bootstrap

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// Bootstrap data that misplaces a secret (a token where a path, a mode, an encoding, a module
// or a unit name belongs) is refused or reported without showing it: the message ends up in a
// condition and an event that anyone reading the DockyardMachine sees.
func TestMessagesNeverShowTheDatasSecrets(t *testing.T) {
	const token, secretHalf = "abcdef.0123456789abcdef", "0123456789abcdef"
	for _, tc := range []struct {
		format Format
		data   string
	}{
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: " + token + "\n  content: x\n"},
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/x\n  permissions: " + token + "\n"},
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/x\n  encoding: " + token + "\n"},
		{FormatCloudConfig, "#cloud-config\n" + token + ": 1\n"},
		{FormatCloudConfig, "## template: jinja\n#cloud-config\nruncmd:\n- echo {{ " + token + " }}\n"},
		{FormatIgnition, `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"` + token + `","contents":{"source":"data:,x"}}]}}`},
		{FormatIgnition, `{"ignition":{"version":"` + token + `"}}`},
		{FormatIgnition, `{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"` + token + `","contents":"x"}]}}`},
		{FormatCloudConfig, "#cloud-config\nwrite_files:\n- path: /etc/k\n  content: |\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIEowIBAAKCAQEAuSECRETLINEOFAKEY0123456789\n    -----END RSA PRIVATE KEY-----\n  permissions: MIIEowIBAAKCAQEAuSECRETLINEOFAKEY0123456789\n"},
	} {
		p, err := Parse(tc.format, []byte(tc.data), Options{Hostname: "n"})
		said := ""
		if err != nil {
			said = err.Error()
		} else {
			said = strings.Join(p.Ignored, "; ")
		}
		if said == "" {
			t.Errorf("%q: nothing was said about the misplaced secret", tc.data)
		}
		for _, secret := range []string{secretHalf, "uSECRETLINEOFAKEY"} {
			if strings.Contains(said, secret) {
				t.Errorf("%q: the message shows a secret: %s", tc.data, said)
			}
		}
	}
}

func TestRedactHidesSecretsInOutput(t *testing.T) {
	out := "kubeadm join 192.0.2.1:6443 --token abcdef.0123456789abcdef --certificate-key " + strings.Repeat("ab", 32) +
		"\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBSECRET\n-----END EC PRIVATE KEY-----\n"
	got := Redact(out)
	for _, secret := range []string{"0123456789abcdef", strings.Repeat("ab", 32), "MHcCAQEEIBSECRET"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q still shows %s", got, secret)
		}
	}
}

// Real-looking secrets for the redaction tests: generated keys, kubeadm's output as
// `kubeadm init --upload-certs` prints it, and the journal's prefix before each line.
const (
	sampleToken   = "9a08jv.c0izixklcxtmnze7"
	sampleCertKey = "3c9a0f4b1e27d5c86a4e0d3b9f1c7a2e5d8b6f0a4c3e1d9b7a5f3e1c0b8d6f4a"
	sampleCAHash  = "sha256:7c2b1f6e0d4a9c8b3e5f7a1d2c4e6b8a0f9d3c5e7b1a2d4f6c8e0a9b7d5c3e1f"
	journalPrefix = "Mar 03 10:12:01.123456 dev-control-plane-x7k2p dockyard-bootstrap.sh[812]: "
)

const kubeadmInitOutput = `[upload-certs] Storing the certificates in Secret "kubeadm-certs" in the "kube-system" Namespace
[upload-certs] Using certificate key:
` + sampleCertKey + `
[mark-control-plane] Marking the node dev-control-plane-x7k2p as control-plane by adding the labels
[bootstrap-token] Using token: ` + sampleToken + `
Your Kubernetes control-plane has initialized successfully!

You can now join any number of control-plane nodes running the following command on each as root:

  kubeadm join 172.18.0.3:6443 --token ` + sampleToken + ` \
	--discovery-token-ca-cert-hash ` + sampleCAHash + ` \
	--control-plane --certificate-key ` + sampleCertKey + `
`

// journal prefixes every line of s as journalctl --output=short-precise does.
func journal(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] = journalPrefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// prefixed puts a prefix before each line of s, as a journal or a container runtime writes
// them: format takes the line's number three times (seconds, fraction, a PID or more digits).
func prefixed(s, format string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] = fmt.Sprintf(format, i%60, i*7919%1000000, i%3) + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func sampleKeys(t *testing.T) (ecKey, pkcs8Key, certificate string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// keyLines are the body lines of a PEM block: any one of them in the output leaks the key.
func keyLines(block string) []string {
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	return lines
}

// wrap cuts s into lines of n characters, as base64(1) does.
func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	return b.String() + s + "\n"
}

func TestRedactHidesEverySecretShape(t *testing.T) {
	ecKey, pkcs8Key, cert := sampleKeys(t)
	b64 := base64.StdEncoding.EncodeToString
	kubeconfig := "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: " + b64([]byte(cert)) +
		"\n    server: https://172.18.0.3:6443\n  name: dev\nusers:\n- name: dev-admin\n  user:\n    client-certificate-data: " + b64([]byte(cert)) +
		"\n    client-key-data: " + b64([]byte(ecKey)) + "\n"
	// A JWT as the API server issues them for service accounts.
	jwt := "eyJhbGciOiJSUzI1NiIsImtpZCI6IkRfWk1uZnEifQ.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDprdWJlLXN5c3RlbTpkZWZhdWx0In0.TmljZVRyeUFfc2lnbmF0dXJlX29mX3RoZV90b2tlbg"
	for _, tc := range []struct {
		name    string
		out     string
		secrets []string
		keep    []string
	}{
		{"kubeadm init", kubeadmInitOutput, []string{sampleToken, "c0izixklcxtmnze7", sampleCertKey}, []string{"[upload-certs] Using certificate key:", sampleCAHash, "--control-plane --certificate-key"}},
		{"kubeadm init in the journal", journal(kubeadmInitOutput), []string{sampleToken, "c0izixklcxtmnze7", sampleCertKey}, []string{journalPrefix + "[mark-control-plane]", sampleCAHash}},
		{"kubeadm config", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\ncertificateKey: \"" + sampleCertKey + "\"\nbootstrapTokens:\n- token: " + sampleToken + "\n", []string{sampleToken, sampleCertKey}, []string{"certificateKey:"}},
		{"certificate key in JSON", `{"certificateKey":"` + sampleCertKey + `"}`, []string{sampleCertKey}, nil},
		{"EC private key", "writing /etc/kubernetes/pki/ca.key\n" + ecKey + "done\n", keyLines(ecKey), []string{"writing /etc/kubernetes/pki/ca.key", "done"}},
		{"PKCS #8 private key in the journal", journal(pkcs8Key), keyLines(pkcs8Key), nil},
		{"private key cut short", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAuSECRETLINEOFAKEY0123456789", []string{"MIIEowIBAAKCAQEAuSECRETLINEOFAKEY0123456789"}, nil},
		{"kubeconfig", kubeconfig, []string{b64([]byte(ecKey))[14:]}, []string{"client-key-data:", "server: https://172.18.0.3:6443"}},
		{"Secret data", "data:\n  tls.crt: " + b64([]byte(cert)) + "\n  tls.key: " + b64([]byte(pkcs8Key)) + "\ntype: kubernetes.io/tls\n", []string{b64([]byte(pkcs8Key))[14:]}, []string{"tls.key:", "type: kubernetes.io/tls"}},
		{"wrapped base64", "$ base64 ca.key\n" + wrap(b64([]byte(ecKey)), 76) + "$ echo done\n", strings.Split(strings.TrimSpace(wrap(b64([]byte(ecKey)), 76)), "\n"), []string{"$ base64 ca.key", "$ echo done"}},
		// base64 /etc/kubernetes/pki/ca.key | systemd-cat, as a bootstrap command may run it:
		// every line of the key in the journal, each with its own time.
		{"wrapped base64 in the journal", prefixed(wrap(b64([]byte(pkcs8Key)), 76)+"done\n", "Dec 06 17:00:%02d.%06d dev-control-plane-x7k2p systemd-cat[%d]: "),
			strings.Split(strings.TrimSpace(wrap(b64([]byte(pkcs8Key)), 76)), "\n"), []string{"]: done", "Dec 06 17:00:00.000000"}},
		// A container's log as the runtime writes it (CRI), and as kubectl logs prints it.
		{"wrapped base64 in a container's log", prefixed(wrap(b64([]byte(ecKey)), 64)+"done\n", "2026-12-06T17:00:%02d.%06d%03dZ stdout F "),
			strings.Split(strings.TrimSpace(wrap(b64([]byte(ecKey)), 64)), "\n"), []string{"stdout F done"}},
		{"base64 of a file with a key after a line", "content: " + b64([]byte("# c\n"+ecKey)), []string{b64([]byte("# c\n" + ecKey))[20:]}, []string{"content: "}},
		{"base64 of a file with a key after two bytes", "content: " + b64([]byte("#\n"+ecKey)), []string{b64([]byte("#\n" + ecKey))[20:]}, nil},
		{"a kubeconfig Secret's value", "  value: " + b64([]byte(kubeconfig)) + "\n", []string{b64([]byte(kubeconfig))[400:]}, []string{"  value: "}},
		{"service account token", "Authorization: Bearer " + jwt + "\n", []string{jwt, jwt[strings.LastIndex(jwt, "."):]}, []string{"Authorization: Bearer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Redact(tc.out)
			for _, secret := range tc.secrets {
				if strings.Contains(got, secret) {
					t.Errorf("shows %q:\n%s", secret, got)
				}
			}
			for _, keep := range tc.keep {
				if !strings.Contains(got, keep) {
					t.Errorf("lost %q:\n%s", keep, got)
				}
			}
		})
	}
}

// What is no secret stays: a log is no help when every digest and ID is gone.
func TestRedactKeepsOrdinaryOutput(t *testing.T) {
	_, _, cert := sampleKeys(t)
	for _, s := range []string{
		"docker.io/library/nginx:1.27 application/vnd.oci.image.index.v1+json sha256:" + strings.Repeat("4e", 32) + " 72.0 MiB linux/amd64\n",
		"9f2c5b0a0e1d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b    registry.k8s.io/pause:3.10    io.containerd.runc.v2\n",
		journalPrefix + "[certs] Using certificateDir folder \"/etc/kubernetes/pki\"\n" + journalPrefix + "[certs] Generating \"ca\" certificate and key\n",
		"I0303 10:12:01.123456     812 server.go:483] \"Kubelet version\" kubeletVersion=\"v1.34.4\"\n",
		"discovery-token-ca-cert-hash " + sampleCAHash + "\n",
		cert,
	} {
		if got := Redact(s); got != s {
			t.Errorf("Redact changed ordinary output:\n%s\ninto\n%s", s, got)
		}
	}
}
