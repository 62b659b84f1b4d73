package imagebuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckStatic(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	static := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-o", static, ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := checkStatic(static); err != nil {
		t.Errorf("a static binary: %v", err)
	}
	// Debian's shell is dynamically linked.
	if err := checkStatic("/bin/sh"); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamic binary: %v, want a refusal naming CGO_ENABLED=0", err)
	}
	if err := checkStatic(filepath.Join(dir, "main.go")); err == nil {
		t.Error("a source file was taken for an executable")
	}
}
