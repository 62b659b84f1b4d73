package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dockyard-dev/dockyard/pkg/policy"
	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// allowedHostPath is the one host path the test management cluster's policy lets nodes mount.
const allowedHostPath = "/srv/dockyard-allowed"

// managementWatchFilter labels the objects the test management cluster's Dockyard manager
// reconciles: none of the tests', so no cluster they create gets a container.
const managementWatchFilter = "dockyard-cli-test-reconcile"

var (
	managementOnce  sync.Once
	managementPlane *framework.ManagementPlane
	managementErr   error
)

// testManagement is a management cluster for the tests that need one: the management plane of
// test/framework (kube-apiserver, Cluster API's managers and Dockyard's, every webhook served),
// its policy allowing the mount of allowedHostPath only. Started once for the package's tests,
// stopped by TestMain. It builds Cluster API on first use (minutes, cached afterwards: make
// mgmt-binaries); -short skips the tests that need it.
func testManagement(t *testing.T) *framework.ManagementPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a management plane; skipped with -short")
	}
	managementOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		managementPlane, managementErr = framework.Start(ctx, framework.Options{
			DockyardArgs: []string{
				"--watch-filter=" + managementWatchFilter,
				policy.HostPathsFlag + "=" + allowedHostPath,
			},
		})
	})
	if managementErr != nil {
		t.Fatalf("starting the management plane: %v", managementErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			managementPlane.KeepWorkDir()
			t.Logf("the management plane's logs are kept in %s", managementPlane.LogDir())
		}
	})
	return managementPlane
}

func TestMain(m *testing.M) {
	code := m.Run()
	if managementPlane != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := managementPlane.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the management plane: %v\n", err)
		}
		cancel()
	}
	os.Exit(code)
}

// kindWorkerMounting is kind's configuration of a control plane and a worker that mounts
// hostPath.
func kindWorkerMounting(t *testing.T, hostPath string) string {
	return kindFile(t, `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
- role: worker
  extraMounts: [{hostPath: `+hostPath+`, containerPath: /data}]
`)
}

// createTestCluster runs dockyard create cluster NAME --config kindConfig -n namespace --wait 0
// against the management cluster of kubeconfig, and returns the objects it generates.
func createTestCluster(t *testing.T, kubeconfig, kindConfig string, ref clusterRef) ([]*unstructured.Unstructured, error) {
	t.Helper()
	ctx := context.Background()
	cmd := createClusterCommand(&globals{})
	if err := cmd.ParseFlags([]string{"--config", kindConfig}); err != nil {
		t.Fatal(err)
	}
	g := &globals{stateDir: t.TempDir(), managementKubeconfig: kubeconfig}
	o := &clusterOptions{namespace: ref.Namespace, kubernetesVersion: defaultKubernetesVersion, kindConfig: kindConfig}
	if err := o.loadKind(cmd); err != nil {
		t.Fatal(err)
	}
	// What the command generates, to look for each object afterwards.
	objs, err := generateCluster(ctx, g, o, ref, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return objs, createCluster(ctx, g, o, ref)
}

// The management cluster's webhooks refuse the workers' DockyardMachineTemplate (a host path its
// policy does not allow): nothing of the cluster is created, not even the namespace the command
// would have made, and the error names the object and the field.
func TestCreateClusterRefusedCreatesNothing(t *testing.T) {
	plane := testManagement(t)
	kubeconfig := plane.Kubeconfig()
	ctx := context.Background()
	ref := clusterRef{Namespace: "refused-" + rand.String(5), Name: "dev"}
	objs, err := createTestCluster(t, kubeconfig, kindWorkerMounting(t, "/etc"), ref)
	if err == nil {
		t.Fatal("a cluster mounting /etc was created; want it refused")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{"DockyardMachineTemplate dev-md-0", "spec.template.spec.extraMounts[0].hostPath", "host path /etc may not be mounted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "admission webhook") {
		t.Errorf("the error keeps the API server's wrapping:\n%v", err)
	}
	c := plane.Client()
	for _, obj := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s is left (%v)", obj.GetKind(), obj.GetName(), err)
		}
	}
	// envtest runs no namespace controller: a deleted namespace stays Terminating.
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: ref.Namespace}, ns); !apierrors.IsNotFound(err) && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s, which the command made, is left (%v)", ref.Namespace, err)
	}
}

// With every object admitted, the command creates each of them.
func TestCreateClusterAdmittedCreatesEveryObject(t *testing.T) {
	plane := testManagement(t)
	kubeconfig := plane.Kubeconfig()
	ctx := context.Background()
	ref := clusterRef{Namespace: "admitted-" + rand.String(5), Name: "dev"}
	objs, err := createTestCluster(t, kubeconfig, kindWorkerMounting(t, allowedHostPath+"/data"), ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 7 {
		t.Fatalf("the cluster has %d objects; want at least the Cluster, DockyardCluster, control plane and worker's", len(objs))
	}
	for _, obj := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		if err := plane.Client().Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// failingApply is the test management cluster's client, whose real (not dry-run) apply of
// kind/name fails as a webhook's refusal would: what changed between the dry run and the apply.
func failingApply(t *testing.T, plane *framework.ManagementPlane, kind, name string) client.Client {
	t.Helper()
	c, err := client.NewWithWatch(plane.RESTConfig(), client.Options{Scheme: dyscheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			o := obj.(interface {
				GetKind() string
				GetName() string
			})
			if len((&client.ApplyOptions{}).ApplyOptions(opts).DryRun) == 0 && o.GetKind() == kind && o.GetName() == name {
				return apierrors.NewForbidden(schema.GroupResource{Resource: kind}, name, errors.New("refused since the dry run"))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})
}

// When applying for real fails after the dry run admitted every object, what the run created is
// removed (the namespace it made too), and what was there before it is left as it was.
func TestCreateClusterFailingAfterTheDryRunRemovesWhatItCreated(t *testing.T) {
	plane := testManagement(t)
	ctx := context.Background()
	g := &globals{stateDir: t.TempDir(), managementKubeconfig: plane.Kubeconfig()}
	ref := clusterRef{Namespace: "race-" + rand.String(5), Name: "dev"}
	o := &clusterOptions{namespace: ref.Namespace, kubernetesVersion: defaultKubernetesVersion, controlPlanes: 1, workers: 1}
	objs, err := generateCluster(ctx, g, o, ref, plane.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	exist := func(obj *unstructured.Unstructured) bool {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		err := plane.Client().Get(ctx, client.ObjectKeyFromObject(obj), got)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	err = applyCluster(ctx, failingApply(t, plane, "MachineDeployment", "dev-md-0"), ref, objs, nil)
	t.Logf("failed: %v", err)
	if err == nil || !strings.Contains(err.Error(), "MachineDeployment dev-md-0") || !strings.Contains(err.Error(), "and namespace "+ref.Namespace+" this run had created are removed") {
		t.Fatalf("error %v, want one naming the MachineDeployment and saying what was removed", err)
	}
	// Cluster API's finalizers hold the Cluster and its control plane a moment.
	for _, obj := range objs {
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return !exist(obj), nil
		}); err != nil {
			t.Errorf("%s %s is left", obj.GetKind(), obj.GetName())
		}
	}
	ns := &corev1.Namespace{}
	if err := plane.Client().Get(ctx, client.ObjectKey{Name: ref.Namespace}, ns); !apierrors.IsNotFound(err) && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s, which the run made, is left (%v)", ref.Namespace, err)
	}

	// The cluster exists: a run that fails the same way created nothing, and removes nothing.
	ref.Namespace = "race-again-" + rand.String(5)
	o.namespace = ref.Namespace
	if objs, err = generateCluster(ctx, g, o, ref, plane.Kubeconfig()); err != nil {
		t.Fatal(err)
	}
	if err := applyCluster(ctx, plane.Client(), ref, objs, nil); err != nil {
		t.Fatal(err)
	}
	err = applyCluster(ctx, failingApply(t, plane, "MachineDeployment", "dev-md-0"), ref, objs, nil)
	if err == nil || !strings.Contains(err.Error(), "this run had created nothing") {
		t.Fatalf("error %v, want one saying the run created nothing", err)
	}
	for _, obj := range objs {
		if !exist(obj) {
			t.Errorf("%s %s, there before the run, was removed", obj.GetKind(), obj.GetName())
		}
	}
}

// The kubernetes flavor's Secret (the infrastructure cluster's kubeconfig) is created before
// the objects and owned by the Cluster after them: refused, the cluster leaves no Secret either;
// admitted, the Secret is there, owned by the Cluster.
func TestCreateClusterOfTheKubernetesFlavorAllOrNothing(t *testing.T) {
	plane := testManagement(t)
	ctx := context.Background()
	infra := filepath.Join(t.TempDir(), "infra.conf")
	if err := os.WriteFile(infra, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://infra:6443}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// createCluster puts the template's variables in the environment: restore them after.
	t.Setenv("DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET", "")
	create := func(ref clusterRef) error {
		g := &globals{stateDir: t.TempDir(), managementKubeconfig: plane.Kubeconfig()}
		o := &clusterOptions{namespace: ref.Namespace, kubernetesVersion: defaultKubernetesVersion, controlPlanes: 1, workers: 1, infrastructureKubeconfig: infra}
		return createCluster(ctx, g, o, ref)
	}
	secret := func(ref clusterRef) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		return s, plane.Client().Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: infrastructureSecret(ref.Name)}, s)
	}

	// Dockyard's webhook refuses a bootstrap timeout under 30 s.
	t.Setenv("DOCKYARD_BOOTSTRAP_TIMEOUT", "10s")
	refused := clusterRef{Namespace: "pods-refused-" + rand.String(5), Name: "dev"}
	err := create(refused)
	t.Logf("refused: %v", err)
	if err == nil || !strings.Contains(err.Error(), "DockyardMachineTemplate dev-control-plane") || !strings.Contains(err.Error(), "bootstrapTimeout") {
		t.Fatalf("error %v, want the DockyardMachineTemplate's bootstrapTimeout refused", err)
	}
	if _, err := secret(refused); !apierrors.IsNotFound(err) {
		t.Errorf("Secret %s of the refused cluster: %v, want none", infrastructureSecret(refused.Name), err)
	}

	t.Setenv("DOCKYARD_BOOTSTRAP_TIMEOUT", "10m")
	admitted := clusterRef{Namespace: "pods-admitted-" + rand.String(5), Name: "dev"}
	if err := create(admitted); err != nil {
		t.Fatal(err)
	}
	s, err := secret(admitted)
	if err != nil || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Cluster" || s.OwnerReferences[0].Name != admitted.Name {
		t.Errorf("Secret %s: owners %+v, %v; want the Cluster", infrastructureSecret(admitted.Name), s.OwnerReferences, err)
	}
}
