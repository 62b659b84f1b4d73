// Package bootstrapdata makes bootstrap data shaped like what Cluster API's kubeadm bootstrap
// provider writes, for tests of nodes that run kubeadm (the in-memory engine's).
package bootstrapdata

import (
	"fmt"
	"strings"

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
