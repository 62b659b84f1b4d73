package capie2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
)

// The suite's e2e config names every flavor WriteFlavors writes, and the versions of Cluster
// API, Dockyard and cert-manager the repository builds.
func TestE2EConfigMatchesTheRepository(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("config", "dockyard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg clusterctl.E2EConfig
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatal(err)
	}

	written, err := WriteFlavors(filepath.Join("..", "..", "templates"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, f := range written {
		want = append(want, filepath.Base(f))
	}
	versions := map[string]string{}
	for _, p := range cfg.Providers {
		versions[p.Name+"/"+p.Type] = p.Versions[0].Name
		for _, v := range p.Versions {
			for _, f := range v.Files {
				if strings.Contains(f.SourcePath, "out/capie2e/flavors/") {
					got = append(got, filepath.Base(f.SourcePath))
				}
			}
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the e2e config names the flavors\n  %v\nWriteFlavors writes\n  %v", got, want)
	}

	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse("go.mod", mod, nil)
	if err != nil {
		t.Fatal(err)
	}
	capi := ""
	for _, r := range f.Require {
		if r.Mod.Path == "sigs.k8s.io/cluster-api" {
			capi = r.Mod.Version
		}
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	imagesMk, err := os.ReadFile(filepath.Join("..", "..", "images", "images.mk"))
	if err != nil {
		t.Fatal(err)
	}
	makeVar := func(text []byte, name string) string {
		m := regexp.MustCompile(`(?m)^` + name + ` \?= (\S+)`).FindSubmatch(text)
		if m == nil {
			t.Fatalf("no %s in the Makefile", name)
		}
		return string(m[1])
	}
	dockyard, certManager := makeVar(makefile, "VERSION"), makeVar(imagesMk, "CERT_MANAGER_VERSION")
	for key, v := range versions {
		wantV := capi
		if key == "dockyard/InfrastructureProvider" {
			wantV = dockyard
		}
		if v != wantV {
			t.Errorf("provider %s at %s in the e2e config, the repository builds %s", key, v, wantV)
		}
	}
	for _, img := range cfg.Images {
		tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
		switch {
		case strings.Contains(img.Name, "/cluster-api/") && tag != capi,
			strings.Contains(img.Name, "/capi-test-extension:") && tag != capi,
			strings.Contains(img.Name, "cert-manager") && tag != certManager,
			strings.Contains(img.Name, "dockyard/manager") && tag != dockyard:
			t.Errorf("image %s: the repository builds another version", img.Name)
		}
	}
	if from := makeVar(makefile, "KUBERNETES_VERSION_UPGRADE_FROM"); cfg.Variables["KUBERNETES_VERSION_UPGRADE_FROM"] != from {
		t.Errorf("KUBERNETES_VERSION_UPGRADE_FROM is %s in the e2e config, %s in the Makefile (which builds its node image)", cfg.Variables["KUBERNETES_VERSION_UPGRADE_FROM"], from)
	}
	if to, k8s := cfg.Variables["KUBERNETES_VERSION_UPGRADE_TO"], makeVar(imagesMk, "KUBERNETES_VERSION"); to != k8s || cfg.Variables["KUBERNETES_VERSION"] != k8s {
		t.Errorf("the e2e config runs %s and upgrades to %s; the repository builds %s", cfg.Variables["KUBERNETES_VERSION"], to, k8s)
	}
	if cfg.Variables["CERT_MANAGER_VERSION"] != certManager || !strings.Contains(cfg.Variables["CERT_MANAGER_MANIFEST"], "/"+certManager+"/") {
		t.Errorf("cert-manager variables %s %s, the repository builds %s", cfg.Variables["CERT_MANAGER_VERSION"], cfg.Variables["CERT_MANAGER_MANIFEST"], certManager)
	}
}
