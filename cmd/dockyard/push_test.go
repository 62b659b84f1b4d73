package main

import (
	"strings"
	"testing"
)

// What push images and --image-registry refuse is said before any engine or registry is asked.
func TestImageRegistryRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"push", "images"}, "--image-registry names the registry path"},
		{[]string{"push", "images", "--image-registry", "localhost:5001/dockyard", "--images", "kind"}, "only Dockyard's own images"},
		{[]string{"create", "management", "--image-registry", "localhost:5001/dockyard", "--images", "kind"}, "not kind's"},
	} {
		root := newRootCommand()
		root.SetArgs(append([]string{"--kubeconfig-dir", t.TempDir()}, tc.args...))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dockyard %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
