package imagebuild

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The registry proxy is built with the modules it imports at the versions Dockyard's go.mod
// requires, and with no other module of Dockyard's: it is built from its one file, outside
// this module.
func TestRegistryProxyModulesAreDockyards(t *testing.T) {
	gomod := filepath.Join("..", "..", "..", "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	required := map[string]string{}
	for _, r := range f.Require {
		required[r.Mod.Path] = r.Mod.Version
	}
	modules := registryProxyModules()
	for path, version := range modules {
		if required[path] != version {
			t.Errorf("the registry proxy is built with %s %s, Dockyard's go.mod requires %s", path, version, required[path])
		}
	}
	src := mustEmbedded("registryproxy/main.go")
	file, err := parser.ParseFile(token.NewFileSet(), "main.go", src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range file.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") {
			continue // the standard library
		}
		owned := false
		for module := range modules {
			owned = owned || path == module || strings.HasPrefix(path, module+"/")
		}
		if !owned {
			t.Errorf("the registry proxy imports %s, from no module its build requires", path)
		}
	}
	build := registryProxyBuild()
	if build.Binaries[0].MainSource != string(src) || build.Version == "" {
		t.Errorf("registry proxy build %+v", build)
	}
}
