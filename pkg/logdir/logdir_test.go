package logdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pkg/errors"
)

func openLogDir(t *testing.T, path string, overwrite bool) *Dir {
	t.Helper()
	d, err := Open(path, overwrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A link that appears after the directory was opened (another process racing the collection)
// is refused, not followed, without --overwrite.
func TestLogDirRefusesALinkMadeWhileWriting(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	victim := filepath.Join(elsewhere, "shadow")
	if err := os.WriteFile(victim, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := openLogDir(t, dir, false)
	if err := os.Symlink(elsewhere, filepath.Join(dir, "node")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "journal.log")); err != nil {
		t.Fatal(err)
	}
	if d, err := out.Dir("node"); err == nil {
		d.Close()
		t.Error("a directory link was opened")
	}
	if err := out.WriteFile("journal.log", []byte("x")); err == nil {
		t.Error("a file link was written")
	}
	if got, _ := os.ReadFile(victim); string(got) != "root:x:0:0" {
		t.Errorf("the link's target was written: %q", got)
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		if err := out.WriteFile(name, nil); err == nil {
			t.Errorf("WriteFile(%q) wrote", name)
		}
	}
}

// A directory opened through a link (the link swapped in after Lstat saw a directory) is not
// the one Lstat saw: refused.
func TestLogDirRefusesADirectoryOtherThanTheOneSeen(t *testing.T) {
	dir := t.TempDir()
	out := openLogDir(t, dir, false)
	seen, err := out.Dir("seen")
	if err != nil {
		t.Fatal(err)
	}
	defer seen.Close()
	opened, err := out.Dir("opened")
	if err != nil {
		t.Fatal(err)
	}
	defer opened.Close()
	fi, err := os.Lstat(filepath.Join(dir, "seen"))
	if err != nil {
		t.Fatal(err)
	}
	if err := opened.check(fi); err == nil || !strings.Contains(err.Error(), "not written through") {
		t.Errorf("another directory than the one seen: %v", err)
	}
	if err := seen.check(fi); err != nil {
		t.Errorf("the directory seen: %v", err)
	}
}

// An existing directory must be empty unless overwriting: then files of the same names are
// replaced and the others kept.
func TestOpenLogDirRefusesANonEmptyDirectoryUnlessOverwriting(t *testing.T) {
	dir := t.TempDir()
	openLogDir(t, dir, false) // empty: fine
	d := openLogDir(t, filepath.Join(dir, "new"), false)
	if err := d.WriteFile("console.log", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new", "mine.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(dir, "new"), false)
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "console.log") {
		t.Fatalf("a non-empty directory: %v", err)
	}
	d = openLogDir(t, filepath.Join(dir, "new"), true)
	if err := d.WriteFile("console.log", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, dir, "new/console.log"); got != "second" {
		t.Errorf("console.log after overwriting: %q", got)
	}
	if got := read(t, dir, "new/mine.txt"); got != "mine" {
		t.Errorf("another file after overwriting: %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(dir, "file"), true); err == nil {
		t.Error("a file was taken for a log directory")
	}
}
