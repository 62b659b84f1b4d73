package repository

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"sigs.k8s.io/yaml"
)

func tree() fstest.MapFS {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	return fstest.MapFS{
		"cluster-api/v1.14.2/core-components.yaml":                      file("core"),
		"cluster-api/v1.14.2/metadata.yaml":                             file("metadata"),
		"bootstrap-kubeadm/v1.14.2/bootstrap-components.yaml":           file("bootstrap"),
		"control-plane-kubeadm/v1.14.2/control-plane-components.yaml":   file("control plane"),
		"infrastructure-dockyard/v0.2.0/infrastructure-components.yaml": file("dockyard"),
		"cert-manager/v1.11.5/cert-manager.yaml":                        file("cert-manager"),
	}
}

func flavors() fstest.MapFS {
	return fstest.MapFS{
		"cluster-template.yaml":              {Data: []byte("template")},
		"clusterclass-quick-start.yaml":      {Data: []byte("class")},
		"README.md":                          {Data: []byte("not a flavor")},
		"src/cluster-template-fragment.yaml": {Data: []byte("not a flavor either")},
	}
}

func TestContents(t *testing.T) {
	providers, certManager, err := New(tree(), flavors()).Contents()
	if err != nil {
		t.Fatal(err)
	}
	if certManager != "v1.11.5" {
		t.Errorf("cert-manager %q, want v1.11.5", certManager)
	}
	want := []Provider{
		{"kubeadm", "BootstrapProvider", "v1.14.2", "bootstrap-kubeadm/v1.14.2/bootstrap-components.yaml"},
		{"cluster-api", "CoreProvider", "v1.14.2", "cluster-api/v1.14.2/core-components.yaml"},
		{"kubeadm", "ControlPlaneProvider", "v1.14.2", "control-plane-kubeadm/v1.14.2/control-plane-components.yaml"},
		{"dockyard", "InfrastructureProvider", "v0.2.0", "infrastructure-dockyard/v0.2.0/infrastructure-components.yaml"},
	}
	if len(providers) != len(want) {
		t.Fatalf("providers %+v, want %+v", providers, want)
	}
	for i := range want {
		if providers[i] != want[i] {
			t.Errorf("provider %d: %+v, want %+v", i, providers[i], want[i])
		}
	}
	if v, err := New(tree(), flavors()).Version(); err != nil || v != "v0.2.0" {
		t.Errorf("Version() = %q, %v; want v0.2.0", v, err)
	}
}

func TestContentsRefusesWhatClusterctlCannotRead(t *testing.T) {
	for name, change := range map[string]func(fstest.MapFS){
		"two versions of a provider": func(m fstest.MapFS) {
			m["infrastructure-dockyard/v0.1.0/infrastructure-components.yaml"] = &fstest.MapFile{}
		},
		"no components file": func(m fstest.MapFS) {
			delete(m, "bootstrap-kubeadm/v1.14.2/bootstrap-components.yaml")
			m["bootstrap-kubeadm/v1.14.2/metadata.yaml"] = &fstest.MapFile{}
		},
		"an unknown label":  func(m fstest.MapFS) { m["widgets/v1/components.yaml"] = &fstest.MapFile{} },
		"no cert-manager":   func(m fstest.MapFS) { delete(m, "cert-manager/v1.11.5/cert-manager.yaml") },
		"a label's file":    func(m fstest.MapFS) { m["cluster-api/core-components.yaml"] = &fstest.MapFile{} },
		"a prefix, no name": func(m fstest.MapFS) { m["bootstrap-/v1/bootstrap-components.yaml"] = &fstest.MapFile{} },
	} {
		t.Run(name, func(t *testing.T) {
			m := tree()
			change(m)
			if _, _, err := New(m, flavors()).Contents(); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestWriteLaysOutTheRepositoryAndItsConfiguration(t *testing.T) {
	dir := t.TempDir()
	config, err := New(tree(), flavors()).Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if config != filepath.Join(dir, "clusterctl.yaml") {
		t.Errorf("configuration %s", config)
	}
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Providers   []struct{ Name, Type, URL string }
		CertManager struct{ URL, Version string } `json:"cert-manager"`
		Topology    string                        `json:"CLUSTER_TOPOLOGY"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("the configuration is no YAML: %v\n%s", err, raw)
	}
	if len(cfg.Providers) != 4 || cfg.Topology != "true" || cfg.CertManager.Version != "v1.11.5" {
		t.Errorf("configuration:\n%s", raw)
	}
	for _, u := range append([]string{cfg.CertManager.URL}, func() (urls []string) {
		for _, p := range cfg.Providers {
			urls = append(urls, p.URL)
		}
		return urls
	}()...) {
		if !filepath.IsAbs(u) || !strings.HasPrefix(u, dir) {
			t.Errorf("url %s is not a file under %s", u, dir)
		}
		if _, err := os.Stat(u); err != nil {
			t.Errorf("url %s: %v", u, err)
		}
	}
	for f, want := range map[string]string{"cluster-template.yaml": "template", "clusterclass-quick-start.yaml": "class"} {
		if got, _ := os.ReadFile(filepath.Join(dir, "infrastructure-dockyard/v0.2.0", f)); string(got) != want {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
	for _, f := range []string{"infrastructure-dockyard/v0.2.0/README.md", "infrastructure-dockyard/v0.2.0/src", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s was written: %v", f, err)
		}
	}
}

func TestSyncComponentsWritesNoFlavorsAndNoConfiguration(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "cert-manager/v1.10.0/cert-manager.yaml")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("older"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := New(tree(), flavors()).SyncComponents(dir); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if len(files) != len(tree()) {
		t.Errorf("files %v, want exactly the components tree's %d", files, len(tree()))
	}
	for _, f := range files {
		if _, ok := tree()[f]; !ok {
			t.Errorf("%s is not in the components tree", f)
		}
	}
}

func TestWriteAgainChangesOnlyWhatDiffers(t *testing.T) {
	dir := t.TempDir()
	m := tree()
	if _, err := New(m, flavors()).Write(dir); err != nil {
		t.Fatal(err)
	}
	unchanged := filepath.Join(dir, "cluster-api/v1.14.2/core-components.yaml")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(unchanged, old, old); err != nil {
		t.Fatal(err)
	}
	// A newer Dockyard: its version replaces the old one, whose directory goes.
	delete(m, "infrastructure-dockyard/v0.2.0/infrastructure-components.yaml")
	m["infrastructure-dockyard/v0.3.0/infrastructure-components.yaml"] = &fstest.MapFile{Data: []byte("newer")}
	if _, err := New(m, flavors()).Write(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(unchanged); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("an unchanged file was rewritten: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "infrastructure-dockyard/v0.2.0")); !os.IsNotExist(err) {
		t.Errorf("the old version's directory is still there: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "infrastructure-dockyard/v0.3.0/infrastructure-components.yaml")); string(got) != "newer" {
		t.Errorf("new components %q", got)
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "clusterctl.yaml")); !strings.Contains(string(raw), "v0.3.0/infrastructure-components.yaml") {
		t.Errorf("the configuration names the old version:\n%s", raw)
	}
}
