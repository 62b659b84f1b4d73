package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
)

// Without --clusterctl-config, dockyard needs no checkout: it writes the clusterctl repository it carries
// into its own directory, and clusterctl's library reads every provider from there.
func TestClusterctlConfigWithoutAFlagIsTheRepositoryTheCommandCarries(t *testing.T) {
	t.Chdir(t.TempDir()) // an empty directory: no out/clusterctl.yaml
	g := &globals{stateDir: t.TempDir()}
	path, err := g.clusterctlConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, filepath.Join(g.stateDir, "repository")+string(filepath.Separator)) {
		t.Errorf("configuration %s is not under %s/repository", path, g.stateDir)
	}
	cfg, err := clusterctlconfig.New(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		typ  clusterctlv1.ProviderType
	}{
		{"cluster-api", clusterctlv1.CoreProviderType},
		{"kubeadm", clusterctlv1.BootstrapProviderType},
		{"kubeadm", clusterctlv1.ControlPlaneProviderType},
		{"dockyard", clusterctlv1.InfrastructureProviderType},
	} {
		provider, err := cfg.Providers().Get(p.name, p.typ)
		if err != nil {
			t.Errorf("%s %s: %v", p.typ, p.name, err)
			continue
		}
		if _, err := os.Stat(provider.URL()); err != nil {
			t.Errorf("%s %s: %v", p.typ, p.name, err)
		}
	}
	// A second command finds it written and rewrites nothing.
	again, err := (&globals{stateDir: g.stateDir}).clusterctlConfig()
	if err != nil || again != path {
		t.Errorf("again: %s, %v; want %s", again, err, path)
	}
}

func TestClusterctlConfigNamedThatIsMissingIsAnError(t *testing.T) {
	g := &globals{stateDir: t.TempDir(), config: filepath.Join(t.TempDir(), "clusterctl.yaml")}
	if _, err := g.clusterctlConfig(); err == nil || !strings.Contains(err.Error(), "--clusterctl-config") {
		t.Errorf("error %v, want one naming --clusterctl-config", err)
	}
}

func TestVersionNamesEveryProviderItCarries(t *testing.T) {
	var b strings.Builder
	if err := printVersion(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dockyard v", "CoreProvider cluster-api: v1.", "BootstrapProvider kubeadm: v1.", "ControlPlaneProvider kubeadm: v1.", "cert-manager: v"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("version output lacks %q:\n%s", want, b.String())
		}
	}
}

// The command line refuses to look for an in-memory cluster's nodes, saying where they are,
// rather than finding none on a new in-memory engine of its own.
func TestAnInMemoryClustersNodesAreNotTheCommandsToReach(t *testing.T) {
	dc := &infrav1.DockyardCluster{Spec: infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{InMemory: &infrav1.InMemoryInfrastructure{}}}}
	if err := reachable(dc); err == nil || !strings.Contains(err.Error(), "spec.infrastructure.inMemory") {
		t.Errorf("an in-memory cluster: %v, want an error naming spec.infrastructure.inMemory", err)
	}
	if err := reachable(&infrav1.DockyardCluster{}); err != nil {
		t.Errorf("a cluster on the host's engine: %v", err)
	}
}
