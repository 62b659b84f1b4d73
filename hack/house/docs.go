package main

import (
	"fmt"
	"go/ast"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// docsCited are the documents whose cited code must exist.
var docsCited = []string{"docs/architecture.md"}

// docs reports what a document cites in backquotes and the code does not have: a path of the
// repository (a file or folder), pkg.Name (a package-level name of a package of that name),
// Type.Member (a method or field of a type of that name), pkg.Type.Member.
func docs(root string) ([]string, error) {
	code, err := codeNames(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	checked := 0
	for _, doc := range docsCited {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return nil, err
		}
		for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(text), -1) {
			ok, known := code.cites(root, m[1])
			if !known {
				continue
			}
			checked++
			if !ok {
				problems = append(problems, fmt.Sprintf("%s cites `%s`, which the code does not have", doc, m[1]))
			}
		}
	}
	fmt.Printf("docs: %d citations of code checked in %s, %d missing\n", checked, strings.Join(docsCited, ", "), len(problems))
	return problems, nil
}

// names are the code's package-level names by package name, and the members of its types by
// type name.
type names struct {
	packages map[string]map[string]bool
	members  map[string]map[string]bool
	files    map[string]bool
}

func codeNames(root string) (*names, error) {
	n := &names{packages: map[string]map[string]bool{}, members: map[string]map[string]bool{}, files: map[string]bool{}}
	add := func(m map[string]map[string]bool, key, name string) {
		if m[key] == nil {
			m[key] = map[string]bool{}
		}
		m[key][name] = true
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err == nil && !d.IsDir() {
			n.files[d.Name()] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	err = goFiles(root, func(rel string, f *ast.File) {
		pkg := f.Name.Name
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					add(n.packages, pkg, d.Name.Name)
				} else {
					add(n.members, receiver(d), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(n.packages, pkg, s.Name.Name)
						for _, member := range typeMembers(s) {
							add(n.members, s.Name.Name, member)
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							add(n.packages, pkg, id.Name)
						}
					}
				}
			}
		}
	})
	return n, err
}

// typeMembers are the fields of a struct and the methods of an interface.
func typeMembers(s *ast.TypeSpec) []string {
	var out []string
	var fields *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return nil
	}
	for _, f := range fields.List {
		for _, id := range f.Names {
			out = append(out, id.Name)
		}
	}
	return out
}

var (
	qualified = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9]*)(?:\.([A-Z][A-Za-z0-9]*))?$`)
	member    = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9]*)$`)
	path      = regexp.MustCompile(`^[a-z][a-z0-9_./-]*(/|\.go|\.sh|\.yml)$|^[a-z][a-z0-9_-]*(/[a-z0-9_.-]+)+/?$`)
)

// cites reports whether the code has what a citation names; known is false for a citation that
// names no code (a command, a flag, a field of a YAML document).
func (n *names) cites(root, c string) (ok, known bool) {
	c = strings.TrimPrefix(c, "*")
	if m := qualified.FindStringSubmatch(c); m != nil {
		if _, isPkg := n.packages[m[1]]; !isPkg {
			return false, false
		}
		if !n.packages[m[1]][m[2]] {
			return false, true
		}
		return m[3] == "" || n.members[m[2]][m[3]], true
	}
	if m := member.FindStringSubmatch(c); m != nil {
		return n.members[m[1]][m[2]], true
	}
	if path.MatchString(c) {
		if !strings.Contains(strings.TrimSuffix(c, "/"), "/") {
			return n.files[c] || exists(filepath.Join(root, c)), true
		}
		return exists(filepath.Join(root, c)), true
	}
	return false, false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
