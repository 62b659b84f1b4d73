// Command house checks the shape of the code that the linter cannot: the floors of its
// folders (an import only ever points down), the size of the node layer's exported surface and
// of its node handle, the length of the shipped code's functions, and that
// the code docs/architecture.md cites exists. It prints what it measured, and exits 1 when a
// bound does not hold. make lint runs it.
//
//	go run ./hack/house [-root DIR]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Bounds the code keeps.
const (
	// maxNodeLayerNames bounds the exported package-level names of the node layer.
	maxNodeLayerNames = 59
	// maxNodeVerbs bounds the node handle's verbs: its methods that act (they take a context).
	maxNodeVerbs = 12
	// maxFunctionLines bounds a function of the shipped code (all but test/ and hack/), from its
	// func line to its closing brace.
	maxFunctionLines = 80
)

// module is the import path of the repository's module.
const module = "github.com/dockyard-dev/dockyard"

func main() {
	root := flag.String("root", ".", "the repository")
	flag.Parse()
	failures := 0
	for _, check := range []func(string) ([]string, error){floors, nodeLayer, functionLengths, docs} {
		problems, err := check(*root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "house:", err)
			os.Exit(2)
		}
		for _, p := range problems {
			fmt.Println("FAIL", p)
		}
		failures += len(problems)
	}
	if failures > 0 {
		os.Exit(1)
	}
}

// Floors, bottom up.
const (
	ground = iota
	seam
	nodeLayerFloor
	clients
	binaries
)

var floorNames = []string{"ground", "the engine seam", "the node layer", "the reconcilers and the node layer's clients", "the binaries"}

// floorOf is the floor of a folder of the repository ("pkg/nodeimage/runner"); ok is false
// for folders outside the floors (tests, hack).
func floorOf(dir string) (floor int, ok bool) {
	switch {
	case dir == "test" || strings.HasPrefix(dir, "test/") || dir == "hack" || strings.HasPrefix(dir, "hack/"):
		return 0, false
	case dir == "pkg/container" || strings.HasPrefix(dir, "pkg/container/"):
		return seam, true
	case dir == "docker" || strings.HasPrefix(dir, "docker/"):
		return nodeLayerFloor, true
	case strings.HasPrefix(dir, "controllers") || strings.HasPrefix(dir, "cmd/tools/"):
		return clients, true
	case dir == "." || strings.HasPrefix(dir, "cmd/"):
		return binaries, true
	}
	return ground, true
}

// floors reports every import of the module's own packages that points up a floor, in code
// that is not a test.
func floors(root string) ([]string, error) {
	var problems []string
	counted := 0
	err := goFiles(root, func(rel string, f *ast.File) {
		from, ok := floorOf(filepath.Dir(rel))
		if !ok {
			return
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			dir, ok := strings.CutPrefix(path, module+"/")
			if !ok {
				continue
			}
			counted++
			to, ok := floorOf(dir)
			if ok && to > from {
				problems = append(problems, fmt.Sprintf("%s (%s) imports %s (%s): an import only points down", rel, floorNames[from], dir, floorNames[to]))
			}
		}
	})
	fmt.Printf("floors: %d imports of the module's own packages, %d upward\n", counted, len(problems))
	return problems, err
}

// nodeLayer measures the node layer's exported package-level names (docker/ and its packages
// but internal ones) and the node handle's methods.
func nodeLayer(root string) ([]string, error) {
	var names []string
	verbs, questions := 0, 0
	methods := map[string]int{}
	err := goFiles(root, func(rel string, f *ast.File) {
		dir := filepath.Dir(rel)
		inLayer := dir == "docker" || (strings.HasPrefix(dir, "docker/") && !strings.Contains(dir, "internal"))
		if !inLayer {
			return
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				recv := receiver(d)
				methods[recv]++
				if recv == "Node" {
					if takesContext(d) {
						verbs++
					} else {
						questions++
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	})
	sort.Strings(names)
	fmt.Printf("node layer: %d exported names (at most %d); the node handle has %d verbs (at most %d) and %d questions; exported methods: Manager %d, LoadBalancer %d, Registry %d\n",
		len(names), maxNodeLayerNames, verbs, maxNodeVerbs, questions, methods["Manager"], methods["LoadBalancer"], methods["Registry"])
	var problems []string
	if len(names) > maxNodeLayerNames {
		problems = append(problems, fmt.Sprintf("the node layer exports %d names, more than %d: %s", len(names), maxNodeLayerNames, strings.Join(names, " ")))
	}
	if verbs > maxNodeVerbs {
		problems = append(problems, fmt.Sprintf("the node handle has %d verbs, more than %d", verbs, maxNodeVerbs))
	}
	return problems, err
}

func receiver(d *ast.FuncDecl) string {
	t := d.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func takesContext(d *ast.FuncDecl) bool {
	params := d.Type.Params.List
	if len(params) == 0 {
		return false
	}
	sel, ok := params[0].Type.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Context"
}

// functionLengths reports functions over maxFunctionLines in the shipped code (tests, test/ and
// hack/ aside), and counts those in test/ and hack/.
func functionLengths(root string) ([]string, error) {
	var problems []string
	elsewhere := 0
	fset := token.NewFileSet()
	err := goFilesIn(root, fset, func(rel string, f *ast.File) {
		bounded := !strings.HasPrefix(rel, "test/") && !strings.HasPrefix(rel, "hack/")
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if lines <= maxFunctionLines {
				continue
			}
			if bounded {
				problems = append(problems, fmt.Sprintf("%s:%d: %s is %d lines, more than %d", rel, fset.Position(fn.Pos()).Line, fn.Name.Name, lines, maxFunctionLines))
			} else {
				elsewhere++
			}
		}
	})
	fmt.Printf("functions over %d lines: %d in the shipped code (none allowed), %d in test/ and hack/\n", maxFunctionLines, len(problems), elsewhere)
	return problems, err
}

// goFiles parses the Go files of the repository that are not tests (nor generated), without
// their bodies' positions mattering.
func goFiles(root string, each func(rel string, f *ast.File)) error {
	return goFilesIn(root, token.NewFileSet(), each)
}

func goFilesIn(root string, fset *token.FileSet, each func(rel string, f *ast.File)) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "out" || d.Name() == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		each(filepath.ToSlash(rel), f)
		return nil
	})
}
