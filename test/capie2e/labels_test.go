package capie2e

import (
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

// The suite's own filters, with the privileged specs taken out, still select what they
// selected otherwise.
func TestWithoutLabel(t *testing.T) {
	kubetest := []string{"full", "privileged"}
	upgrade := []string{"full"}
	quickStart := []string{"blocking"}
	scale := []string{"inmemory"}
	for _, tc := range []struct {
		filter string
		want   map[string]bool
	}{
		{"", map[string]bool{"kubetest": false, "upgrade": true, "quickStart": true, "scale": true}},
		{"blocking", map[string]bool{"kubetest": false, "upgrade": false, "quickStart": true, "scale": false}},
		{"!kubernetes", map[string]bool{"kubetest": false, "upgrade": true, "quickStart": true, "scale": true}},
		{"inmemory || full", map[string]bool{"kubetest": false, "upgrade": true, "quickStart": false, "scale": true}},
	} {
		filter, err := types.ParseLabelFilter(WithoutLabel(tc.filter, "privileged"))
		if err != nil {
			t.Fatalf("%q: %v", tc.filter, err)
		}
		for name, labels := range map[string][]string{"kubetest": kubetest, "upgrade": upgrade, "quickStart": quickStart, "scale": scale} {
			if got := filter(labels); got != tc.want[name] {
				t.Errorf("filter %q without privileged selects %s (%v): %v, want %v", tc.filter, name, labels, got, tc.want[name])
			}
		}
	}
}
