package container

import (
	"net/netip"
	"slices"
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

func TestFreeSubnet(t *testing.T) {
	prefixes := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	docker := DockerSubnetPools()
	for _, c := range []struct {
		name  string
		pools []SubnetPool
		taken []netip.Prefix
		want  string
	}{
		{"an engine with no network", docker, nil, "172.18.0.0/16"},
		{"the next /16", docker, prefixes("172.18.0.0/16"), "172.19.0.0/16"},
		{"a taken /24 takes its /16", docker, prefixes("172.18.0.0/16", "172.19.3.0/24"), "172.20.0.0/16"},
		{"the last /16, then /20s of 10/8", docker, prefixes("172.18.0.0/15", "172.20.0.0/14", "172.24.0.0/13"), "10.0.0.0/20"},
		{"past what overlaps", docker, prefixes("172.18.0.0/15", "172.20.0.0/14", "172.24.0.0/13", "10.0.0.0/20", "10.0.16.0/24", "10.0.33.7/32"), "10.0.48.0/20"},
		{"10/8 full, the rest of 172.16/12", docker, prefixes("172.18.0.0/15", "172.20.0.0/14", "172.24.0.0/13", "10.0.0.0/8"), "172.16.0.0/20"},
		{"172.17 taken by the bridge", docker, prefixes("172.16.0.0/16", "172.17.0.0/16", "172.18.0.0/15", "172.20.0.0/14", "172.24.0.0/13", "10.0.0.0/8"), "192.168.0.0/20"},
		{"another family does not count", docker, prefixes("fd00::/8", "::/0"), "172.18.0.0/16"},
		{"a pool of /24s", []SubnetPool{{netip.MustParsePrefix("10.210.0.0/16"), 24}}, prefixes("10.210.0.0/24", "10.210.1.128/25", "10.0.0.0/16"), "10.210.2.0/24"},
		{"a host route inside the pool", []SubnetPool{{netip.MustParsePrefix("10.210.0.0/16"), 24}}, prefixes("10.210.0.0/23", "10.210.0.0/17"), "10.210.128.0/24"},
	} {
		got, err := FreeSubnet(c.pools, c.taken)
		if err != nil || got.String() != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}

func TestFreeSubnetNoneLeft(t *testing.T) {
	pools := []SubnetPool{{netip.MustParsePrefix("10.210.0.0/16"), 24}, {netip.MustParsePrefix("192.168.0.0/23"), 24}}
	taken := []netip.Prefix{netip.MustParsePrefix("10.210.0.0/16"), netip.MustParsePrefix("192.168.0.0/24"), netip.MustParsePrefix("192.168.1.0/24")}
	_, err := FreeSubnet(pools, taken)
	if err == nil || err.Error() != "no free subnet left in 10.210.0.0/16 in /24, 192.168.0.0/23 in /24" {
		t.Errorf("%v, want an error naming both pools", err)
	}
	if _, err := FreeSubnet(pools, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}); err == nil {
		t.Error("a default route taken leaves nothing, yet a subnet was found")
	}
	if _, err := FreeSubnet([]SubnetPool{{netip.MustParsePrefix("10.0.0.0/16"), 8}}, nil); err == nil {
		t.Error("/8 subnets of a /16 pool were accepted")
	}
}

// Every subnet of the default pools is given once, in order, each private and apart from the
// others, until none is left.
func TestFreeSubnetExhaustsTheDockerPools(t *testing.T) {
	var taken []netip.Prefix
	for {
		p, err := FreeSubnet(DockerSubnetPools(), taken)
		if err != nil {
			break
		}
		taken = append(taken, p)
	}
	slices.SortFunc(taken, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for i := 1; i < len(taken); i++ {
		if taken[i-1].Overlaps(taken[i]) || !private(taken[i]) {
			t.Errorf("%s overlaps %s, or is not private", taken[i], taken[i-1])
		}
	}
	// 14 /16s; 4,096 /20s of 10/8; 256 of 172.16/12 less the 224 in the /16s; 16 of 192.168/16.
	if want := 14 + 4096 + 256 - 224 + 16; len(taken) != want {
		t.Errorf("%d subnets, want %d", len(taken), want)
	}
}

func private(p netip.Prefix) bool {
	for _, s := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} {
		if s := netip.MustParsePrefix(s); s.Bits() <= p.Bits() && s.Contains(p.Addr()) {
			return true
		}
	}
	return false
}
