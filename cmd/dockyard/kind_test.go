package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func kindFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kind.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// --config is kind's configuration: it sets the machine counts and the IP family's flavor.
func TestCreateClusterReadsKindsConfiguration(t *testing.T) {
	cmd := createClusterCommand(&globals{})
	path := kindFile(t, `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking: {ipFamily: dual}
nodes: [{role: control-plane}, {role: worker}, {role: worker}]
`)
	if err := cmd.ParseFlags([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	o := &clusterOptions{kindConfig: path, controlPlanes: 1, workers: 1}
	if err := o.loadKind(cmd); err != nil {
		t.Fatal(err)
	}
	if o.controlPlanes != 1 || o.workers != 2 || o.flavor != "dual-stack" || o.kind == nil {
		t.Errorf("control planes %d, workers %d, flavor %q", o.controlPlanes, o.workers, o.flavor)
	}
}

func TestCreateClusterRefusesFlagsTheKindConfigurationSets(t *testing.T) {
	path := kindFile(t, "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n")
	for _, flag := range []string{"--workers=2", "--control-planes=3", "--flavor=ipv6"} {
		cmd := createClusterCommand(&globals{})
		if err := cmd.ParseFlags([]string{"--config", path, flag}); err != nil {
			t.Fatal(err)
		}
		o := &clusterOptions{kindConfig: path}
		err := o.loadKind(cmd)
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(flag, "=", 2)[0]) {
			t.Errorf("%s: error %v, want one naming the flag", flag, err)
		}
	}
}

func TestCreateClusterNamesTheFileItCannotRead(t *testing.T) {
	path := kindFile(t, "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes: [{role: control-plane, cpus: 2}]\n")
	o := &clusterOptions{kindConfig: path}
	if err := o.loadKind(createClusterCommand(&globals{})); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v, want one naming %s", err, path)
	}
}
