package capie2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The components' clusterctl variables take their defaults; one without a default is an error
// naming it, as clusterctl init would give.
func TestTestExtensionComponentsVariables(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := TestExtension{Components: write("ok.yaml", "args:\n- --diagnostics-address=${CAPI_DIAGNOSTICS_ADDRESS:=:8443}\n")}.objects()
	if err != nil {
		t.Fatal(err)
	}
	if want := "args:\n- --diagnostics-address=:8443\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	_, err = TestExtension{Components: write("missing.yaml", "value: ${NO_DEFAULT}\n")}.objects()
	if err == nil || !strings.Contains(err.Error(), "NO_DEFAULT") {
		t.Errorf("a variable without a default: %v, want an error naming it", err)
	}
	_, err = TestExtension{Components: filepath.Join(dir, "absent.yaml")}.objects()
	if err == nil || !strings.Contains(err.Error(), "make capi-test-extension") {
		t.Errorf("no components: %v, want an error saying what writes them", err)
	}
}
