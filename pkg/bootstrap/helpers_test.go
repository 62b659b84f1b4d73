package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Constructors of expected steps.

func file(path string, mode os.FileMode, owner, group, content string) Step {
	return Step{File: &File{Path: path, Content: []byte(content), Mode: mode, Owner: owner, Group: group}}
}

func appendFile(path string, mode os.FileMode, owner, group, content string) Step {
	s := file(path, mode, owner, group, content)
	s.File.Append = true
	return s
}

// rootFile is a cloud-config file owned by root:root (write_files' default).
func rootFile(path string, mode os.FileMode, content string) Step {
	return file(path, mode, "root", "root", content)
}

func script(s string) Step {
	return Step{Command: &Command{Script: s}}
}

func args(a ...string) Step {
	return Step{Command: &Command{Args: a}}
}

// checkPlan is the property every successful plan has: every step is exactly one of a file
// with an absolute, clean path and a command with a script or arguments.
func checkPlan(t testing.TB, p *Plan) {
	t.Helper()
	if p == nil {
		t.Fatal("Parse returned a nil plan without an error")
	}
	for i, s := range p.Steps {
		switch {
		case (s.File == nil) == (s.Command == nil):
			t.Fatalf("step %d: want exactly one of File and Command, got %+v", i, s)
		case s.File != nil:
			if !filepath.IsAbs(s.File.Path) || filepath.Clean(s.File.Path) != s.File.Path || s.File.Path == "/" {
				t.Fatalf("step %d: file path %q is not a clean absolute path", i, s.File.Path)
			}
			if s.File.Mode&^(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
				t.Fatalf("step %d: file mode %v has bits that are not permission bits", i, s.File.Mode)
			}
		case s.Command != nil:
			if strings.TrimSpace(s.Command.Script) == "" && len(s.Command.Args) == 0 {
				t.Fatalf("step %d: empty command", i)
			}
		}
	}
	for i := 1; i < len(p.Ignored); i++ {
		if p.Ignored[i-1] >= p.Ignored[i] {
			t.Fatalf("Ignored is not sorted and unique: %q", p.Ignored)
		}
	}
}

// diffPlan compares a plan with the expected steps and ignored parts, showing file contents as
// text.
func diffPlan(got *Plan, steps []Step, ignored []string) string {
	want := &Plan{Steps: steps, Ignored: ignored}
	return cmp.Diff(want, got, cmp.Transformer("content", func(b []byte) string { return string(b) }))
}

func mustParse(t *testing.T, format Format, data string, opts Options) *Plan {
	t.Helper()
	p, err := Parse(format, []byte(data), opts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checkPlan(t, p)
	return p
}

// wantError checks that Parse fails with an error containing every want, and none of the
// secrets.
func wantError(t *testing.T, format Format, data string, opts Options, want []string, secrets ...string) {
	t.Helper()
	p, err := Parse(format, []byte(data), opts)
	if err == nil {
		t.Fatalf("Parse succeeded with %d steps, want an error containing %q", len(p.Steps), want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q leaks %q", err, s)
		}
	}
}
