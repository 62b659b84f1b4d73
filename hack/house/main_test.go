package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write makes a file of a synthetic repository.
func write(t *testing.T, root, rel, content string) {
	t.Helper()
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// An import that points up a floor is found, in code and not in tests; one that points down,
// or stays on its floor, is not.
func TestFloorsFindUpwardImports(t *testing.T) {
	root := t.TempDir()
	write(t, root, "pkg/policy/policy.go", "package policy\n")
	write(t, root, "pkg/container/runtime.go", "package container\nimport _ \""+module+"/pkg/policy\"\n")
	write(t, root, "docker/manager.go", "package docker\nimport _ \""+module+"/pkg/container\"\n")
	write(t, root, "docker/up.go", "package docker\nimport _ \""+module+"/controllers\"\n")
	write(t, root, "docker/up_test.go", "package docker\nimport _ \""+module+"/cmd/manager\"\n")
	write(t, root, "controllers/infrastructure/e.go", "package infrastructure\nimport _ \""+module+"/cmd/tools/mgmt\"\n")
	write(t, root, "pkg/bootstrap/up.go", "package bootstrap\nimport _ \""+module+"/pkg/container/inmemory\"\n")
	problems, err := floors(root)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	if len(problems) != 2 || !strings.Contains(got, "docker/up.go") || !strings.Contains(got, "pkg/bootstrap/up.go") {
		t.Errorf("upward imports found:\n%s\nwant docker/up.go's and pkg/bootstrap/up.go's", got)
	}
}

// The node layer's bounds: exported names and the node handle's verbs.
func TestNodeLayerBounds(t *testing.T) {
	root := t.TempDir()
	var src strings.Builder
	src.WriteString("package docker\nimport \"context\"\ntype Node struct{}\n")
	for i := range maxNodeVerbs + 1 {
		src.WriteString("func (n *Node) Verb" + string(rune('A'+i)) + "(ctx context.Context) {}\n")
	}
	src.WriteString("func (n *Node) Question() bool { return true }\n")
	for i := range maxNodeLayerNames {
		src.WriteString("const Name" + strings.Repeat("x", i+1) + " = 1\n")
	}
	write(t, root, "docker/node.go", src.String())
	write(t, root, "docker/internal/runner/r.go", "package runner\nconst Hidden = 1\n")
	problems, err := nodeLayer(root)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	if len(problems) != 2 || !strings.Contains(got, "exports 60 names") || !strings.Contains(got, "13 verbs") {
		t.Errorf("problems:\n%s\nwant 60 names (the internal package's not counted) and 13 verbs", got)
	}
}

// A long function of the shipped code is refused, one in a test or under test/ counted only.
func TestFunctionLengths(t *testing.T) {
	root := t.TempDir()
	long := "func long() {\n" + strings.Repeat("\t_ = 1\n", maxFunctionLines-1) + "}\n"
	write(t, root, "controllers/c.go", "package controllers\n"+long)
	write(t, root, "controllers/c_test.go", "package controllers\n"+strings.Replace(long, "long", "longTest", 1))
	write(t, root, "test/x/x.go", "package x\n"+long)
	write(t, root, "docker/ok.go", "package docker\nfunc ok() {\n"+strings.Repeat("\t_ = 1\n", maxFunctionLines-2)+"}\n")
	problems, err := functionLengths(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "controllers/c.go:2: long is 81 lines") {
		t.Errorf("problems %q, want controllers/c.go's long only", problems)
	}
}

// docs/architecture.md cites only code that exists; a citation of what does not is found.
func TestArchitectureCitesWhatTheCodeHas(t *testing.T) {
	problems, err := docs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	root := t.TempDir()
	write(t, root, "docker/node.go", "package docker\ntype Node struct{ Name string }\nfunc (n *Node) Start() {}\n")
	write(t, root, "docs/architecture.md", "`docker.Node`, `Node.Start`, `Node.Name`, `docker/node.go`, `docker.Gone`, `Node.Stop`, "+
		"`docker/gone.go`, `kubectl get pods`, `--flag`\n")
	problems, err = docs(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(problems, "\n"); len(problems) != 3 || !strings.Contains(got, "docker.Gone") || !strings.Contains(got, "Node.Stop") || !strings.Contains(got, "docker/gone.go") {
		t.Errorf("problems:\n%s\nwant docker.Gone, Node.Stop and docker/gone.go", got)
	}
}
