package workloadapi

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/proxy"
)

// KubeadmControlPlane reads when each control plane machine's API server certificate expires
// (the Machine's certificates-expiry annotation) by a TLS handshake through port-forward to the
// node's kube-apiserver Pod on kubeadm's port: the simulated cluster's API server answers there,
// with its serving certificate. Another port of that Pod answers nothing.
func TestKubeadmControlPlaneReadsTheAPIServersCertificateThroughPortForward(t *testing.T) {
	ctx := context.Background()
	sc := newServedCluster(t)
	c, rc, caCert := sc.Cluster, sc.rest, sc.caCert
	cp := Node{Name: "cp-0", ProviderID: "dockyard:////cp-0", KubernetesVersion: "v1.34.4", ControlPlane: true}
	if err := c.Init(ctx, cp, "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.4\n"); err != nil {
		t.Fatal(err)
	}

	handshake := func(port int) (*tls.ConnectionState, error) {
		dialer, err := proxy.NewDialer(proxy.Proxy{Kind: "pods", Namespace: "kube-system", KubeConfig: rc, Port: port})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		raw, err := dialer.DialContextWithAddr(ctx, "kube-apiserver-cp-0")
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // as KubeadmControlPlane: only the certificate is read
		defer conn.Close()
		if err := conn.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		st := conn.ConnectionState()
		return &st, nil
	}
	st, err := handshake(6443)
	if err != nil {
		t.Fatalf("a TLS handshake through port-forward to kube-apiserver-cp-0:6443: %v", err)
	}
	if len(st.PeerCertificates) == 0 || st.PeerCertificates[0].CheckSignatureFrom(caCert) != nil || !st.PeerCertificates[0].NotAfter.After(time.Now()) {
		t.Errorf("the API server's certificate through port-forward is not a valid one of the cluster's CA: %+v", st.PeerCertificates)
	}
	if _, err := handshake(6444); err == nil {
		t.Error("port 6444 of kube-apiserver-cp-0 answered")
	}
}
