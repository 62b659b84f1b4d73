// Package ci decides what a test does when something it needs is missing. On a developer's host
// it skips and says what to run; in CI (the CI environment variable set, as .ci/run sets it) it
// fails, so a test that CI selects either runs or fails, and never passes by skipping.
package ci

import (
	"fmt"
	"os"
	"testing"
)

// Running reports whether the tests run in CI.
func Running() bool { return os.Getenv("CI") != "" }

// Missing ends a test that cannot run: it fails in CI and skips elsewhere, with a banner on
// standard error besides the skip message. msg says what is missing and what provides it.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Running() {
		t.Fatal(msg + " (in CI a test that cannot run fails)")
	}
	fmt.Fprintf(os.Stderr, "\n*** SKIPPING %s *** %s\n", t.Name(), msg)
	t.Skip(msg)
}
