package podman

import (
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

func TestAddressRangesBecomeLeaseRanges(t *testing.T) {
	for _, c := range []struct {
		spec       container.NetworkSpec
		start, end string
	}{
		{container.NetworkSpec{Subnet: "10.89.0.0/24", IPRange: "10.89.0.128/25"}, "10.89.0.128", "10.89.0.254"},
		{container.NetworkSpec{Subnet: "10.89.0.0/16", IPRange: "10.89.0.0/17"}, "10.89.0.1", "10.89.127.255"},
		{container.NetworkSpec{Subnet: "fd00:89::/64", IPRange: "fd00:89:0:0:8000::/65"}, "fd00:89:0:0:8000::", "fd00:89::ffff:ffff:ffff:fffe"},
	} {
		sn, err := subnet(c.spec.Subnet, c.spec.Gateway, c.spec.IPRange)
		if err != nil {
			t.Fatal(err)
		}
		if sn.LeaseRange == nil || sn.LeaseRange.StartIP != c.start || sn.LeaseRange.EndIP != c.end {
			t.Errorf("%s in %s: lease range %+v, want %s-%s", c.spec.IPRange, c.spec.Subnet, sn.LeaseRange, c.start, c.end)
		}
	}
	if _, err := subnet("10.89.0.0/24", "", "nonsense"); err == nil {
		t.Error("a malformed range was accepted")
	}
}
