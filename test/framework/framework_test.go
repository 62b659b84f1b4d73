package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/dockerengine"
	"github.com/dockyard-dev/dockyard/test/ci"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// The namespace and cluster of the lifecycle test are fixed, so leftovers of a crashed run are
// found by their label and removed before the next run.
const (
	testNamespace = "framework-e2e"
	testCluster   = "fw-lb"
)

// TestManagementPlane starts the whole plane and drives it as an end-to-end suite would. It
// builds Cluster API on first use (minutes, cached afterwards); -short skips it.
func TestManagementPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a full management plane; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	lbImage := loadBalancerImage(ctx)
	start := time.Now()
	plane, err := Start(ctx, Options{
		Log: t.Output(),
		DockyardArgs: []string{
			"--load-balancer-image=" + lbImage,
			"--node-image-repository=localhost/dockyard/node",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plane started in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			var dump strings.Builder
			plane.Dump(context.Background(), &dump)
			t.Log("\n" + dump.String())
			plane.KeepWorkDir()
		}
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		begin := time.Now()
		if err := plane.Stop(stopCtx); err != nil {
			t.Error(err)
		}
		t.Logf("plane stopped in %s", time.Since(begin).Round(time.Millisecond))
	})

	t.Run("healthy", func(t *testing.T) {
		if err := plane.CheckHealth(ctx); err != nil {
			t.Fatal(err)
		}
		var rss []string
		for _, proc := range plane.procs {
			rss = append(rss, proc.name+"="+formatMiB(proc.rss()))
		}
		t.Logf("memory (RSS): %s", strings.Join(rss, " "))
	})
	t.Run("crds-served", func(t *testing.T) { testCRDsServed(ctx, t, plane) })
	t.Run("conversion", func(t *testing.T) { testConversion(ctx, t, plane) })
	t.Run("clusterctl-inventory", func(t *testing.T) { testClusterctlInventory(ctx, t, plane) })
	t.Run("cluster-lifecycle", func(t *testing.T) { testClusterLifecycle(ctx, t, plane, lbImage) })
}

// loadBalancerImage picks the haproxy image: DOCKYARD_TEST_LB_IMAGE, else the newest one `make
// lb-image` built (it tags it latest) when the engine has it.
func loadBalancerImage(ctx context.Context) string {
	if os.Getenv("DOCKYARD_TEST_LB_IMAGE") != "" {
		return dockerenv.LoadBalancerImage()
	}
	candidates := []string{dockerenv.LoadBalancerImage(), "localhost/dockyard/haproxy:latest"}
	rt, err := dockerengine.New()
	if err != nil {
		return candidates[0]
	}
	defer rt.Close()
	for _, ref := range candidates {
		if ok, err := rt.ImageExists(ctx, ref); err == nil && ok {
			return ref
		}
	}
	return candidates[0]
}

// TestDefaultClusterAPIVersion keeps the plane's Cluster API release the one go.mod requires:
// the CRDs and kinds the suites compile against must match the controllers they run.
func TestDefaultClusterAPIVersion(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/cluster-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/cluster-api: %v", err)
	}
	if v := strings.TrimSpace(string(out)); v != DefaultClusterAPIVersion {
		t.Fatalf("go.mod requires sigs.k8s.io/cluster-api %s but DefaultClusterAPIVersion is %s", v, DefaultClusterAPIVersion)
	}
}

// testCRDsServed checks that every provider's CRDs are established and that every served version
// is discoverable and listable (listing a multi-version CRD at a non-storage version goes through
// its conversion webhook once objects exist; see testConversion).
func testCRDsServed(ctx context.Context, t *testing.T, plane *ManagementPlane) {
	c := plane.Client()
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		t.Fatal(err)
	}
	byProvider := map[string]int{}
	dc, err := discovery.NewDiscoveryClientForConfig(plane.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		provider := crd.Labels["cluster.x-k8s.io/provider"]
		if provider == "" {
			continue
		}
		byProvider[provider]++
		if crd.Spec.Group != "infrastructure.cluster.x-k8s.io" && len(crd.Spec.Versions) > 1 &&
			(crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter) {
			t.Errorf("CRD %s serves %d versions without a conversion webhook", crd.Name, len(crd.Spec.Versions))
		}
		if provider != "cluster-api" && crd.Labels["cluster.x-k8s.io/v1beta2"] == "" {
			t.Errorf("CRD %s has no cluster.x-k8s.io/v1beta2 contract label: core would not find its versions", crd.Name)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			resources, err := dc.ServerResourcesForGroupVersion(gv.String())
			if err != nil {
				t.Errorf("discovery of %s: %v", gv, err)
				continue
			}
			found := false
			for _, r := range resources.APIResources {
				found = found || r.Name == crd.Spec.Names.Plural
			}
			if !found {
				t.Errorf("%s is not served at %s", crd.Spec.Names.Plural, gv)
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gv.WithKind(crd.Spec.Names.ListKind))
			if err := c.List(ctx, list); err != nil {
				t.Errorf("listing %s at %s: %v", crd.Spec.Names.Plural, gv, err)
			}
		}
	}
	want := map[string]int{"cluster-api": 13, "bootstrap-kubeadm": 2, "control-plane-kubeadm": 2, "infrastructure-dockyard": 6}
	for provider, n := range want {
		if byProvider[provider] != n {
			t.Errorf("provider %s has %d CRDs, want %d", provider, byProvider[provider], n)
		}
	}
}

// testConversion writes one object of each Cluster API provider through its old v1beta1 API and
// reads it back as v1beta2: each write and read goes through that provider's conversion webhook,
// and the write through its defaulting and validating webhooks too.
func testConversion(ctx context.Context, t *testing.T, plane *ManagementPlane) {
	c := plane.Client()
	ns := createNamespace(ctx, t, c, "conversion")

	// Core: a paused Cluster (no controller acts on it). v1beta1 references carry an apiVersion,
	// v1beta2 ones an apiGroup.
	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": "converted", "namespace": ns},
		"spec": map[string]any{
			"paused":         true,
			"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []any{"192.168.0.0/16"}}},
			"infrastructureRef": map[string]any{
				"apiVersion": infrav1.GroupVersion.String(), "kind": "DockyardCluster", "name": "converted",
			},
		},
	}}
	if err := c.Create(ctx, old); err != nil {
		t.Fatalf("creating a v1beta1 Cluster: %v", err)
	}
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "converted"}, cluster); err != nil {
		t.Fatalf("reading the Cluster as v1beta2: %v", err)
	}
	if !ptr.Deref(cluster.Spec.Paused, false) || strings.Join(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks, ",") != "192.168.0.0/16" ||
		cluster.Spec.InfrastructureRef.APIGroup != infrav1.GroupVersion.Group || cluster.Spec.InfrastructureRef.Kind != "DockyardCluster" {
		t.Errorf("v1beta2 Cluster spec = %+v, want paused, pods 192.168.0.0/16, infrastructureRef to group %s", cluster.Spec, infrav1.GroupVersion.Group)
	}
	back := &unstructured.Unstructured{}
	back.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta1", Kind: "Cluster"})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "converted"}, back); err != nil {
		t.Fatalf("reading the Cluster as v1beta1: %v", err)
	}
	if apiVersion, _, _ := unstructured.NestedString(back.Object, "spec", "infrastructureRef", "apiVersion"); apiVersion != infrav1.GroupVersion.String() {
		t.Errorf("v1beta1 Cluster read back has infrastructureRef.apiVersion %q, want %s", apiVersion, infrav1.GroupVersion)
	}

	// Kubeadm bootstrap: kubeletExtraArgs is a map in v1beta1 and a list in v1beta2.
	kct := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
		"kind":       "KubeadmConfigTemplate",
		"metadata":   map[string]any{"name": "converted", "namespace": ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"joinConfiguration": map[string]any{"nodeRegistration": map[string]any{
				"kubeletExtraArgs": map[string]any{"node-labels": "converted=yes"},
			}},
		}}},
	}}
	if err := c.Create(ctx, kct); err != nil {
		t.Fatalf("creating a v1beta1 KubeadmConfigTemplate: %v", err)
	}
	template := &bootstrapv1.KubeadmConfigTemplate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "converted"}, template); err != nil {
		t.Fatalf("reading the KubeadmConfigTemplate as v1beta2: %v", err)
	}
	args := template.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs
	if len(args) != 1 || args[0].Name != "node-labels" || ptr.Deref(args[0].Value, "") != "converted=yes" {
		t.Errorf("v1beta2 kubeletExtraArgs = %+v, want [{node-labels converted=yes}]", args)
	}

	// Kubeadm control plane: same change for the API server's extraArgs.
	kcpt := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
		"kind":       "KubeadmControlPlaneTemplate",
		"metadata":   map[string]any{"name": "converted", "namespace": ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"kubeadmConfigSpec": map[string]any{"clusterConfiguration": map[string]any{
				"apiServer": map[string]any{"extraArgs": map[string]any{"v": "2"}},
			}},
		}}},
	}}
	if err := c.Create(ctx, kcpt); err != nil {
		t.Fatalf("creating a v1beta1 KubeadmControlPlaneTemplate: %v", err)
	}
	cpTemplate := &controlplanev1.KubeadmControlPlaneTemplate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "converted"}, cpTemplate); err != nil {
		t.Fatalf("reading the KubeadmControlPlaneTemplate as v1beta2: %v", err)
	}
	extra := cpTemplate.Spec.Template.Spec.KubeadmConfigSpec.ClusterConfiguration.APIServer.ExtraArgs
	if len(extra) != 1 || extra[0].Name != "v" || ptr.Deref(extra[0].Value, "") != "2" {
		t.Errorf("v1beta2 apiServer extraArgs = %+v, want [{v 2}]", extra)
	}
}

// testClusterLifecycle creates a Cluster with a DockyardCluster and follows it: Dockyard creates
// the load balancer container, core marks the infrastructure provisioned and writes the
// kubeconfig Secret; Dockyard's manager is restarted; deleting the Cluster removes the
// DockyardCluster (and with it the container and network) and the garbage collector removes
// the Secrets the Cluster owned.
func testClusterLifecycle(ctx context.Context, t *testing.T, plane *ManagementPlane, lbImage string) {
	rt := dockerenv.Runtime(t)
	if ok, err := rt.ImageExists(ctx, lbImage); err != nil {
		t.Fatal(err)
	} else if !ok {
		ci.Missing(t, "load balancer image "+lbImage+" is missing: build it with `make lb-image` (or set DOCKYARD_TEST_LB_IMAGE)")
	}
	labels := docker.ClusterKey{Namespace: testNamespace, Name: testCluster}.ClusterLabels()
	removeLeftovers(ctx, t, rt, labels)
	t.Cleanup(func() { removeLeftovers(context.Background(), t, rt, labels) })

	c := plane.Client()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		t.Fatal(err)
	}
	// A CA Secret, owned by the Cluster: core writes the kubeconfig Secret from it (there is no
	// control plane provider in this test), and the garbage collector must remove both.
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNamespace},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: testCluster,
		}},
	}
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNamespace}}
	begin := time.Now()
	if err := c.Create(ctx, dc); err != nil {
		t.Fatalf("creating the DockyardCluster: %v", err)
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatalf("creating the Cluster: %v", err)
	}
	caSecret, err := clusterCASecret(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, caSecret); err != nil {
		t.Fatal(err)
	}

	// Core sets infrastructureProvisioned once Dockyard reports the DockyardCluster provisioned,
	// and copies the endpoint.
	poll(ctx, t, 3*time.Minute, "Cluster infrastructure provisioned", func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return false, err
		}
		return ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) && cluster.Spec.ControlPlaneEndpoint.IsValid(), nil
	})
	t.Logf("infrastructure provisioned after %s; endpoint %s:%d", time.Since(begin).Round(time.Millisecond),
		cluster.Spec.ControlPlaneEndpoint.Host, cluster.Spec.ControlPlaneEndpoint.Port)
	containers, err := rt.ListContainers(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(containers) != 1 || !containers[0].Running {
		t.Fatalf("want one running load balancer container labelled %v, got %+v", labels, containers)
	}
	kubeconfig := &corev1.Secret{}
	poll(ctx, t, time.Minute, "kubeconfig Secret written by core", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testCluster + "-kubeconfig"}, kubeconfig)
		return err == nil, client.IgnoreNotFound(err)
	})

	// Restarting Dockyard's manager mid-life: the same ports come back and it keeps working.
	oldPID := plane.PID(DockyardManager)
	restart := time.Now()
	if err := plane.RestartDockyard(ctx); err != nil {
		t.Fatal(err)
	}
	if pid := plane.PID(DockyardManager); pid == 0 || pid == oldPID {
		t.Fatalf("Dockyard's manager pid %d after restart, was %d", pid, oldPID)
	}
	t.Logf("Dockyard's manager restarted in %s", time.Since(restart).Round(time.Millisecond))
	if err := plane.CheckHealth(ctx); err != nil {
		t.Fatal(err)
	}

	// A crash: SIGKILL, then a start. Deletion below is handled by this third run.
	if err := plane.KillDockyard(); err != nil {
		t.Fatal(err)
	}
	if plane.PID(DockyardManager) != 0 {
		t.Fatal("Dockyard's manager still has a pid after KillDockyard")
	}
	if err := plane.StartDockyard(ctx); err != nil {
		t.Fatal(err)
	}

	deleting := time.Now()
	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, 3*time.Minute, "Cluster and DockyardCluster deleted", func() (bool, error) {
		for _, obj := range []client.Object{&clusterv1.Cluster{}, &infrav1.DockyardCluster{}} {
			err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: testCluster}, obj)
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("Cluster deleted after %s", time.Since(deleting).Round(time.Millisecond))
	poll(ctx, t, time.Minute, "owned Secrets garbage collected", func() (bool, error) {
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, client.InNamespace(testNamespace)); err != nil {
			return false, err
		}
		return len(secrets.Items) == 0, nil
	})
	t.Logf("Secrets collected after %s", time.Since(deleting).Round(time.Millisecond))
	containers, err = rt.ListContainers(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	networks, err := rt.ListNetworks(ctx, labels)
	if err != nil {
		t.Fatal(err)
	}
	if len(containers) != 0 || len(networks) != 0 {
		t.Errorf("left behind: %d containers, %d networks labelled %v", len(containers), len(networks), labels)
	}
}

// removeLeftovers removes the containers, volumes and networks carrying the labels.
func removeLeftovers(ctx context.Context, t *testing.T, rt container.Runtime, labels map[string]string) {
	t.Helper()
	containers, err := rt.ListContainers(ctx, labels)
	if err != nil {
		t.Errorf("listing leftover containers: %v", err)
	}
	for _, ctr := range containers {
		t.Logf("removing leftover container %s", ctr.Name)
		if err := rt.RemoveContainer(ctx, ctr.Name); err != nil {
			t.Errorf("removing leftover container %s: %v", ctr.Name, err)
		}
	}
	volumes, err := rt.ListVolumes(ctx, labels)
	if err != nil {
		t.Errorf("listing leftover volumes: %v", err)
	}
	for _, v := range volumes {
		if err := rt.RemoveVolume(ctx, v.Name); err != nil {
			t.Errorf("removing leftover volume %s: %v", v.Name, err)
		}
	}
	networks, err := rt.ListNetworks(ctx, labels)
	if err != nil {
		t.Errorf("listing leftover networks: %v", err)
	}
	for _, n := range networks {
		t.Logf("removing leftover network %s", n.Name)
		if err := rt.RemoveNetwork(ctx, n.Name); err != nil {
			t.Errorf("removing leftover network %s: %v", n.Name, err)
		}
	}
}

// clusterCASecret is the "<cluster>-ca" Secret Cluster API reads the cluster CA from, owned by
// the Cluster.
func clusterCASecret(cluster *clusterv1.Cluster) (*corev1.Secret, error) {
	ca, err := newCertificateAuthority()
	if err != nil {
		return nil, err
	}
	keyPEM, err := ca.keyPEM()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster.Name + "-ca", Namespace: cluster.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
			}},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"tls.crt": ca.certPEM, "tls.key": keyPEM},
	}, nil
}

func createNamespace(ctx context.Context, t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// poll calls check every half second until it returns true, fails the test on an error or when
// the timeout passes.
func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, check func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, err := check()
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

func formatMiB(b int64) string { return fmt.Sprintf("%dMiB", b>>20) }

// testClusterctlInventory registers the plane's providers in clusterctl's inventory, twice (the
// second time changes nothing), and checks what clusterctl reads: one Provider per provider at
// the plane's versions and the clusterctl label on every provider CRD (move discovers kinds
// through it).
func testClusterctlInventory(ctx context.Context, t *testing.T, plane *ManagementPlane) {
	for range 2 {
		if err := plane.InstallClusterctlInventory(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c := plane.Client()
	providers := &unstructured.UnstructuredList{}
	providers.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "ProviderList"})
	if err := c.List(ctx, providers); err != nil {
		t.Fatal(err)
	}
	want, err := plane.InventoryProviders()
	if err != nil {
		t.Fatal(err)
	}
	if len(providers.Items) != len(want) {
		t.Fatalf("%d Providers, want %d", len(providers.Items), len(want))
	}
	for _, w := range want {
		p := &unstructured.Unstructured{}
		p.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "Provider"})
		if err := c.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: w.Label}, p); err != nil {
			t.Errorf("inventory entry of %s: %v", w.Label, err)
			continue
		}
		version, _, _ := unstructured.NestedString(p.Object, "version")
		typ, _, _ := unstructured.NestedString(p.Object, "type")
		if version != w.Version || typ != string(w.Type) {
			t.Errorf("Provider %s: %s %s, want %s %s", w.Label, typ, version, w.Type, w.Version)
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.HasLabels{"cluster.x-k8s.io/provider"}); err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds.Items {
		if _, ok := crd.Labels["clusterctl.cluster.x-k8s.io"]; !ok {
			t.Errorf("CRD %s lacks the clusterctl.cluster.x-k8s.io label", crd.Name)
		}
	}
}
