// Package release checks Dockyard's release artifacts against the clusterctl provider contract.
package release

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/test/envtest"
)

// buildComponents renders config/default with the kustomize binary the Makefile pins.
func buildComponents(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	kustomize := os.Getenv("KUSTOMIZE")
	if kustomize == "" {
		t.Fatal("KUSTOMIZE is not set: run the tests with `make test`, which installs the pinned kustomize")
	}
	cmd := exec.Command(kustomize, "build", filepath.Join(envtest.RepoRoot(), "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build config/default: %v\n%s", err, stderr.String())
	}
	return decodeAll(t, out)
}

func decodeAll(t *testing.T, data []byte) []unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []unstructured.Unstructured
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("decoding components: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
}

func TestComponentsFollowTheClusterctlContract(t *testing.T) {
	objs := buildComponents(t)
	var namespaces []string
	var managerContainer bool
	for _, o := range objs {
		id := o.GetKind() + "/" + o.GetName()
		if o.GetLabels()["cluster.x-k8s.io/provider"] != "infrastructure-dockyard" {
			t.Errorf("%s lacks the cluster.x-k8s.io/provider: infrastructure-dockyard label", id)
		}
		if clusterScoped[o.GetKind()] {
			if o.GetNamespace() != "" {
				t.Errorf("cluster-scoped %s has a namespace", id)
			}
		} else if o.GetNamespace() != "dockyard-system" {
			t.Errorf("%s is in namespace %q, want dockyard-system", id, o.GetNamespace())
		}
		switch o.GetKind() {
		case "Namespace":
			namespaces = append(namespaces, o.GetName())
		case "CustomResourceDefinition":
			if got := o.GetLabels()["cluster.x-k8s.io/v1beta2"]; got != "v1alpha1" {
				t.Errorf("%s has contract label cluster.x-k8s.io/v1beta2=%q, want v1alpha1", id, got)
			}
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				if c.(map[string]any)["name"] == "manager" {
					managerContainer = true
				}
			}
		case "ClusterRole":
			if strings.HasSuffix(o.GetName(), "capi-aggregated-role") && o.GetLabels()["cluster.x-k8s.io/aggregate-to-manager"] != "true" {
				t.Errorf("%s is not aggregated into Cluster API's manager role", id)
			}
		}
	}
	if len(namespaces) != 1 || namespaces[0] != "dockyard-system" {
		t.Errorf("want exactly one Namespace dockyard-system, got %v", namespaces)
	}
	if !managerContainer {
		t.Error("no Deployment has a container named manager")
	}
}

func TestComponentVariablesArePrefixed(t *testing.T) {
	out, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := regexp.MustCompile(`\$\{([A-Za-z0-9_]+)`).FindAllStringSubmatch(string(out), -1)
	if len(vars) == 0 {
		t.Fatal("expected clusterctl variables in the manager Deployment")
	}
	for _, v := range vars {
		if !strings.HasPrefix(v[1], "DOCKYARD_") {
			t.Errorf("variable %s lacks the DOCKYARD_ prefix", v[1])
		}
	}
}

// TestManagerImageIsTheReleaseVersion keeps the components' manager image, the Makefile's
// VERSION (which tags the image make component-images builds) and metadata.yaml's release
// series in step, so `clusterctl upgrade` changes what runs.
func TestManagerImageIsTheReleaseVersion(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (v(\d+)\.(\d+)\.\d+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no VERSION ?= vX.Y.Z")
	}
	version := string(m[1])
	want := imagebuild.ManagerImageName(version)
	var images []string
	for _, o := range buildComponents(t) {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			images = append(images, c.(map[string]any)["image"].(string))
		}
	}
	if len(images) != 1 || images[0] != want {
		t.Errorf("the components run %v; want %s, the image make component-images builds for VERSION %s", images, want, version)
	}
	metadata, err := os.ReadFile(filepath.Join(envtest.RepoRoot(), "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	series := fmt.Sprintf("- major: %s\n  minor: %s\n", m[2], m[3])
	if !strings.Contains(string(metadata), series) {
		t.Errorf("metadata.yaml has no release series %s.%s for VERSION %s", m[2], m[3], version)
	}
}

// TestWebhookCertificateResolves: the namePrefix reaches every reference, so cert-manager finds
// the Issuer the Certificate names and the manager mounts the Secret it writes (a Certificate
// naming an unprefixed Issuer is never issued, and the manager pod never starts).
func TestWebhookCertificateResolves(t *testing.T) {
	issuers := map[string]bool{}
	var certs []unstructured.Unstructured
	secretVolumes := map[string]bool{}
	for _, o := range buildComponents(t) {
		switch o.GetKind() {
		case "Issuer":
			issuers[o.GetName()] = true
		case "Certificate":
			certs = append(certs, o)
		case "Deployment":
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range volumes {
				if name, ok, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName"); ok {
					secretVolumes[name] = true
				}
			}
		}
	}
	if len(certs) == 0 {
		t.Fatal("the components have no Certificate for the webhook server")
	}
	for _, c := range certs {
		issuer, _, _ := unstructured.NestedString(c.Object, "spec", "issuerRef", "name")
		if !issuers[issuer] {
			t.Errorf("Certificate %s names Issuer %q; the components have %v", c.GetName(), issuer, issuers)
		}
		secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		if !secretVolumes[secret] {
			t.Errorf("Certificate %s writes Secret %q, which no Deployment mounts (%v)", c.GetName(), secret, secretVolumes)
		}
	}
}
