package framework

import (
	"slices"
	"testing"
)

// A plane's manager leaves the engine's host alone unless asked: tests that start planes run
// beside other packages' engine tests, whose cluster networks a guarding manager would close to
// the host (TestAWorkloadNodeReachesOnlyTheHostPortsOpenedToIt failed so in CI). Flags the
// caller gives come after and win.
func TestDockyardManagerGuardsTheHostOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"default", Options{DockyardArgs: []string{"--watch-filter=a"}}, []string{"--guard-engine-host=false", "--watch-filter=a"}},
		{"asked", Options{GuardEngineHost: true}, []string{"--guard-engine-host=true"}},
		{"caller's flag last", Options{DockyardArgs: []string{"--guard-engine-host=true"}}, []string{"--guard-engine-host=false", "--guard-engine-host=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.opts.dockyardManagerArgs(); !slices.Equal(got, tc.want) {
				t.Errorf("manager flags %q, want %q", got, tc.want)
			}
		})
	}
}
