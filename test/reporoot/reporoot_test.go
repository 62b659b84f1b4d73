package reporoot

import (
	"os"
	"path/filepath"
	"testing"
)

// Found from the package's directory (go test's working directory) and from any directory
// below the root, whether or not the binary was built with -trimpath.
func TestFind(t *testing.T) {
	root, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "reporoot", "reporoot.go")); err != nil {
		t.Fatalf("Find() = %s, which does not hold this package: %v", root, err)
	}
	got, err := above(filepath.Join(root, "test", "capie2e", "e2e"))
	if err != nil || got != root {
		t.Errorf("above(test/capie2e/e2e) = %q, %v; want %q", got, err, root)
	}
}

// Outside any Dockyard repository, the error says what was looked for and where.
func TestFindOutside(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := above(dir); err == nil {
		t.Fatalf("above(%s) = %q, want an error", dir, got)
	}
}
