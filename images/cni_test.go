package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// renderCNI runs the substitution images/cni/install-cni.sh applies to a node image's CNI
// template, with the pod subnet in place of the script's command substitution.
func renderCNI(t *testing.T, manifest, subnet string) string {
	t.Helper()
	script, err := Files.ReadFile("cni/install-cni.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("sed -e \"(s#[^#]*#)`[^`]*`(#g)\"").FindSubmatch(script)
	if m == nil {
		t.Fatal("install-cni.sh no longer renders the template with sed -e \"s#...#`...`#g\"; update this test")
	}
	cmd := exec.Command("sed", "-e", string(m[1])+subnet+string(m[2]))
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// kindCNITemplate reads kindnetd's manifest from the kind module, as kindest/node ships it.
func kindCNITemplate(t *testing.T) string {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kind").Output()
	if err != nil {
		t.Skipf("the kind module is not in the module cache: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "pkg", "build", "nodeimage", "const_cni.go"))
	if err != nil {
		t.Fatal(err)
	}
	// const defaultCNIManifest = `...` + kindnetdImage + `...`
	m := regexp.MustCompile("(?s)defaultCNIManifest = `(.*?)`\\s*\\+\\s*kindnetdImage\\s*\\+\\s*`(.*?)`").FindSubmatch(src)
	if m == nil {
		t.Fatal("kind's const_cni.go no longer defines defaultCNIManifest as this test reads it; update the test")
	}
	return string(m[1]) + "docker.io/kindest/kindnetd:test" + string(m[2])
}

// TestCNITemplatesRenderAlike: the script renders kindest/node's kindnetd and Dockyard's flannel
// manifests alike: both are kind-style templates whose only field is the pod subnet.
func TestCNITemplatesRenderAlike(t *testing.T) {
	flannel, err := Files.ReadFile("cni/flannel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, manifest := range map[string]string{"flannel": string(flannel), "kindnetd": kindCNITemplate(t)} {
		if !strings.Contains(manifest, "would you kindly template this file") {
			t.Errorf("%s: no kind template marker", name)
		}
		out := renderCNI(t, manifest, "10.200.0.0/16")
		if strings.Contains(out, "{{") {
			t.Errorf("%s: template fields left after rendering:\n%s", name, out)
		}
		if !strings.Contains(out, "10.200.0.0/16") {
			t.Errorf("%s: the pod subnet is not in the rendered manifest", name)
		}
		for i, doc := range strings.Split(out, "\n---\n") {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				t.Errorf("%s: document %d is not YAML: %v", name, i, err)
			}
		}
	}
}
