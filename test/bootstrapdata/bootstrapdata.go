// Package bootstrapdata makes bootstrap data shaped like what Cluster API's kubeadm bootstrap
// provider writes, for tests of nodes that run kubeadm (the in-memory engine's), and clients of
// the clusters it makes.
package bootstrapdata

import (
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/kubeconfig"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"fmt"
	"strings"

	"github.com/dockyard-dev/dockyard/pkg/scheme"

	"sigs.k8s.io/cluster-api/util/secret"
)

// Init is the cloud-config of a first control plane node as Cluster API's kubeadm bootstrap
// provider writes it: the CAs, kubeadm's configuration and kubeadm init.
func Init(endpoint string, certificates secret.Certificates) string {
	var b strings.Builder
	b.WriteString("## template: jinja\n#cloud-config\nwrite_files:\n")
	for _, f := range certificates.AsFiles() {
		fmt.Fprintf(&b, "- path: %s\n  permissions: '%s'\n  owner: root:root\n  content: |\n%s", f.Path, f.Permissions, indent(f.Content))
	}
	kubeadmYAML := fmt.Sprintf("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\ncontrolPlaneEndpoint: %s\nkubernetesVersion: v1.34.4\n"+
		"---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: '{{ ds.meta_data.local_hostname }}'\n", endpoint)
	fmt.Fprintf(&b, "- path: /run/kubeadm/kubeadm.yaml\n  permissions: '0640'\n  owner: root:root\n  content: |\n%s", indent(kubeadmYAML))
	b.WriteString("runcmd:\n- 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'\n")
	return b.String()
}

// Join is the cloud-config of a worker as Cluster API's kubeadm bootstrap provider writes it.
func Join(endpoint string) string {
	joinYAML := fmt.Sprintf("apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: %s\n    token: abcdef.0123456789abcdef\n"+
		"nodeRegistration:\n  name: '{{ ds.meta_data.local_hostname }}'\n", endpoint)
	return "## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  permissions: '0640'\n  owner: root:root\n  content: |\n" +
		indent(joinYAML) + "runcmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete\n"
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// Client is a client of the cluster whose CAs are certificates, at endpoint (host:port), with a
// certificate of its CA, as Cluster API's kubeconfig Secret carries.
func Client(endpoint string, certificates secret.Certificates) (client.Client, error) {
	ca := certificates.GetByPurpose(secret.ClusterCA).KeyPair
	caCert, err := certs.DecodeCertPEM(ca.Cert)
	if err != nil {
		return nil, err
	}
	caKey, err := certs.DecodePrivateKeyPEM(ca.Key)
	if err != nil {
		return nil, err
	}
	kc, err := kubeconfig.New("workload", "https://"+endpoint, caCert, caKey)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	return client.New(rc, client.Options{Scheme: scheme.New()})
}
