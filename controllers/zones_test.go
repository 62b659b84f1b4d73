package controllers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

func TestFailureDomainsAreTheEnginesZones(t *testing.T) {
	spec := []clusterv1.FailureDomain{{Name: "c", ControlPlane: ptr.To(false)}, {Name: "gone", ControlPlane: ptr.To(true)}}
	if got := failureDomains(spec, nil); len(got) != 2 || got[0].Name != "c" {
		t.Errorf("on an engine of one host the spec's are kept: %+v", got)
	}
	got := failureDomains(spec, []string{"a", "b", "c"})
	want := map[string]bool{"a": true, "b": true, "c": false}
	if len(got) != 3 {
		t.Fatalf("failure domains %+v, want a, b and c", got)
	}
	for _, fd := range got {
		if cp, ok := want[fd.Name]; !ok || ptr.Deref(fd.ControlPlane, false) != cp {
			t.Errorf("failure domain %s control plane %v, want %v", fd.Name, ptr.Deref(fd.ControlPlane, false), cp)
		}
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: infra
  cluster: {server: "https://infra.example:6443"}
users:
- name: u
  user: {token: t0ken}
contexts:
- name: c
  context: {cluster: infra, user: u, namespace: from-kubeconfig}
current-context: c
`

func TestInfrastructureOfADockyardCluster(t *testing.T) {
	ctx := context.Background()
	dc := func(name string, k *infrav1.KubernetesInfrastructure) *infrav1.DockyardCluster {
		return &infrav1.DockyardCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Spec:       infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{Kubernetes: k}},
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra", ResourceVersion: "7"}, Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testKubeconfig)}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		dc("local", nil),
		dc("remote", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}),
		dc("remote-ns", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra", Namespace: "pods"}),
		dc("mgmt", &infrav1.KubernetesInfrastructure{}),
		dc("mgmt-other-ns", &infrav1.KubernetesInfrastructure{Namespace: "kube-system"}),
		dc("no-secret", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "absent"}),
		secret,
	).Build()
	p, err := policy.New(policy.Config{ManagementInfrastructureNamespaces: []string{"team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	mgmt := &rest.Config{Host: "https://management:6443"}
	infra := Infrastructure(c, c, mgmt, p)
	key := func(name string) docker.ClusterKey { return docker.ClusterKey{Namespace: "team-a", Name: name} }

	for _, name := range []string{"local", "not-there"} {
		if in, err := infra(ctx, key(name)); in != nil || err != nil {
			t.Errorf("%s: %+v %v, want the manager's engine", name, in, err)
		}
	}
	in, err := infra(ctx, key("remote"))
	if err != nil || in.Config.Host != "https://infra.example:6443" || in.Namespace != "from-kubeconfig" || in.Version != "7" || !in.External {
		t.Errorf("remote: %+v %v", in, err)
	}
	if again, err := infra(ctx, key("remote")); err != nil || again != in {
		t.Errorf("the same version of the Secret is read again: %+v %v", again, err)
	}
	secret.Data[infrav1.InfrastructureKubeconfigKey] = []byte(strings.Replace(testKubeconfig, "infra.example", "infra-2.example", 1))
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if changed, err := infra(ctx, key("remote")); err != nil || changed.ID != in.ID || changed.Version == in.Version || changed.Config.Host != "https://infra-2.example:6443" {
		t.Errorf("after the Secret changed: %+v %v; before %+v", changed, err, in)
	}
	if in, err := infra(ctx, key("remote-ns")); err != nil || in.Namespace != "pods" {
		t.Errorf("remote with a namespace: %+v %v", in, err)
	}
	if in, err := infra(ctx, key("mgmt")); err != nil || in.Config != mgmt || in.Namespace != "team-a" || in.External {
		t.Errorf("the management cluster: %+v %v", in, err)
	}
	if _, err := infra(ctx, key("mgmt-other-ns")); !policy.IsRefused(err) || !strings.Contains(err.Error(), "spec.infrastructure.kubernetes.namespace") {
		t.Errorf("another namespace of the management cluster: %v", err)
	}
	if _, err := Infrastructure(c, c, mgmt, policy.Default())(ctx, key("mgmt")); !policy.IsRefused(err) {
		t.Errorf("the management cluster without the administrator's leave: %v", err)
	}
	if _, err := infra(ctx, key("no-secret")); err == nil || !strings.Contains(err.Error(), "kubeconfigSecret absent") {
		t.Errorf("a missing Secret: %v", err)
	}
}

// A kubeconfig a team puts in a Secret must name the infrastructure cluster only: one that
// would have the manager read its own files (its service account token, keys), run a command
// or a plugin, or go through a proxy is refused, naming the field.
func TestInfrastructureKubeconfigActsOnlyAsItsAuthor(t *testing.T) {
	ctx := context.Background()
	cluster := "clusters: [{name: infra, cluster: {server: https://infra.example:6443}}]\n"
	user := func(u string) string {
		return "apiVersion: v1\nkind: Config\n" + cluster + "users: [{name: u, user: " + u + "}]\n" +
			"contexts: [{name: c, context: {cluster: infra, user: u}}]\ncurrent-context: c\n"
	}
	for name, kubeconfig := range map[string]string{
		"the manager's token": user("{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}"),
		"a command":           user("{exec: {apiVersion: client.authentication.k8s.io/v1, command: sh, args: [-c, id], interactiveMode: Never}}"),
		"a key file":          user("{client-certificate: /etc/ssl/cert.pem, client-key: /etc/ssl/key.pem}"),
		"an auth provider":    user("{auth-provider: {name: oidc}}"),
		"a CA file":           strings.Replace(user("{token: t}"), "server: https://infra.example:6443", "server: https://infra.example:6443, certificate-authority: /etc/ssl/ca.pem", 1),
		"a proxy":             strings.Replace(user("{token: t}"), "server: https://infra.example:6443", "server: https://infra.example:6443, proxy-url: http://10.0.0.1:3128", 1),
	} {
		t.Run(name, func(t *testing.T) {
			dc := &infrav1.DockyardCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", Labels: map[string]string{clusterv1.ClusterNameLabel: "c"}},
				Spec:       infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{Kubernetes: &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}}},
			}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra"}, Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(kubeconfig)}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(dc, secret).Build()
			_, err := Infrastructure(c, c, &rest.Config{}, policy.Default())(ctx, docker.ClusterKey{Namespace: "team-a", Name: "c"})
			if !policy.IsRefused(err) || !strings.Contains(err.Error(), "spec.infrastructure.kubernetes.kubeconfigSecret") {
				t.Errorf("refusal: %v", err)
			}
		})
	}
}
