package infrastructure

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

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

func dockyardCluster(name string, k *infrav1.KubernetesInfrastructure) *infrav1.DockyardCluster {
	return &infrav1.DockyardCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{Kubernetes: k}},
	}
}

// What a DockyardCluster names becomes the engine its nodes run on: none, the manager's; a
// kubeconfig Secret, that cluster (the kubeconfig's namespace unless the spec names one, reached
// from outside its network); no Secret, the management cluster in the cluster's own namespace,
// where the policy allows it.
func TestWhereADockyardClustersNodesRun(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra", ResourceVersion: "7"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testKubeconfig)}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	cfg := policy.DefaultConfig()
	cfg.ManagementInfrastructureNamespaces = []string{"team-a"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mgmt := &rest.Config{Host: "https://management:6443"}
	e := New(docker.NewManager(inmemory.New(), docker.ManagerOptions{}), Options{Secrets: c, Management: mgmt, Policy: p})

	if tg, err := e.resolve(ctx, dockyardCluster("local", nil)); tg != nil || err != nil {
		t.Errorf("no infrastructure: %+v %v, want the manager's engine", tg, err)
	}
	tg, err := e.resolve(ctx, dockyardCluster("remote", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}))
	if err != nil || tg.config.Kubernetes.REST.Host != "https://infra.example:6443" || tg.config.Kubernetes.Namespace != "from-kubeconfig" ||
		tg.version != "7" || !tg.config.Kubernetes.External || tg.id != "secret/team-a/infra/from-kubeconfig" {
		t.Errorf("a kubeconfig Secret: %+v %v", tg, err)
	}
	if tg, err := e.resolve(ctx, dockyardCluster("remote-ns", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra", Namespace: "pods"})); err != nil ||
		tg.config.Kubernetes.Namespace != "pods" {
		t.Errorf("a kubeconfig Secret and a namespace: %+v %v", tg, err)
	}
	if tg, err := e.resolve(ctx, dockyardCluster("mgmt", &infrav1.KubernetesInfrastructure{})); err != nil ||
		tg.config.Kubernetes.REST != mgmt || tg.config.Kubernetes.Namespace != "team-a" || tg.config.Kubernetes.External {
		t.Errorf("the management cluster: %+v %v", tg, err)
	}
	if _, err := e.resolve(ctx, dockyardCluster("mgmt-other-ns", &infrav1.KubernetesInfrastructure{Namespace: "kube-system"})); !policy.IsRefused(err) ||
		!strings.Contains(err.Error(), "spec.infrastructure.kubernetes.namespace") {
		t.Errorf("another namespace of the management cluster: %v", err)
	}
	strict := New(e.Host(), Options{Secrets: c, Management: mgmt, Policy: policy.Default()})
	if _, err := strict.For(ctx, dockyardCluster("mgmt", &infrav1.KubernetesInfrastructure{})); !policy.IsRefused(err) {
		t.Errorf("the management cluster without the administrator's leave: %v", err)
	}
	if _, err := e.For(ctx, dockyardCluster("no-secret", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "absent"})); err == nil ||
		!strings.Contains(err.Error(), "Secret absent (spec.infrastructure.kubernetes.kubeconfigSecret) does not exist") {
		t.Errorf("a missing Secret: %v", err)
	}
}

// One engine per infrastructure, made once per version of its Secret: the same node layer
// for every cluster there, a new one when the Secret changes (the one before retired, its
// watch stopped), and none left once its last cluster is released.
func TestEnginesAreMadeOncePerSecretVersionAndRetired(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testKubeconfig)}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
	host := docker.NewManager(inmemory.New(), docker.ManagerOptions{})
	e := New(host, Options{Secrets: c, Events: docker.NewEngineEvents(host)})

	if nodes, err := e.For(ctx, nil); err != nil || nodes != host {
		t.Errorf("no DockyardCluster: %v, want the host's node layer", err)
	}
	if nodes, err := e.For(ctx, dockyardCluster("local", nil)); err != nil || nodes != host {
		t.Errorf("no infrastructure: %v, want the host's node layer", err)
	}
	remote := &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	a, err := e.For(ctx, dockyardCluster("a", remote))
	if err != nil || a == host {
		t.Fatalf("a kubeconfig Secret: %v, want another engine", err)
	}
	b, err := e.For(ctx, dockyardCluster("b", remote))
	if err != nil || b != a {
		t.Errorf("another cluster on the same infrastructure got another engine (%v)", err)
	}
	if again, err := e.For(ctx, dockyardCluster("a", remote)); err != nil || again != a {
		t.Errorf("the same version of the Secret made another engine (%v)", err)
	}

	secret.Data[infrav1.InfrastructureKubeconfigKey] = []byte(strings.Replace(testKubeconfig, "infra.example", "infra-2.example", 1))
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	changed, err := e.For(ctx, dockyardCluster("a", remote))
	if err != nil || changed == a {
		t.Errorf("the Secret changed and the engine did not (%v)", err)
	}
	if len(e.engines) != 1 {
		t.Errorf("%d engines after the Secret changed, want the new one only", len(e.engines))
	}
	e.Release(dockyardCluster("a", remote))
	if len(e.engines) != 1 {
		t.Error("an engine another cluster still uses was retired")
	}
	e.Release(dockyardCluster("b", remote))
	if len(e.engines) != 0 || len(e.users) != 1 {
		t.Errorf("engines %v, users %v after the last cluster was released; want no engine, the host's cluster", e.engines, e.users)
	}
}

// The resolver reads one Secret per call, and nothing else: no List, no other object.
func TestResolvingReadsOnlyTheKubeconfigSecret(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testKubeconfig)}}
	reads := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()}
	e := New(docker.NewManager(inmemory.New(), docker.ManagerOptions{}), Options{Secrets: reads})
	for range 3 {
		if _, err := e.For(ctx, dockyardCluster("a", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"})); err != nil {
			t.Fatal(err)
		}
		if _, err := e.For(ctx, dockyardCluster("local", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if reads.gets != 3 || reads.lists != 0 {
		t.Errorf("%d Gets and %d Lists for 3 clusters on a Secret's infrastructure and 3 on the host, want 3 Gets", reads.gets, reads.lists)
	}
}

type countingReader struct {
	client.Reader
	gets, lists int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists++
	return c.Reader.List(ctx, list, opts...)
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
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra"}, Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(kubeconfig)}}
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(secret).Build()
			e := New(docker.NewManager(inmemory.New(), docker.ManagerOptions{}), Options{Secrets: c, Management: &rest.Config{}, Policy: policy.Default()})
			_, err := e.For(ctx, dockyardCluster("c", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}))
			if !policy.IsRefused(err) || !strings.Contains(err.Error(), "spec.infrastructure.kubernetes.kubeconfigSecret") {
				t.Errorf("refusal: %v", err)
			}
		})
	}
}

// Where the policy keeps a namespace off the host's engine, or off an infrastructure cluster's
// server (http, or one not listed for it), the engine is refused as NotAllowed, naming the flag.
func TestThePolicySaysWhereANamespacesNodesMayRun(t *testing.T) {
	ctx := context.Background()
	httpKubeconfig := strings.Replace(testKubeconfig, "https://infra.example:6443", "http://infra.example:8080", 1)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "infra"},
			Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testKubeconfig)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plain"},
			Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(httpKubeconfig)}},
	).Build()
	cfg := policy.DefaultConfig()
	cfg.HostEngineNamespaces = []string{"platform"}
	cfg.InfrastructureServers = []string{"team-b=https://infra.example:6443", "https://other.example:6443"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := New(docker.NewManager(inmemory.New(), docker.ManagerOptions{}), Options{Secrets: c, Policy: p})
	for _, tc := range []struct {
		what string
		k    *infrav1.KubernetesInfrastructure
		flag string
	}{
		{"the host's engine", nil, policy.HostEngineFlag},
		{"a server listed for another namespace", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}, policy.InfrastructureServersFlag},
		{"a server over http", &infrav1.KubernetesInfrastructure{KubeconfigSecret: "plain"}, policy.InfrastructureServersFlag},
	} {
		_, err := e.For(ctx, dockyardCluster("c", tc.k))
		if !policy.IsRefused(err) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.what, err, tc.flag)
		}
	}
}

// Every in-memory cluster resolves to the one in-memory engine, built by the picker, with fronts
// listening on the address the manager was given; a namespace the policy keeps off the
// manager's memory is refused, naming the flag.
func TestInMemoryClustersShareTheInMemoryEngine(t *testing.T) {
	ctx := context.Background()
	cfg := policy.DefaultConfig()
	cfg.InMemoryNamespaces = []string{"scale"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := New(docker.NewManager(inmemory.New(), docker.ManagerOptions{}), Options{Policy: p, InMemory: runtimes.InMemory{Address: "127.0.0.1"}})
	inMemory := func(namespace, name string) *infrav1.DockyardCluster {
		dc := dockyardCluster(name, nil)
		dc.Namespace = namespace
		dc.Spec.Infrastructure.InMemory = &infrav1.InMemoryInfrastructure{}
		return dc
	}
	a, err := e.For(ctx, inMemory("scale", "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.For(ctx, inMemory("scale", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a == e.Host() {
		t.Errorf("two in-memory clusters got node layers %p and %p (the host's %p), want one of its own", a, b, e.Host())
	}
	if where := e.Where(inMemory("scale", "a")); where != infrav1.EngineInMemory {
		t.Errorf("an in-memory cluster runs on %q, want %q", where, infrav1.EngineInMemory)
	}
	info, err := a.HostInfo(ctx)
	if err != nil || info.Engine != "inmemory 0" {
		t.Errorf("the engine of an in-memory cluster: %+v (%v)", info, err)
	}
	if _, err := e.For(ctx, inMemory("team-a", "c")); !policy.IsRefused(err) || !strings.Contains(err.Error(), policy.InMemoryFlag) {
		t.Errorf("an in-memory cluster in team-a: %v, want a refusal naming %s", err, policy.InMemoryFlag)
	}
}
