package gobuild

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterAPI(t *testing.T) {
	build, err := ClusterAPI("v1.14.2")
	if err != nil {
		t.Fatal(err)
	}
	if build.Name != "cluster-api" || build.Version != "v1.14.2" {
		t.Errorf("cache key %s-%s, want cluster-api-v1.14.2", build.Name, build.Version)
	}
	if got := build.Require["sigs.k8s.io/cluster-api"]; got != "v1.14.2" {
		t.Errorf("requires sigs.k8s.io/cluster-api %q", got)
	}
	// The module's own go.mod points the api module at a placeholder the proxy refuses.
	if got := build.Replace["sigs.k8s.io/cluster-api/api"]; got != "v1.14.2" {
		t.Errorf("replaces sigs.k8s.io/cluster-api/api with %q", got)
	}
	want := map[string]string{
		ClusterAPICore:                "sigs.k8s.io/cluster-api/core",
		ClusterAPIKubeadmBootstrap:    "sigs.k8s.io/cluster-api/bootstrap/kubeadm",
		ClusterAPIKubeadmControlPlane: "sigs.k8s.io/cluster-api/controlplane/kubeadm",
		Clusterctl:                    "sigs.k8s.io/cluster-api/cmd/clusterctl",
	}
	if len(build.Binaries) != len(want) {
		t.Fatalf("%d binaries, want %d (all by default)", len(build.Binaries), len(want))
	}
	for _, bin := range build.Binaries {
		if want[bin.Name] != bin.Package {
			t.Errorf("binary %s builds %q, want %q", bin.Name, bin.Package, want[bin.Name])
		}
		flags := strings.Join(bin.LDFlags, " ")
		if !strings.Contains(flags, "-X sigs.k8s.io/cluster-api/version.gitVersion=v1.14.2") ||
			!strings.Contains(flags, "version.gitMinor=14") {
			t.Errorf("binary %s is not stamped with the version: %s", bin.Name, flags)
		}
	}
}

func TestClusterAPISelectedCommands(t *testing.T) {
	build, err := ClusterAPI("v1.14.2", Clusterctl, Clusterctl)
	if err != nil {
		t.Fatal(err)
	}
	if len(build.Binaries) != 1 || build.Binaries[0].Name != Clusterctl {
		t.Errorf("binaries %+v, want clusterctl once", build.Binaries)
	}
}

func TestClusterAPIErrors(t *testing.T) {
	for _, tc := range []struct{ version, command string }{
		{"not-a-version", ""},
		{"v1.10.0", ""}, // another module layout
		{"v2.0.0", ""},
		{"v1.14.2", "cluster-api-docker"},
	} {
		var cmds []string
		if tc.command != "" {
			cmds = append(cmds, tc.command)
		}
		if _, err := ClusterAPI(tc.version, cmds...); err == nil {
			t.Errorf("ClusterAPI(%q, %v) succeeded, want an error", tc.version, cmds)
		}
	}
}

// TestClusterAPIPinnedToGoMod: pinned to a go.mod, the build requires that go.mod's versions of
// the modules it shares, so both compile one set of packages, and keeps its own requirement and
// replace of Cluster API; a module the go.mod replaces with a directory is not required.
func TestClusterAPIPinnedToGoMod(t *testing.T) {
	gomod := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(gomod, []byte(`module example.com/provider

go 1.26

require (
	example.com/provider/local v0.0.0-00010101000000-000000000000
	golang.org/x/net v0.58.0 // indirect
	sigs.k8s.io/cluster-api v1.14.0
	sigs.k8s.io/cluster-api/api v1.14.0
)

replace sigs.k8s.io/cluster-api/api => sigs.k8s.io/cluster-api/api v1.14.0

// A module of the go.mod's own tree, at a version no proxy serves: not one to pin.
replace example.com/provider/local => ../local
`), 0o644); err != nil {
		t.Fatal(err)
	}
	build, err := ClusterAPI("v1.14.2")
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := build.PinnedTo(gomod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"golang.org/x/net": "v0.58.0", "sigs.k8s.io/cluster-api": "v1.14.2"}
	if !maps.Equal(pinned.Require, want) {
		t.Errorf("requires %v, want %v", pinned.Require, want)
	}
	if got := pinned.Replace["sigs.k8s.io/cluster-api/api"]; got != "v1.14.2" {
		t.Errorf("replaces sigs.k8s.io/cluster-api/api with %q, want the build's own v1.14.2", got)
	}
	if len(build.Require) != 1 {
		t.Errorf("PinnedTo changed the build it was called on: %v", build.Require)
	}

	if _, err := build.PinnedTo(filepath.Join(t.TempDir(), "missing", "go.mod")); err == nil {
		t.Error("pinned to a go.mod that does not exist, want an error")
	}
	if err := os.WriteFile(gomod, []byte("module x\nrequire (\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := build.PinnedTo(gomod); err == nil {
		t.Error("pinned to a go.mod that does not parse, want an error")
	}
}

func TestClusterAPITestExtension(t *testing.T) {
	build, err := ClusterAPITestExtension("v1.14.2")
	if err != nil {
		t.Fatal(err)
	}
	if build.Name != "cluster-api-test-extension" || build.Version != "v1.14.2" {
		t.Errorf("cache key %s-%s, want cluster-api-test-extension-v1.14.2", build.Name, build.Version)
	}
	for _, m := range []string{"sigs.k8s.io/cluster-api", "sigs.k8s.io/cluster-api/test"} {
		if got := build.Require[m]; got != "v1.14.2" {
			t.Errorf("requires %s %q, want v1.14.2", m, got)
		}
	}
	// The test module's go.mod points both at placeholders its own replaces resolve.
	for _, m := range []string{"sigs.k8s.io/cluster-api", "sigs.k8s.io/cluster-api/api"} {
		if got := build.Replace[m]; got != "v1.14.2" {
			t.Errorf("replaces %s with %q, want v1.14.2", m, got)
		}
	}
	if len(build.Binaries) != 1 || build.Binaries[0].Name != "test-extension" || build.Binaries[0].Package != ClusterAPITestExtensionPackage {
		t.Fatalf("binaries %+v, want the test extension alone", build.Binaries)
	}
	if flags := strings.Join(build.Binaries[0].LDFlags, " "); !strings.Contains(flags, "version.gitVersion=v1.14.2") {
		t.Errorf("not stamped with the version: %s", flags)
	}
	if _, err := ClusterAPITestExtension("v1.10.0"); err == nil {
		t.Error("v1.10.0, another module layout, was accepted")
	}
}
