package container

import (
	"net/netip"
	"testing"
)

func TestLeaseRange(t *testing.T) {
	for _, c := range []struct{ subnet, ipRange, first, last string }{
		{"10.89.0.0/24", "10.89.0.128/25", "10.89.0.128", "10.89.0.254"},
		{"10.89.0.0/16", "10.89.0.0/17", "10.89.0.1", "10.89.127.255"},
		{"172.18.0.0/16", "172.18.64.0/18", "172.18.64.0", "172.18.127.255"},
	} {
		first, last := LeaseRange(netip.MustParsePrefix(c.subnet), netip.MustParsePrefix(c.ipRange))
		if first.String() != c.first || last.String() != c.last {
			t.Errorf("%s in %s: %s-%s, want %s-%s", c.ipRange, c.subnet, first, last, c.first, c.last)
		}
	}
}
