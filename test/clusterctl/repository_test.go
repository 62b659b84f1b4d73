package clusterctl

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/cmd/tools/mgmt"
)

// commonVariables are clusterctl's own; every other variable of a flavor carries DOCKYARD_.
var commonVariables = map[string]bool{
	"CLUSTER_NAME": true, "NAMESPACE": true, "KUBERNETES_VERSION": true,
	"CONTROL_PLANE_MACHINE_COUNT": true, "WORKER_MACHINE_COUNT": true,
}

func templateFiles(t *testing.T, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(repoPath("templates", pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no templates/%s", pattern)
	}
	return files
}

// TestFlavorsFollowTheContract checks the flavors without running anything: clusterctl's
// naming, the target namespace on every object, DOCKYARD_ variables, ClusterClasses without
// variables or namespaces, and a ClusterClass file for every class a flavor uses.
func TestFlavorsFollowTheContract(t *testing.T) {
	proc := yamlprocessor.NewSimpleProcessor()
	for _, file := range templateFiles(t, "cluster-template*.yaml") {
		raw := readFile(t, file)
		vars, err := proc.GetVariables(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, v := range vars {
			if !commonVariables[v] && !strings.HasPrefix(v, "DOCKYARD_") {
				t.Errorf("%s: variable %s is neither clusterctl's nor DOCKYARD_-prefixed", filepath.Base(file), v)
			}
		}
		for _, o := range decode(t, raw) {
			if o.GetNamespace() != "${NAMESPACE}" {
				t.Errorf("%s: %s is not in ${NAMESPACE}", filepath.Base(file), id(&o))
			}
			if !strings.HasPrefix(o.GetName(), "${CLUSTER_NAME}") {
				t.Errorf("%s: %s is not named after ${CLUSTER_NAME}", filepath.Base(file), id(&o))
			}
			if o.GetKind() == "Cluster" {
				if class, ok := o.Object["spec"].(map[string]any)["topology"].(map[string]any); ok {
					name, _ := class["classRef"].(map[string]any)["name"].(string)
					if _, err := os.Stat(repoPath("templates", "clusterclass-"+name+".yaml")); err != nil {
						t.Errorf("%s uses ClusterClass %q but templates/clusterclass-%s.yaml is missing", filepath.Base(file), name, name)
					}
				}
			}
		}
	}
	for _, file := range templateFiles(t, "clusterclass-*.yaml") {
		raw := readFile(t, file)
		if m := regexp.MustCompile(`\$[{A-Za-z_(]`).Find(raw); m != nil {
			t.Errorf("%s contains %q: clusterctl would substitute it", filepath.Base(file), m)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "clusterclass-"), ".yaml")
		classes := 0
		for _, o := range decode(t, raw) {
			if o.GetNamespace() != "" {
				t.Errorf("%s: %s sets a namespace; clusterctl sets the target namespace", filepath.Base(file), id(&o))
			}
			if o.GetKind() == "ClusterClass" {
				classes++
				if o.GetName() != name {
					t.Errorf("%s holds ClusterClass %q; clusterctl looks it up by the file name", filepath.Base(file), o.GetName())
				}
			} else if !strings.HasPrefix(o.GetName(), name+"-") {
				t.Errorf("%s: %s is not prefixed with the ClusterClass's name", filepath.Base(file), id(&o))
			}
		}
		if classes != 1 {
			t.Errorf("%s holds %d ClusterClasses, want 1", filepath.Base(file), classes)
		}
	}
}

// TestVariablesAreDocumented checks that docs/templates.md has a row for every variable of the
// flavors and of the components (config/manager/manager.yaml).
func TestVariablesAreDocumented(t *testing.T) {
	doc := string(readFile(t, repoPath("docs", "templates.md")))
	proc := yamlprocessor.NewSimpleProcessor()
	files := append(templateFiles(t, "cluster-template*.yaml"), repoPath("config", "manager", "manager.yaml"))
	seen := map[string]bool{}
	for _, file := range files {
		vars, err := proc.GetVariables(readFile(t, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vars {
			if seen[v] {
				continue
			}
			seen[v] = true
			if !regexp.MustCompile("(?m)^\\| `" + v + "` \\|").MatchString(doc) {
				t.Errorf("docs/templates.md has no row for %s (used in %s)", v, filepath.Base(file))
			}
		}
		// And the defaults the rows give are the files' own.
		for _, m := range regexp.MustCompile(`\$\{(DOCKYARD_\w+):=(.*?)\}`).FindAllStringSubmatch(string(readFile(t, file)), -1) {
			name, def := m[1], m[2]
			if strings.Contains(def, "${") {
				def += "}"
			}
			if !regexp.MustCompile("(?m)^\\| `" + name + "` \\| `" + regexp.QuoteMeta(def) + "`").MatchString(doc) {
				t.Errorf("docs/templates.md does not give %s the default `%s` of %s", name, def, filepath.Base(file))
			}
		}
	}
}

// TestMetadata checks that every release series of Dockyard implements the v1beta2 contract,
// the one clusterctl v1.14 and Cluster API v1.14 speak.
func TestMetadata(t *testing.T) {
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(readFile(t, repoPath("metadata.yaml")), md); err != nil {
		t.Fatal(err)
	}
	if md.APIVersion != clusterctlv1.GroupVersion.String() || md.Kind != "Metadata" {
		t.Errorf("metadata.yaml is %s %s, want %s Metadata", md.APIVersion, md.Kind, clusterctlv1.GroupVersion)
	}
	if len(md.ReleaseSeries) == 0 {
		t.Fatal("metadata.yaml has no release series")
	}
	for _, s := range md.ReleaseSeries {
		if s.Contract != "v1beta2" {
			t.Errorf("release series %d.%d implements contract %s, want v1beta2", s.Major, s.Minor, s.Contract)
		}
	}
}

// TestRepositoryLayout checks what `make release-manifests` wrote: a local repository
// clusterctl can read (<provider label>/<version>/<file>), each provider with its metadata
// mapping its version to v1beta2, Dockyard's flavors identical to templates/, Cluster API's
// released images, and a configuration naming all of it.
func TestRepositoryLayout(t *testing.T) {
	repo := requireRepository(t)
	// clusterctl resolves a provider's "latest" (Cluster API's e2e framework writes every url so)
	// to the newest release of the newest series implementing the contract: a series listed
	// before the repository holds a release of it leaves clusterctl init with none.
	md := &clusterctlv1.Metadata{}
	if err := yaml.UnmarshalStrict(readFile(t, repoPath("metadata.yaml")), md); err != nil {
		t.Fatal(err)
	}
	v := version.MustParseSemantic(repo.dockyardVersion)
	for _, s := range md.ReleaseSeries {
		if s.Major > int32(v.Major()) || (s.Major == int32(v.Major()) && s.Minor > int32(v.Minor())) {
			t.Errorf("metadata.yaml lists release series %d.%d, newer than the repository's %s: clusterctl's latest finds no release of it (add a series when the Makefile's VERSION moves to it)",
				s.Major, s.Minor, repo.dockyardVersion)
		}
	}
	dockyard := filepath.Join(repo.dir, "infrastructure-dockyard", repo.dockyardVersion)
	want := []string{"infrastructure-components.yaml", "metadata.yaml"}
	for _, pattern := range []string{"cluster-template*.yaml", "clusterclass-*.yaml"} {
		for _, f := range templateFiles(t, pattern) {
			want = append(want, filepath.Base(f))
			if !bytes.Equal(readFile(t, f), readFile(t, filepath.Join(dockyard, filepath.Base(f)))) {
				t.Errorf("the repository's %s differs from templates/: run make release-manifests", filepath.Base(f))
			}
		}
	}
	for _, f := range want {
		if _, err := os.Stat(filepath.Join(dockyard, f)); err != nil {
			t.Errorf("the repository lacks %s: %v", f, err)
		}
	}

	providers := map[string]string{
		"infrastructure-dockyard/" + repo.dockyardVersion: "infrastructure-components.yaml",
		"cluster-api/" + repo.capiVersion:                 "core-components.yaml",
		"bootstrap-kubeadm/" + repo.capiVersion:           "bootstrap-components.yaml",
		"control-plane-kubeadm/" + repo.capiVersion:       "control-plane-components.yaml",
	}
	config := string(readFile(t, repo.config))
	for dir, components := range providers {
		md := &clusterctlv1.Metadata{}
		if err := yaml.Unmarshal(readFile(t, filepath.Join(repo.dir, dir, "metadata.yaml")), md); err != nil {
			t.Fatal(err)
		}
		v, err := version.ParseSemantic(filepath.Base(dir))
		if err != nil {
			t.Fatalf("version of %s: %v", dir, err)
		}
		if s := md.GetReleaseSeriesForVersion(v); s == nil || s.Contract != "v1beta2" {
			t.Errorf("%s/metadata.yaml maps %d.%d to %+v, want contract v1beta2", dir, v.Major(), v.Minor(), s)
		}
		path := filepath.Join(repo.dir, dir, components)
		data := readFile(t, path)
		if !strings.Contains(config, "url: "+path+"}") {
			t.Errorf("%s does not point at %s", repo.config, path)
		}
		for _, o := range decode(t, data) {
			if o.GetLabels()["cluster.x-k8s.io/provider"] != strings.Split(dir, "/")[0] {
				t.Errorf("%s: %s lacks the provider label", dir, id(&o))
			}
		}
		if !strings.HasPrefix(dir, "infrastructure-dockyard") {
			image := regexp.MustCompile(`image: (\S+)`).FindStringSubmatch(string(data))
			if image == nil || !strings.HasPrefix(image[1], "registry.k8s.io/cluster-api/") || !strings.HasSuffix(image[1], ":"+repo.capiVersion) {
				t.Errorf("%s runs image %v, want Cluster API's released image", dir, image)
			}
		}
	}
	// cert-manager's manifest, rendered from its chart like the released one.
	kinds := map[string]int{}
	var images []string
	for _, o := range decode(t, readFile(t, filepath.Join(repo.dir, "cert-manager", repo.certManagerVersion, "cert-manager.yaml"))) {
		kinds[o.GetKind()]++
		if o.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				images = append(images, c.(map[string]any)["image"].(string))
			}
		}
		if ns := o.GetNamespace(); ns != "" && ns != "cert-manager" && ns != "kube-system" {
			t.Errorf("cert-manager's %s is in namespace %s", id(&o), ns)
		}
	}
	if kinds["Namespace"] != 1 || kinds["CustomResourceDefinition"] != 6 || kinds["Deployment"] != 3 ||
		kinds["ValidatingWebhookConfiguration"] != 1 || kinds["MutatingWebhookConfiguration"] != 1 {
		t.Errorf("cert-manager's manifest has %v", kinds)
	}
	for _, image := range images {
		if !strings.HasPrefix(image, "quay.io/jetstack/cert-manager-") || !strings.HasSuffix(image, ":"+repo.certManagerVersion) {
			t.Errorf("cert-manager runs %s, want quay.io/jetstack/cert-manager-*:%s", image, repo.certManagerVersion)
		}
	}

	for _, want := range []string{"CLUSTER_TOPOLOGY: \"true\"", "EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION: \"true\"", "CLUSTERCTL_DISABLE_VERSIONCHECK: \"true\"", "cert-manager:\n  url: " + filepath.Join(repo.dir, "cert-manager", repo.certManagerVersion, "cert-manager.yaml")} {
		if !strings.Contains(config, want) {
			t.Errorf("%s lacks %q", repo.config, want)
		}
	}
}

// TestRepositoryRunsOnlyImagesBuiltHere: every image the repository's components run, with
// cert-manager's, is one `make component-images` builds under its release name, so clusterctl
// init pulls nothing on a machine without a registry.
func TestRepositoryRunsOnlyImagesBuiltHere(t *testing.T) {
	repo := requireRepository(t)
	built := imagebuild.ReleaseImageNames(imagebuild.Release{
		Dockyard: repo.dockyardVersion, ClusterAPI: repo.capiVersion, CertManager: repo.certManagerVersion,
	})
	got, err := mgmt.ComponentImages(repo.config)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, slices.Sorted(slices.Values(built))) {
		t.Errorf("the repository's components run\n  %v\nmake component-images builds\n  %v", got, built)
	}
	for _, f := range []string{
		filepath.Join(repo.dir, "cert-manager", repo.certManagerVersion, "cert-manager.yaml"),
		filepath.Join(repo.dir, "infrastructure-dockyard", repo.dockyardVersion, "infrastructure-components.yaml"),
	} {
		for _, m := range regexp.MustCompile(`imagePullPolicy: (\w+)`).FindAllSubmatch(readFile(t, f), -1) {
			if string(m[1]) != "IfNotPresent" {
				t.Errorf("%s: imagePullPolicy %s, want IfNotPresent", f, m[1])
			}
		}
	}
}

// TestRepositoryComponentsSurviveALoadedHost: the management cluster Dockyard makes shares two
// cores with every workload node, and the host's load average reaches tens. Kubernetes' probe
// defaults (1 s, three failures) and client-go's leases (15 s, renewed within 10 s) then restart
// healthy controllers over and over, which was seen with five clusters on a 2-core host. Every
// Deployment the repository installs, cert-manager's included, waits 5 s for a probe, restarts
// only after a minute of failures, and keeps a leader through 40 s of slow renewals.
func TestRepositoryComponentsSurviveALoadedHost(t *testing.T) {
	repo := requireRepository(t)
	files := []string{filepath.Join(repo.dir, "cert-manager", repo.certManagerVersion, "cert-manager.yaml"),
		filepath.Join(repo.dir, "infrastructure-dockyard", repo.dockyardVersion, "infrastructure-components.yaml")}
	for _, p := range []string{"cluster-api/%s/core-components.yaml", "bootstrap-kubeadm/%s/bootstrap-components.yaml",
		"control-plane-kubeadm/%s/control-plane-components.yaml"} {
		files = append(files, filepath.Join(repo.dir, fmt.Sprintf(p, repo.capiVersion)))
	}
	deployments := 0
	for _, f := range files {
		for _, o := range decode(t, readFile(t, f)) {
			if o.GetKind() != "Deployment" {
				continue
			}
			deployments++
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatalf("%s: %v", id(&o), err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				where := fmt.Sprintf("%s (%s) container %s", id(&o), filepath.Base(f), c.Name)
				for _, problem := range loadedHostProblems(c) {
					t.Errorf("%s: %s", where, problem)
				}
			}
		}
	}
	if deployments < 7 {
		t.Errorf("found %d Deployments in the repository, want cert-manager's three and the four providers'", deployments)
	}
}

// loadedHostProblems says what of a container's probes and leader election would restart it
// on a loaded host.
func loadedHostProblems(c corev1.Container) []string {
	var problems []string
	probe := func(kind string, p *corev1.Probe, minFailing time.Duration) {
		if p == nil {
			return
		}
		if p.TimeoutSeconds < 5 {
			problems = append(problems, fmt.Sprintf("%s probe times out after %d s, want at least 5 s", kind, max(p.TimeoutSeconds, 1)))
		}
		period, failures := cmp.Or(p.PeriodSeconds, 10), cmp.Or(p.FailureThreshold, 3)
		if failing := time.Duration(period*failures) * time.Second; failing < minFailing {
			problems = append(problems, fmt.Sprintf("%s probe gives up after %s of failures, want at least %s", kind, failing, minFailing))
		}
	}
	probe("liveness", c.LivenessProbe, time.Minute)
	probe("readiness", c.ReadinessProbe, 0)

	args := map[string]string{}
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	if v, ok := args["--leader-elect"]; ok && v != "false" {
		for flag, want := range map[string]time.Duration{
			"--leader-elect-lease-duration": time.Minute, "--leader-elect-renew-deadline": 40 * time.Second,
		} {
			got, err := time.ParseDuration(args[flag])
			if err != nil || got < want {
				problems = append(problems, fmt.Sprintf("%s=%q, want at least %s (client-go's default is too short for a loaded host)", flag, args[flag], want))
			}
		}
	}
	return problems
}
