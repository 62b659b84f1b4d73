package podman

import (
	"strings"
	"testing"

	"github.com/pkg/errors"
)

// The start failures that every container on a misconfigured host meets name their fix; any
// other failure is passed on untouched.
func TestStartFailuresFromTheHostNameTheirFix(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string // a part of the fix, or "" for none
	}{
		{nil, ""},
		{errors.New("no such container"), ""},
		{errors.New("Error response from daemon: crun: error setting rlimit type 7: operation not permitted: OCI runtime error"), "default_ulimits"},
		{errors.New("Error response from daemon: crun: cgroups in hybrid mode not supported, drop all controllers from cgroupv2: OCI runtime error"), `runtime = "runc"`},
	} {
		fix := startFailureFix(c.err)
		switch {
		case c.want == "" && fix != "":
			t.Errorf("%v: named a fix %q, want none", c.err, fix)
		case c.want != "" && !strings.Contains(fix, c.want):
			t.Errorf("%v: fix %q does not name %q", c.err, fix, c.want)
		case c.want != "" && !strings.Contains(fix, "hack/ensure-podman.sh"):
			t.Errorf("%v: fix %q does not name the script that applies it", c.err, fix)
		}
	}
}
