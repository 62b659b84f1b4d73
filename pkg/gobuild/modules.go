package gobuild

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"

	"github.com/pkg/errors"
	"golang.org/x/mod/modfile"
)

// Module is a module version in the module cache.
type Module struct {
	// Dir holds the module's files; GoMod is its go.mod.
	Dir, GoMod string
}

// Download returns module@version from the module cache, downloading it from the module proxy
// if it is not there yet.
func (b *Builder) Download(ctx context.Context, module, version string) (Module, error) {
	goTool := b.GoCommand
	if goTool == "" {
		goTool = "go"
	}
	cmd := exec.CommandContext(ctx, goTool, "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Module{}, errors.Errorf("go mod download %s@%s: %v: %s%s", module, version, err, stderr.String(), out)
	}
	var m Module
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" || m.GoMod == "" {
		return Module{}, errors.Errorf("go mod download %s@%s: no directory or go.mod in %s", module, version, out)
	}
	return m, nil
}

// RequiredVersion returns the version of dep that the go.mod of module@version requires (e.g.
// the Ginkgo release k8s.io/kubernetes v1.34.4 builds its e2e.test with).
func (b *Builder) RequiredVersion(ctx context.Context, module, version, dep string) (string, error) {
	m, err := b.Download(ctx, module, version)
	if err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(m.GoMod)
	if err != nil {
		return "", errors.Wrapf(err, "reading the go.mod of %s@%s", module, version)
	}
	v, err := requiredVersion(m.GoMod, gomod, dep)
	return v, errors.Wrapf(err, "%s@%s", module, version)
}

// requiredVersion returns the version a go.mod requires of dep.
func requiredVersion(file string, gomod []byte, dep string) (string, error) {
	f, err := modfile.ParseLax(file, gomod, nil)
	if err != nil {
		return "", errors.Wrapf(err, "parsing %s", file)
	}
	for _, r := range f.Require {
		if r.Mod.Path == dep {
			return r.Mod.Version, nil
		}
	}
	return "", errors.Errorf("go.mod does not require %s", dep)
}

// PinnedTo returns the build with every module the go.mod at path requires added to its
// requirements at that go.mod's version, except the modules the build requires or replaces
// itself. Built for Dockyard's go.mod, the wrapper module then selects Dockyard's versions of
// the modules both use (client-go, controller-runtime, golang.org/x/net, ...): a package the
// build compiles is the one Dockyard's tests, vet and lint compile, and Go's build cache holds it
// once. A module only the build uses keeps the version the build's modules require, and so does
// one the go.mod replaces with a directory (read as a main module's go.mod, replaces included).
func (b Build) PinnedTo(path string) (Build, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Build{}, errors.Wrap(err, "reading the go.mod to pin the build's modules to")
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return Build{}, errors.Wrapf(err, "parsing %s", path)
	}
	// A module the go.mod replaces with a directory (its own tree) is required at a version
	// no proxy serves: the build keeps the version its own modules require.
	local := map[string]bool{}
	for _, r := range f.Replace {
		if r.New.Version == "" {
			local[r.Old.Path] = true
		}
	}
	versions := make(map[string]string, len(f.Require))
	for _, r := range f.Require {
		if !local[r.Mod.Path] {
			versions[r.Mod.Path] = r.Mod.Version
		}
	}
	return b.PinnedToModules(versions), nil
}

// PinnedToModules is PinnedTo with the modules given by path and version: those a binary was
// built with (runtime/debug's BuildInfo.Deps), where no go.mod is at hand.
func (b Build) PinnedToModules(versions map[string]string) Build {
	require := maps.Clone(b.Require)
	if require == nil {
		require = map[string]string{}
	}
	for path, version := range versions {
		_, own := b.Require[path]
		_, replaced := b.Replace[path]
		if !own && !replaced {
			require[path] = version
		}
	}
	b.Require = require
	return b
}
