package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The repository in the binary is the one make release-manifests renders: its layout reads,
// Dockyard's components run the manager image of the repository's own version, and written
// out it holds the flavors and the ClusterClass.
func TestRepository(t *testing.T) {
	r, err := Repository()
	if err != nil {
		t.Fatal(err)
	}
	providers, _, err := r.Contents()
	if err != nil {
		t.Fatal(err)
	}
	if len(providers) != 4 {
		t.Errorf("providers %+v, want Cluster API's three and Dockyard", providers)
	}
	version, err := r.Version()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	dockyard := filepath.Join(dir, "infrastructure-dockyard", version)
	components, err := os.ReadFile(filepath.Join(dockyard, "infrastructure-components.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(components), "image: localhost/dockyard/manager:"+version+"\n") {
		t.Errorf("Dockyard's components do not run the manager image of %s", version)
	}
	for _, f := range []string{"metadata.yaml", "cluster-template.yaml", "cluster-template-topology.yaml", "clusterclass-dockyard-quick-start.yaml"} {
		if _, err := os.Stat(filepath.Join(dockyard, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
