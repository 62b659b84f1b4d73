//go:build release

package clusterctl

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/dockyard-dev/dockyard/cmd/tools/release"
	"github.com/dockyard-dev/dockyard/test/ci"
)

// TestUpgradeFromTheFirstRelease installs Dockyard's first release with clusterctl and moves
// it to this tree's with `clusterctl upgrade apply`, on a bare API server: both releases as
// make release writes them (DOCKYARD_RELEASES holds the two directories; make
// test-clusterctl-upgrade makes them), laid out as clusterctl's local repository beside Cluster
// API's providers. It checks what clusterctl does to the management cluster: the inventory moves
// to the new version, the manager runs the new release's image by the digest its archive
// carries, and Dockyard's CRDs gain the new release's fields while keeping their stored version.
// The workload side of an upgrade (clusters keep running, nothing rolls) is Cluster API's
// ClusterctlUpgradeSpec's.
func TestUpgradeFromTheFirstRelease(t *testing.T) {
	dir := os.Getenv("DOCKYARD_RELEASES")
	if dir == "" {
		ci.Missing(t, "DOCKYARD_RELEASES is not set: run `make test-clusterctl-upgrade`, which makes both releases")
	}
	from, to := twoReleases(t, dir)
	repo := requireRepository(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	// clusterctl's local repository: Cluster API and cert-manager from out/repository, Dockyard's
	// two releases as published.
	base := t.TempDir()
	for _, p := range []string{"cluster-api", "bootstrap-kubeadm", "control-plane-kubeadm", "cert-manager"} {
		if err := os.Symlink(filepath.Join(repo.dir, p), filepath.Join(base, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{from, to} {
		if err := release.Verify(filepath.Join(dir, v)); err != nil {
			t.Fatal(err)
		}
		// Copied: clusterctl finds a provider's versions among its directory's directories, and
		// a symbolic link is none.
		if err := os.CopyFS(filepath.Join(base, "infrastructure-dockyard", v), os.DirFS(filepath.Join(dir, v))); err != nil {
			t.Fatal(err)
		}
	}
	config := string(readFile(t, repo.config))
	config = strings.ReplaceAll(config, repo.dir+"/", base+"/")
	dockyardURL := regexp.MustCompile(`(?m)url: (\S+)/infrastructure-dockyard/[^/]+/infrastructure-components.yaml`)
	if !dockyardURL.MatchString(config) {
		t.Fatalf("%s names no Dockyard components:\n%s", repo.config, config)
	}
	config = dockyardURL.ReplaceAllString(config, "url: $1/infrastructure-dockyard/latest/infrastructure-components.yaml")
	configPath := filepath.Join(t.TempDir(), "clusterctl.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	kubeconfig, c := bareAPIServer(t)
	// cert-manager's API, as a cert-manager installed beforehand: clusterctl installs none.
	fullCertManager := filepath.Join(repo.dir, "cert-manager", repo.certManagerVersion, "cert-manager.yaml")
	for _, o := range decode(t, certManagerCRDs(t, readFile(t, fullCertManager))) {
		if err := c.Create(ctx, &o); err != nil {
			t.Fatalf("creating %s: %v", id(&o), err)
		}
	}
	waitEstablished(ctx, t, c, "certificates.cert-manager.io", "issuers.cert-manager.io")

	out, _ := repo.run(ctx, t, run{args: []string{"init", "--infrastructure", "dockyard:" + from, "--config", configPath, "--kubeconfig", kubeconfig}, env: initVariables})
	t.Log("\n" + out)
	checkInstalled(ctx, t, c, from, pinnedManager(t, filepath.Join(dir, from)))
	if hasField(ctx, t, c, "containerdConfigPatches") {
		t.Fatalf("%s's DockyardMachine CRD already has containerdConfigPatches: the upgrade would prove nothing", from)
	}

	out, _ = repo.run(ctx, t, run{args: []string{"upgrade", "plan", "--config", configPath, "--kubeconfig", kubeconfig}, env: initVariables})
	t.Log("\n" + out)
	if !regexp.MustCompile(`infrastructure-dockyard\s+dockyard-system\s+InfrastructureProvider\s+` + regexp.QuoteMeta(from) + `\s+` + regexp.QuoteMeta(to)).MatchString(out) {
		t.Errorf("clusterctl upgrade plan does not offer %s → %s:\n%s", from, to, out)
	}

	out, _ = repo.run(ctx, t, run{args: []string{"upgrade", "apply", "--infrastructure", "dockyard-system/dockyard:" + to, "--config", configPath, "--kubeconfig", kubeconfig}, env: initVariables})
	t.Log("\n" + out)
	checkInstalled(ctx, t, c, to, pinnedManager(t, filepath.Join(dir, to)))
	if !hasField(ctx, t, c, "containerdConfigPatches") {
		t.Errorf("after the upgrade to %s, the DockyardMachine CRD lacks containerdConfigPatches", to)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds, client.MatchingLabels{clusterctlv1.ClusterctlLabel: "", "cluster.x-k8s.io/provider": "infrastructure-dockyard"}); err != nil {
		t.Fatal(err)
	}
	if len(crds.Items) == 0 {
		t.Fatal("no CRD of Dockyard's after the upgrade")
	}
	for _, crd := range crds.Items {
		if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1alpha1" {
			t.Errorf("CRD %s stores %v, want only v1alpha1 (no API version changed between %s and %s)", crd.Name, got, from, to)
		}
	}
}

// twoReleases returns the versions of the two releases in dir, older first.
func twoReleases(t *testing.T, dir string) (string, string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var versions []*version.Version
	for _, e := range entries {
		if v, err := version.ParseSemantic(e.Name()); err == nil && e.IsDir() {
			versions = append(versions, v)
		}
	}
	if len(versions) != 2 {
		t.Fatalf("%s holds %d releases, want 2 (the first release and this tree's)", dir, len(versions))
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i].LessThan(versions[j]) })
	return "v" + versions[0].String(), "v" + versions[1].String()
}

// pinnedManager is the manager image a release's components run.
func pinnedManager(t *testing.T, dir string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(?:- )?image: (\S+/manager:\S+@sha256:[0-9a-f]{64})$`).FindSubmatch(readFile(t, filepath.Join(dir, release.ComponentsFile)))
	if m == nil {
		t.Fatalf("the release in %s runs no manager image pinned by digest", dir)
	}
	return string(m[1])
}

// checkInstalled checks clusterctl's inventory entry of Dockyard and the manager's image.
func checkInstalled(ctx context.Context, t *testing.T, c client.Client, wantVersion, wantImage string) {
	t.Helper()
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(clusterctlv1.GroupVersion.WithKind("Provider"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: "dockyard-system", Name: "infrastructure-dockyard"}, p); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(p.Object, "version"); v != wantVersion {
		t.Errorf("clusterctl's inventory has Dockyard %s, want %s", v, wantVersion)
	}
	deployments := &appsv1.DeploymentList{}
	if err := c.List(ctx, deployments, client.InNamespace("dockyard-system")); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 {
		t.Fatalf("%d Deployments in dockyard-system, want the manager's alone", len(deployments.Items))
	}
	if got := deployments.Items[0].Spec.Template.Spec.Containers[0].Image; got != wantImage {
		t.Errorf("Dockyard %s runs %s, want %s", wantVersion, got, wantImage)
	}
}

// hasField tells whether the DockyardMachine CRD's v1alpha1 schema has a spec field.
func hasField(ctx context.Context, t *testing.T, c client.Client, field string) bool {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "dockyardmachines.infrastructure.cluster.x-k8s.io"}, crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			_, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties[field]
			return ok
		}
	}
	t.Fatal("the DockyardMachine CRD has no v1alpha1 schema")
	return false
}
