package containerd

import (
	"slices"
	"testing"
)

func TestMergeEnvReplacesByName(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "A=1"}, []string{"A=2", "B=3", "PATH=/usr/bin"})
	want := []string{"PATH=/usr/bin", "A=2", "B=3"}
	if !slices.Equal(got, want) {
		t.Errorf("mergeEnv: %v, want %v", got, want)
	}
}
