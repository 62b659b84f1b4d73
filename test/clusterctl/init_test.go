package clusterctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"
)

// Variables of Dockyard's components set at init; the rest keep their defaults.
var initVariables = map[string]string{
	"DOCKYARD_NODE_IMAGE_REPOSITORY": "localhost/dockyard/node",
	"DOCKYARD_LB_IMAGE":              "localhost/dockyard/haproxy:latest",
	"DOCKYARD_LOG_LEVEL":             "4",
}

// TestInitOffline runs `clusterctl init --infrastructure dockyard` against a bare API server
// (etcd and kube-apiserver, nothing installed) with nothing but the local repository. No pod
// ever runs there, so cert-manager's webhook never answers; the two ways clusterctl accepts
// cert-manager without downloading it are both exercised:
//   - "from the repository": the config's cert-manager url names a file in a local repository.
//     Here that file holds only cert-manager's CRDs (the full manifest of
//     out/repository/cert-manager would install a webhook that never answers without nodes);
//     clusterctl installs it and labels it as the cert-manager it manages.
//   - "already installed": cert-manager's API is there before init (its CRDs, applied here);
//     clusterctl's probe (a test Issuer and Certificate) succeeds and it installs nothing.
func TestInitOffline(t *testing.T) {
	repo := requireRepository(t)
	fullCertManager := filepath.Join(repo.dir, "cert-manager", repo.certManagerVersion, "cert-manager.yaml")
	certManagerAPI := certManagerCRDs(t, readFile(t, fullCertManager))

	t.Run("cert-manager from the repository", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		kubeconfig, c := bareAPIServer(t)

		// A copy of the configuration whose cert-manager url names the CRDs-only manifest, laid
		// out like a local repository: <base>/cert-manager/<version>/cert-manager.yaml.
		dir := filepath.Join(t.TempDir(), "cert-manager", repo.certManagerVersion)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		manifest := filepath.Join(dir, "cert-manager.yaml")
		if err := os.WriteFile(manifest, certManagerAPI, 0o644); err != nil {
			t.Fatal(err)
		}
		config := string(readFile(t, repo.config))
		if !strings.Contains(config, "  url: "+fullCertManager+"\n") {
			t.Fatalf("%s does not point cert-manager at %s:\n%s", repo.config, fullCertManager, config)
		}
		config = strings.Replace(config, "  url: "+fullCertManager+"\n", "  url: "+manifest+"\n", 1)
		configPath := filepath.Join(t.TempDir(), "clusterctl.yaml")
		if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}

		// list-images reads every manifest, cert-manager's included, from the repository.
		images, _ := repo.run(ctx, t, run{args: []string{"init", "list-images", "--infrastructure", "dockyard", "--config", repo.config, "--kubeconfig", kubeconfig}, env: initVariables})
		for _, want := range []string{
			"quay.io/jetstack/cert-manager-controller:" + repo.certManagerVersion,
			"registry.k8s.io/cluster-api/cluster-api-controller:" + repo.capiVersion,
			"registry.k8s.io/cluster-api/kubeadm-bootstrap-controller:" + repo.capiVersion,
			"registry.k8s.io/cluster-api/kubeadm-control-plane-controller:" + repo.capiVersion,
			"localhost/dockyard/manager:" + repo.dockyardVersion,
		} {
			if !strings.Contains(images, want) {
				t.Errorf("clusterctl init list-images does not list %s:\n%s", want, images)
			}
		}

		out, _ := repo.run(ctx, t, run{args: []string{"init", "--infrastructure", "dockyard", "--config", configPath, "--kubeconfig", kubeconfig}, env: initVariables})
		t.Log("\n" + out)
		if !strings.Contains(out, "Installing cert-manager") {
			t.Errorf("clusterctl did not install cert-manager from %s:\n%s", manifest, out)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, crd); err != nil {
			t.Fatal(err)
		}
		if crd.Labels[clusterctlv1.ClusterctlCoreLabel] != clusterctlv1.ClusterctlCoreLabelCertManagerValue ||
			crd.Annotations[clusterctlv1.CertManagerVersionAnnotation] != repo.certManagerVersion {
			t.Errorf("cert-manager's CRD is not marked as installed by clusterctl: labels %v, annotations %v", crd.Labels, crd.Annotations)
		}
		verifyInit(ctx, t, repo, kubeconfig, c)
	})

	t.Run("cert-manager already installed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		kubeconfig, c := bareAPIServer(t)
		for _, o := range decode(t, certManagerAPI) {
			if err := c.Create(ctx, &o); err != nil {
				t.Fatalf("creating %s: %v", id(&o), err)
			}
		}
		waitEstablished(ctx, t, c, "certificates.cert-manager.io", "issuers.cert-manager.io")

		out, _ := repo.run(ctx, t, run{args: []string{"init", "--infrastructure", "dockyard", "--config", repo.config, "--kubeconfig", kubeconfig}, env: initVariables})
		t.Log("\n" + out)
		if !strings.Contains(out, "Skipping installing cert-manager as it is already installed") {
			t.Errorf("clusterctl did not detect the installed cert-manager:\n%s", out)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "certificates.cert-manager.io"}, crd); err != nil {
			t.Fatal(err)
		}
		if _, ok := crd.Labels[clusterctlv1.ClusterctlCoreLabel]; ok {
			t.Errorf("clusterctl took over the cert-manager it found: labels %v", crd.Labels)
		}
		verifyInit(ctx, t, repo, kubeconfig, c)
	})
}

// certManagerCRDs keeps the namespace and the CRDs of a cert-manager manifest.
func certManagerCRDs(t *testing.T, manifest []byte) []byte {
	t.Helper()
	var keep []unstructured.Unstructured
	crds := 0
	for _, o := range decode(t, manifest) {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds++
			keep = append(keep, o)
		case "Namespace":
			keep = append(keep, o)
		}
	}
	if crds != 6 {
		t.Fatalf("the cert-manager manifest has %d CRDs, want 6", crds)
	}
	out, err := capiyaml.FromUnstructured(keep)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, names ...string) {
	t.Helper()
	for _, name := range names {
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err == nil {
				established := false
				for _, cond := range crd.Status.Conditions {
					established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
				}
				if established {
					break
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("CRD %s not established", name)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// verifyInit checks what `clusterctl init` left: the four providers in the inventory at the
// repository's versions; every object of Dockyard's components, as `clusterctl generate
// provider` renders them with the same variables, on the server; nothing of Dockyard's
// outside dockyard-system except cluster-scoped objects; the variables substituted; Cluster
// API's ClusterTopology feature on.
func verifyInit(ctx context.Context, t *testing.T, repo repository, kubeconfig string, c client.Client) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("verified in %s", time.Since(start).Round(time.Millisecond)) }()
	// The inventory.
	providers := &unstructured.UnstructuredList{}
	providers.SetGroupVersionKind(clusterctlv1.GroupVersion.WithKind("ProviderList"))
	if err := c.List(ctx, providers); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"capi-system/cluster-api":                                 "CoreProvider cluster-api " + repo.capiVersion,
		"capi-kubeadm-bootstrap-system/bootstrap-kubeadm":         "BootstrapProvider kubeadm " + repo.capiVersion,
		"capi-kubeadm-control-plane-system/control-plane-kubeadm": "ControlPlaneProvider kubeadm " + repo.capiVersion,
		"dockyard-system/infrastructure-dockyard":                 "InfrastructureProvider dockyard " + repo.dockyardVersion,
	}
	got := map[string]string{}
	for _, p := range providers.Items {
		typ, _, _ := unstructured.NestedString(p.Object, "type")
		name, _, _ := unstructured.NestedString(p.Object, "providerName")
		version, _, _ := unstructured.NestedString(p.Object, "version")
		got[p.GetNamespace()+"/"+p.GetName()] = typ + " " + name + " " + version
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("inventory entry %s = %q, want %q (inventory: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("inventory has %d providers, want %d: %v", len(got), len(want), got)
	}

	// Dockyard's components as clusterctl renders them.
	rendered, _ := repo.run(ctx, t, run{args: []string{"generate", "provider", "--infrastructure", "dockyard:" + repo.dockyardVersion, "--config", repo.config}, env: initVariables})
	if strings.Contains(rendered, "${") {
		t.Errorf("Dockyard's rendered components still contain variables:\n%s", rendered)
	}
	// Objects of a cluster-scoped kind clusterctl does not know (a ValidatingAdmissionPolicy)
	// or cannot know (the Secrets binding, whose kind is a variable) are rendered with a
	// namespace, which the API server drops: those are expected by kind and name.
	expected, expectedByName := map[string]bool{}, map[string]bool{}
	for _, o := range decode(t, []byte(rendered)) {
		expected[id(&o)] = true
		expectedByName[o.GetKind()+" "+o.GetName()] = true
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(&o), live); err != nil {
			t.Errorf("%s of Dockyard's components is not on the server: %v", id(&o), err)
		}
	}

	// Everything on the server labelled as Dockyard's: namespaced objects only in dockyard-system,
	// and nothing that is not in the components (Endpoints and such aside).
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	restConfig.QPS, restConfig.Burst = 200, 400 // one list per kind: no client-side throttling
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	// One list per kind, in parallel: the first list of a custom resource takes the API server
	// about a second.
	var mu sync.Mutex
	var wg sync.WaitGroup
	found := 0
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if !strings.Contains(strings.Join(r.Verbs, ","), "list") || strings.Contains(r.Name, "/") {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				objs, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/provider=infrastructure-dockyard"})
				if err != nil {
					return // kinds whose conversion webhook cannot answer without pods
				}
				mu.Lock()
				defer mu.Unlock()
				for i := range objs.Items {
					o := &objs.Items[i]
					found++
					if r.Namespaced && o.GetNamespace() != "dockyard-system" {
						t.Errorf("%s is outside dockyard-system", id(o))
					}
					known := expected[id(o)] || (!r.Namespaced && expectedByName[o.GetKind()+" "+o.GetName()])
					if !known && r.Kind != "Endpoints" && r.Kind != "EndpointSlice" && r.Kind != "Provider" {
						t.Errorf("%s is labelled as Dockyard's but is not in its components", id(o))
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d objects labelled infrastructure-dockyard on the server, %d in the rendered components", found, len(expected))
	if found < len(expected) {
		t.Errorf("found %d objects labelled infrastructure-dockyard, want at least %d", found, len(expected))
	}

	// Variables substituted in the manager's Deployment.
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "dockyard-system", Name: "dockyard-controller-manager"}, d); err != nil {
		t.Fatal(err)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{
		"--node-image-repository=localhost/dockyard/node", "--load-balancer-image=localhost/dockyard/haproxy:latest",
		"--v=4", "--node-privileged=auto", "--diagnostics-address=:8443",
		"--container-runtime=docker", "--container-runtime-endpoint=unix:///var/run/docker.sock",
		`--namespace=""`, "--allowed-load-image-repositories=localhost/<namespace>/", "--allowed-listen-addresses=127.0.0.1,::1",
		"--min-host-port=1024", "--allowed-subnet-pools=10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	// The engine is named by flags; the environment carries only what the Pod learns when it
	// is placed: its node (management nodes), its IP (where in-memory API servers listen) and
	// its namespace (whose headless Service names them).
	fieldOf := func(name string) string {
		if e, ok := env[name]; ok && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
		return ""
	}
	if len(env) != 3 || fieldOf("NODE_NAME") != "spec.nodeName" || fieldOf("POD_IP") != "status.podIP" || fieldOf("POD_NAMESPACE") != "metadata.namespace" {
		t.Errorf("manager env = %+v, want NODE_NAME, POD_IP and POD_NAMESPACE from the Pod's fields only", env)
	}
	if !strings.Contains(args, "--in-memory-host=dockyard-in-memory.$(POD_NAMESPACE).svc") {
		t.Errorf("manager args %q: in-memory endpoints do not carry the headless Service's name", args)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "dockyard-system", Name: "dockyard-in-memory"}, svc); err != nil ||
		svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector["control-plane"] != "controller-manager" {
		t.Errorf("the in-memory clusters' headless Service: %+v, %v", svc.Spec, err)
	}
	socket := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "docker-socket" && v.HostPath != nil {
			socket = v.HostPath.Path
		}
	}
	if socket != "/var/run/docker.sock" {
		t.Errorf("the manager mounts the engine socket %q, want /var/run/docker.sock (DOCKYARD_ENGINE_SOCKET defaulted)", socket)
	}
	if f := env["NODE_NAME"].ValueFrom; f == nil || f.FieldRef == nil || f.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("manager env NODE_NAME = %+v, want the pod's spec.nodeName (--management-node defaults to it)", env["NODE_NAME"])
	}
	for _, crdName := range []string{"dockyardclusters", "dockyardclustertemplates", "dockyardmachines", "dockyardmachinetemplates"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crdName + ".infrastructure.cluster.x-k8s.io"}, crd); err != nil {
			t.Fatal(err)
		}
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; !ok || crd.Labels["cluster.x-k8s.io/v1beta2"] != "v1alpha1" {
			t.Errorf("CRD %s lacks the contract label cluster.x-k8s.io/v1beta2=v1alpha1 or clusterctl's label: %v", crd.Name, crd.Labels)
		}
	}

	// The manager's Secrets and ConfigMaps, bound in every namespace, changed only as
	// clusterctl move needs.
	verifyManagerRBAC(ctx, t, kubeconfig, c)

	// Cluster API with ClusterTopology (CLUSTER_TOPOLOGY in out/clusterctl.yaml).
	for _, key := range []client.ObjectKey{
		{Namespace: "capi-system", Name: "capi-controller-manager"},
		{Namespace: "capi-kubeadm-control-plane-system", Name: "capi-kubeadm-control-plane-controller-manager"},
	} {
		core := &appsv1.Deployment{}
		if err := c.Get(ctx, key, core); err != nil {
			t.Fatal(err)
		}
		if args := strings.Join(core.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "ClusterTopology=true") {
			t.Errorf("%s runs without ClusterTopology: %s", key, args)
		}
	}
	// The kubeadm providers with Ignition (EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION), for the
	// ignition flavor.
	for _, key := range []client.ObjectKey{
		{Namespace: "capi-kubeadm-bootstrap-system", Name: "capi-kubeadm-bootstrap-controller-manager"},
		{Namespace: "capi-kubeadm-control-plane-system", Name: "capi-kubeadm-control-plane-controller-manager"},
	} {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, key, d); err != nil {
			t.Fatal(err)
		}
		if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "KubeadmBootstrapFormatIgnition=true") {
			t.Errorf("%s runs without KubeadmBootstrapFormatIgnition: %s", key, args)
		}
	}
}
