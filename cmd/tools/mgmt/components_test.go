package mgmt

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestComponentImagesListsEveryImageOfEveryComponentFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	core := write("core.yaml", "spec:\n  containers:\n  - image: registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2\n    name: manager\n")
	// A CRD's schema has properties named image; they are not images.
	infra := write("infra.yaml", "properties:\n  image:\n    description: the node image\n---\ncontainers:\n- name: manager\n  image: \"localhost/dockyard/manager:v0.1.0\"\n")
	cm := write("cm.yaml", "image: quay.io/jetstack/cert-manager-webhook:v1.11.5\n---\n  image: 'quay.io/jetstack/cert-manager-controller:v1.11.5'\n")
	cfg := write("clusterctl.yaml", "providers:\n- {name: cluster-api, type: CoreProvider, url: "+core+"}\n- {name: dockyard, type: InfrastructureProvider, url: "+infra+"}\ncert-manager:\n  url: "+cm+"\n  version: v1.11.5\n")

	got, err := ComponentImages(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"localhost/dockyard/manager:v0.1.0",
		"quay.io/jetstack/cert-manager-controller:v1.11.5",
		"quay.io/jetstack/cert-manager-webhook:v1.11.5",
		"registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ComponentImages = %v, want %v", got, want)
	}

	if _, err := ComponentImages(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing configuration gave no error")
	}
	bad := write("bad.yaml", "providers:\n- {name: x, url: "+filepath.Join(dir, "nope.yaml")+"}\n")
	if _, err := ComponentImages(bad); err == nil {
		t.Error("a missing component file gave no error")
	}
}
