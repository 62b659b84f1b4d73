package capie2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/cmd/tools/release"
)

// suiteConfig is the suite's configuration as the framework loads it, its metadata file named
// from this package's directory.
func suiteConfig(t *testing.T) *clusterctl.E2EConfig {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("config", "dockyard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &clusterctl.E2EConfig{}
	if err := yaml.UnmarshalStrict(raw, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Defaults()
	for i := range cfg.Providers {
		for j := range cfg.Providers[i].Versions {
			for k, f := range cfg.Providers[i].Versions[j].Files {
				if f.TargetName == release.MetadataFile && cfg.Providers[i].Name == "dockyard" {
					cfg.Providers[i].Versions[j].Files[k].SourcePath = filepath.Join("..", "..", "metadata.yaml")
				}
			}
		}
	}
	return cfg
}

// writeRelease writes a release directory of version with its SHA256SUMS.
func writeRelease(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), version)
	files := map[string][]byte{
		release.ComponentsFile:                   []byte("kind: Namespace\n"),
		release.MetadataFile:                     []byte("releaseSeries: [{major: 0, minor: 1, contract: v1beta2}]\n"),
		"cluster-template.yaml":                  []byte("kind: Cluster\n"),
		"clusterclass-dockyard-quick-start.yaml": []byte("kind: ClusterClass\n"),
		release.ImagesDir + "/manager.oci.tar":   []byte("not a flavor"),
	}
	files[release.SumsFile] = release.Sums(files)
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func dockyardVersions(cfg *clusterctl.E2EConfig) []clusterctl.ProviderVersionSource {
	for _, p := range cfg.Providers {
		if p.Name == "dockyard" {
			return p.Versions
		}
	}
	return nil
}

// The tree's version becomes the newer one, with its series added to its metadata; each
// previous release (a pre-release of the tree's series among them) is listed with its
// components, metadata and flavors, and nothing else of it.
func TestWithUpgrade(t *testing.T) {
	cfg := suiteConfig(t)
	treeComponents := dockyardVersions(cfg)[0].Value
	first, pre := writeRelease(t, "v0.1.0"), writeRelease(t, "v0.2.0-alpha.0")
	metadataDir := t.TempDir()
	got, err := WithUpgrade(cfg, Upgrade{Provider: "dockyard", Previous: []string{first, pre}, Current: "v0.2.0", MetadataDir: metadataDir})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"v0.1.0", "v0.2.0-alpha.0"}; !slices.Equal(got, want) {
		t.Errorf("previous releases %q, want %q", got, want)
	}
	versions := dockyardVersions(cfg)
	if len(versions) != 3 || versions[0].Name != "v0.2.0" || versions[1].Name != "v0.1.0" || versions[2].Name != "v0.2.0-alpha.0" {
		t.Fatalf("dockyard's versions %+v, want v0.2.0 (the tree), v0.1.0 and v0.2.0-alpha.0", versions)
	}
	if versions[0].Value != treeComponents || versions[1].Value != filepath.Join(first, release.ComponentsFile) ||
		versions[2].Value != filepath.Join(pre, release.ComponentsFile) {
		t.Errorf("components %s, %s and %s", versions[0].Value, versions[1].Value, versions[2].Value)
	}
	for _, v := range versions[1:] {
		if v.Contract != versions[0].Contract || v.Type != clusterctl.URLSource {
			t.Errorf("release %s's contract %q and type %q, want the tree's %q and url", v.Name, v.Contract, v.Type, versions[0].Contract)
		}
		var files []string
		for _, f := range v.Files {
			files = append(files, f.TargetName)
		}
		slices.Sort(files)
		if want := []string{"cluster-template.yaml", "clusterclass-dockyard-quick-start.yaml", release.MetadataFile}; !slices.Equal(files, want) {
			t.Errorf("release %s's files %v, want %v", v.Name, files, want)
		}
	}

	i := slices.IndexFunc(versions[0].Files, func(f clusterctl.Files) bool { return f.TargetName == release.MetadataFile })
	if versions[0].Files[i].SourcePath != filepath.Join(metadataDir, release.MetadataFile) {
		t.Fatalf("the tree's metadata is %s", versions[0].Files[i].SourcePath)
	}
	raw, err := os.ReadFile(versions[0].Files[i].SourcePath)
	if err != nil {
		t.Fatal(err)
	}
	md := &clusterctlv1.Metadata{}
	if err := yaml.Unmarshal(raw, md); err != nil {
		t.Fatal(err)
	}
	want := []clusterctlv1.ReleaseSeries{{Major: 0, Minor: 1, Contract: "v1beta2"}, {Major: 0, Minor: 2, Contract: "v1beta2"}}
	if !slices.Equal(md.ReleaseSeries, want) {
		t.Errorf("the tree's series %+v, want %+v", md.ReleaseSeries, want)
	}
}

func TestWithUpgradeRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		versions []string
		current  string
		tamper   bool
		want     string
	}{
		"a release not older":              {versions: []string{"v0.1.0", "v0.2.0"}, current: "v0.2.0", want: "v0.2.0 is not older than v0.2.0"},
		"a later pre-release":              {versions: []string{"v0.2.0-alpha.0"}, current: "v0.2.0-alpha.0", want: "is not older"},
		"a directory not named a version":  {versions: []string{"latest"}, current: "v0.2.0", want: "not named after its version"},
		"a release not as its sums say":    {versions: []string{"v0.1.0"}, current: "v0.2.0", tamper: true, want: "does not have the sum"},
		"a release listed twice":           {versions: []string{"v0.1.0", "v0.1.0"}, current: "v0.2.0", want: "listed twice"},
		"a tree's version that is not one": {versions: []string{"v0.1.0"}, current: "next", want: `released as, "next"`},
	} {
		t.Run(name, func(t *testing.T) {
			var dirs []string
			for i, v := range tc.versions {
				dirs = append(dirs, writeRelease(t, v))
				if tc.tamper && i == len(tc.versions)-1 {
					if err := os.WriteFile(filepath.Join(dirs[i], "cluster-template.yaml"), []byte("changed"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			cfg := suiteConfig(t)
			before := dockyardVersions(cfg)[0].Name
			_, err := WithUpgrade(cfg, Upgrade{Provider: "dockyard", Previous: dirs, Current: tc.current, MetadataDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if v := dockyardVersions(cfg); len(v) != 1 || v[0].Name != before {
				t.Errorf("the configuration changed: %+v", v)
			}
		})
	}
}
