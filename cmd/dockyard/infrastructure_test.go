package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// --infrastructure-kubeconfig picks the kubernetes flavor and names the Secret the kubeconfig
// goes into; beside a flag choosing another flavor, or with a file that is no kubeconfig, it is
// refused before anything is made.
func TestInfrastructureKubeconfigPicksTheKubernetesFlavor(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "infra.conf")
	if err := os.WriteFile(good, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://infra:6443}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	execs := filepath.Join(dir, "exec.conf")
	if err := os.WriteFile(execs, []byte("apiVersion: v1\nkind: Config\nusers: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: gke-gcloud-auth-plugin, interactiveMode: Never}}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("{not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &clusterOptions{infrastructureKubeconfig: good}
	raw, err := o.useInfrastructure("dev")
	if err != nil || len(raw) == 0 || o.flavor != kubernetesFlavor ||
		!slices.Contains(o.variables, "DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET=dev-infrastructure-kubeconfig") {
		t.Errorf("flavor %q variables %v: %v", o.flavor, o.variables, err)
	}
	for name, o := range map[string]*clusterOptions{
		"another flavor":   {infrastructureKubeconfig: good, flavor: "topology"},
		"kind's config":    {infrastructureKubeconfig: good, kindConfig: "kind.yaml"},
		"not a kubeconfig": {infrastructureKubeconfig: bad},
		"an exec plugin":   {infrastructureKubeconfig: execs},
		"no file":          {infrastructureKubeconfig: filepath.Join(dir, "absent")},
	} {
		if _, err := o.useInfrastructure("dev"); err == nil || !strings.Contains(err.Error(), "--infrastructure-kubeconfig") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if raw, err := (&clusterOptions{}).useInfrastructure("dev"); raw != nil || err != nil {
		t.Errorf("without the flag: %v %v", raw, err)
	}
}
