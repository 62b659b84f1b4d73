package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/errors"
)

// The binary called as manager is Dockyard's manager, with the manager's flags; under its own
// name it is the command line.
func TestTheBinaryCalledManagerIsTheManager(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dockyard")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the command: %v\n%s", err, out)
	}
	if err := os.Link(bin, filepath.Join(dir, managerName)); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(filepath.Join(dir, managerName), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("manager --help: %v\n%s", err, out)
	}
	for _, flag := range []string{"--leader-elect", "--container-runtime", "--allowed-image-repositories", "--kubeconfig"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("manager --help does not list %s:\n%s", flag, out)
		}
	}
	if strings.Contains(string(out), "quickstart") {
		t.Errorf("manager --help shows the command line's commands:\n%s", out)
	}

	var exit *exec.ExitError
	out, err = exec.Command(filepath.Join(dir, managerName), "--no-such-flag").CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "no-such-flag") {
		t.Errorf("manager --no-such-flag: %v, want exit 2 naming the flag:\n%s", err, out)
	}

	out, err = exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "quickstart") {
		t.Errorf("dockyard --help: %v\n%s", err, out)
	}
}
