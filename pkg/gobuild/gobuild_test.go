package gobuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGo is a go command that resolves nothing and "builds" a binary in 300 ms, writing a line
// to $BUILDS for each build.
const fakeGo = `#!/bin/sh
[ "$1" = build ] || exit 0
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
echo build >>"$BUILDS"
sleep 0.3
echo binary >"$out"
`

// Two processes needing the same binaries at once (make targets run side by side) build them
// once: the second waits for the first and finds them built.
func TestRunBuildsOnceWhenRunTwiceAtOnce(t *testing.T) {
	dir := t.TempDir()
	goTool := filepath.Join(dir, "go")
	if err := os.WriteFile(goTool, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	builds := filepath.Join(dir, "builds")
	t.Setenv("BUILDS", builds)
	build := Build{Name: "tool", Version: "v1", Require: map[string]string{"example.com/tool": "v1.0.0"},
		Binaries: []Binary{{Name: "tool", Package: "example.com/tool/cmd/tool"}}}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			// Separate builders, as in two processes.
			b := &Builder{CacheDir: filepath.Join(dir, "cache"), GoCommand: goTool}
			_, errs[i] = b.Run(context.Background(), build)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	out, err := os.ReadFile(builds)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "build"); n != 1 {
		t.Errorf("the binary was built %d times, want once", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "cache", "tool-v1", "bin", "tool")); err != nil {
		t.Errorf("the binary is not in the cache: %v", err)
	}
}

// A lock another holder keeps is waited for until the context ends, and then given up with
// the lock named; released, it is taken.
func TestLockWaitsUntilTheContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "build.lock")
	unlock, err := Lock(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	waited := false
	if _, err := Lock(ctx, path, func(string) { waited = true }); err == nil || !strings.Contains(err.Error(), path) || !waited {
		t.Fatalf("a held lock: got %v (told to wait: %t), want a wait, then an error naming %s", err, waited, path)
	}
	unlock()
	again, err := Lock(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("a released lock: %v", err)
	}
	again()
}
