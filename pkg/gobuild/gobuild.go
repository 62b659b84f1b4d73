// Package gobuild builds Go commands from modules on the Go module proxy into a cache keyed by
// module and version, through a small wrapper module, for commands that cannot simply be
// `go install`ed (k8s.io/kubernetes replaces its staging modules with local paths; etcd and
// Cluster API need a main or a replace of their own).
package gobuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
)

// Build describes one wrapper module and the commands built from it.
type Build struct {
	// Name and Version key the cache directory: <cache>/<Name>-<Version>.
	Name    string
	Version string
	// Require lists module path → version the wrapper module requires.
	Require map[string]string
	// Replace lists module path → version pinned with a replace directive.
	Replace map[string]string
	// Binaries are built into <dir>/bin.
	Binaries []Binary
}

// Binary is one command built from the wrapper module.
type Binary struct {
	// Name of the file in bin/.
	Name string
	// Package is the import path of the main package. Ignored when MainSource is set.
	Package string
	// MainSource, when set, is the source of a main package written into the wrapper module
	// (for modules that export a Main function but whose own main cannot be built).
	MainSource string
	// LDFlags are passed to the linker in addition to "-s -w".
	LDFlags []string
	// Test builds the test binary of Package (`go test -c`, e.g. Kubernetes' e2e.test) instead
	// of a command.
	Test bool
}

// DockyardCache is the directory everything Dockyard builds or downloads is cached in:
// $DOCKYARD_CACHE, else ~/.cache/dockyard. Builds go to its build/ directory.
func DockyardCache() string {
	if d := os.Getenv("DOCKYARD_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "dockyard")
}

// Builder runs builds into a cache directory.
type Builder struct {
	// CacheDir holds one directory per build.
	CacheDir string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// GoCommand is the go tool to run; "go" when empty.
	GoCommand string
}

// Dir returns the directory of a build: its binaries are in Dir()/bin.
func (b *Builder) Dir(build Build) string {
	return filepath.Join(b.CacheDir, build.Name+"-"+build.Version)
}

// BinDir returns the directory the build's binaries are written to.
func (b *Builder) BinDir(build Build) string {
	return filepath.Join(b.Dir(build), "bin")
}

// Run builds every binary of the build that is not in the cache yet and returns the bin
// directory. A binary is written under a temporary name and renamed, so an interrupted build
// never leaves a truncated binary behind.
func (b *Builder) Run(ctx context.Context, build Build) (string, error) {
	binDir := b.BinDir(build)
	notBuilt := func() []Binary {
		return slices.DeleteFunc(slices.Clone(build.Binaries), func(bin Binary) bool {
			_, err := os.Stat(filepath.Join(binDir, bin.Name))
			return err == nil
		})
	}
	if len(notBuilt()) == 0 {
		return binDir, nil
	}
	// Another process building the same binaries (two make targets at once) is waited for;
	// what it built is not built again.
	unlock, err := Lock(ctx, b.Dir(build)+".lock", func(path string) { b.logf("waiting for another build holding %s", path) })
	if err != nil {
		return "", err
	}
	defer unlock()
	missing := notBuilt()
	if len(missing) == 0 {
		return binDir, nil
	}

	srcDir := filepath.Join(b.Dir(build), "src")
	if err := b.prepareModule(ctx, srcDir, build); err != nil {
		return "", err
	}
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", errors.Wrapf(err, "creating %s", binDir)
	}
	for _, bin := range missing {
		start := time.Now()
		b.logf("building %s %s (%s)", bin.Name, build.Version, bin.target())
		tmp := filepath.Join(binDir, "."+bin.Name+".tmp")
		if err := b.goCmd(ctx, srcDir, bin.args(tmp)...); err != nil {
			_ = os.Remove(tmp)
			return "", errors.Wrapf(err, "building %s from %s %s", bin.Name, build.Name, build.Version)
		}
		if err := os.Rename(tmp, filepath.Join(binDir, bin.Name)); err != nil {
			return "", errors.Wrapf(err, "installing %s", bin.Name)
		}
		b.logf("built %s in %s", bin.Name, time.Since(start).Round(time.Second))
	}
	return binDir, nil
}

// Lock takes an exclusive lock on the file at path (made if missing), calling waiting first
// when another holder has it, and giving up when ctx ends. The lock goes with the process, so an
// interrupted build never leaves it behind; the returned function releases it. A process that
// holds it and asks again waits for itself: callers take it once.
func Lock(ctx context.Context, path string, waiting func(path string)) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, errors.Wrapf(err, "creating %s", filepath.Dir(path))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, errors.Wrapf(err, "opening lock %s", path)
	}
	for told := false; ; told = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, errors.Wrapf(err, "locking %s", path)
		}
		if !told && waiting != nil {
			waiting(path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, errors.Wrapf(ctx.Err(), "waiting for the lock %s", path)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// args are the go command's arguments that build the binary into out.
func (bin Binary) args(out string) []string {
	ldflags := append([]string{"-s", "-w"}, bin.LDFlags...)
	verb := []string{"build"}
	if bin.Test {
		// go test runs vet on the package first, which for Kubernetes' e2e tree takes minutes and
		// proves nothing about the binary.
		verb = []string{"test", "-c", "-vet=off"}
	}
	return append(verb, "-trimpath", "-ldflags", strings.Join(ldflags, " "), "-o", out, bin.target())
}

func (bin Binary) target() string {
	if bin.MainSource != "" {
		return "./cmd/" + bin.Name
	}
	return bin.Package
}

// prepareModule writes the wrapper module and resolves its dependencies. It is rewritten on
// every run that has something to build: cheap, and it picks up changes to the build.
func (b *Builder) prepareModule(ctx context.Context, dir string, build Build) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "creating %s", dir)
	}
	var gomod bytes.Buffer
	fmt.Fprintf(&gomod, "module dockyard.local/build/%s\n\ngo 1.26\n\n", build.Name)
	for _, path := range sortedKeys(build.Require) {
		fmt.Fprintf(&gomod, "require %s %s\n", path, build.Require[path])
	}
	for _, path := range sortedKeys(build.Replace) {
		fmt.Fprintf(&gomod, "replace %s => %s %s\n", path, path, build.Replace[path])
	}

	// A tools file imports every package built, so `go mod tidy` resolves all of them.
	var tools bytes.Buffer
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, bin := range build.Binaries {
		if bin.MainSource != "" {
			mainDir := filepath.Join(dir, "cmd", bin.Name)
			if err := os.MkdirAll(mainDir, 0o755); err != nil {
				return errors.Wrapf(err, "creating %s", mainDir)
			}
			if err := os.WriteFile(filepath.Join(mainDir, "main.go"), []byte(bin.MainSource), 0o644); err != nil {
				return errors.Wrap(err, "writing main package")
			}
			continue
		}
		fmt.Fprintf(&tools, "\t_ %q\n", bin.Package)
	}
	tools.WriteString(")\n")

	// The inputs of `go mod tidy`: when they did not change, the resolved module is reused.
	key := append(append([]byte{}, gomod.Bytes()...), tools.Bytes()...)
	current, _ := os.ReadFile(filepath.Join(dir, "inputs"))
	if bytes.Equal(current, key) {
		if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
			return nil
		}
	}
	for name, content := range map[string][]byte{"go.mod": gomod.Bytes(), "tools.go": tools.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return errors.Wrapf(err, "writing %s", name)
		}
	}
	b.logf("resolving modules for %s %s", build.Name, build.Version)
	if err := b.goCmd(ctx, dir, "mod", "tidy"); err != nil {
		return errors.Wrapf(err, "resolving modules of %s %s", build.Name, build.Version)
	}
	// Remember the input only after tidy succeeded.
	return errors.Wrap(os.WriteFile(filepath.Join(dir, "inputs"), key, 0o644), "recording module inputs")
}

func (b *Builder) goCmd(ctx context.Context, dir string, args ...string) error {
	goTool := b.GoCommand
	if goTool == "" {
		goTool = "go"
	}
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		return errors.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, tail(out.String(), 40))
	}
	return nil
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, format+"\n", args...)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
