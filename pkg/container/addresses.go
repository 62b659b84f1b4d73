package container

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/pkg/errors"
)

// LeaseRange is the first and last address engines may hand out from a network's IPRange
// (NetworkSpec): the range's own addresses, less the subnet's network and broadcast addresses.
// For engines whose address management takes a start and an end instead of a CIDR.
func LeaseRange(subnet, ipRange netip.Prefix) (first, last netip.Addr) {
	subnet, ipRange = subnet.Masked(), ipRange.Masked()
	first, last = ipRange.Addr(), lastAddr(ipRange)
	if first == subnet.Addr() {
		first = first.Next()
	}
	if last == lastAddr(subnet) {
		last = last.Prev()
	}
	return first, last
}

// lastAddr is the last address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.As16()
	for bit := 128 - a.BitLen() + p.Bits(); bit < 128; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	if a.Is4() {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}

// SubnetPool is address space an engine carves the subnets of networks created without one
// from: Base cut into prefixes of Bits bits, in address order.
type SubnetPool struct {
	Base netip.Prefix
	Bits int
}

// String is the pool as "BASE in /BITS".
func (p SubnetPool) String() string { return fmt.Sprintf("%s in /%d", p.Base.Masked(), p.Bits) }

// DockerSubnetPools are Docker's default address pools for local networks as an engine takes
// them for new networks, then the rest of private address space (RFC 1918) in /20s: the /16s
// 172.18.0.0/16 to 172.31.0.0/16 (172.17.0.0/16 is the default bridge's), then the /20s of
// 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16, over 4,000 subnets in all. Half of a /20
// holds a thousand fixed addresses.
func DockerSubnetPools() []SubnetPool {
	return []SubnetPool{
		{Base: netip.MustParsePrefix("172.18.0.0/15"), Bits: 16},
		{Base: netip.MustParsePrefix("172.20.0.0/14"), Bits: 16},
		{Base: netip.MustParsePrefix("172.24.0.0/13"), Bits: 16},
		{Base: netip.MustParsePrefix("10.0.0.0/8"), Bits: 20},
		{Base: netip.MustParsePrefix("172.16.0.0/12"), Bits: 20},
		{Base: netip.MustParsePrefix("192.168.0.0/16"), Bits: 20},
	}
}

// FreeSubnet is the first subnet of the pools, taken in order, that overlaps none of the taken
// prefixes; when none is left, an error naming the pools. A taken prefix of zero bits (a
// default route) takes the whole family: callers leave out what must not count. Its time grows
// with the number of taken prefixes, not with the number of subnets it passes over.
func FreeSubnet(pools []SubnetPool, taken []netip.Prefix) (netip.Prefix, error) {
	spans := mergedSpans(taken)
	for _, pool := range pools {
		base := pool.Base.Masked()
		if pool.Bits < base.Bits() || pool.Bits > base.Addr().BitLen() {
			return netip.Prefix{}, errors.Errorf("subnet pool %s: /%d subnets do not fit", base, pool.Bits)
		}
		for cand := netip.PrefixFrom(base.Addr(), pool.Bits); cand.IsValid() && base.Contains(cand.Addr()); {
			s, overlaps := spanOver(spans, cand)
			if !overlaps {
				return cand, nil
			}
			// Jump past the taken span: to the subnet after the one holding its last address.
			next := lastAddr(netip.PrefixFrom(s.last.addr(), pool.Bits)).Next()
			if !next.IsValid() {
				break
			}
			cand = netip.PrefixFrom(next, pool.Bits)
		}
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.String())
	}
	return netip.Prefix{}, errors.Errorf("no free subnet left in %s", strings.Join(names, ", "))
}

// key is an address as a number that sorts IPv4 before IPv6 (and holds no pointer, so sorting
// thousands stays cheap).
type key struct {
	v6     bool
	hi, lo uint64
}

func keyOf(a netip.Addr) key {
	b := a.As16()
	return key{v6: !a.Is4(), hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func (k key) addr() netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	if !k.v6 {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}

func (k key) compare(o key) int {
	switch {
	case k.v6 != o.v6:
		return cmp.Compare(boolInt(k.v6), boolInt(o.v6))
	case k.hi != o.hi:
		return cmp.Compare(k.hi, o.hi)
	}
	return cmp.Compare(k.lo, o.lo)
}

// next is the key after k within its family; false past the family's last address.
func (k key) next() (key, bool) {
	n := k
	n.lo++
	if n.lo == 0 {
		n.hi++
	}
	if (!k.v6 && n.lo == 1<<48) || (n.hi == 0 && n.lo == 0) { // past 255.255.255.255 (::ffff:0:0/96), or ffff:...:ffff
		return n, false
	}
	return n, true
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// span is a range of addresses, first to last.
type span struct{ first, last key }

// mergedSpans are the prefixes as sorted, disjoint ranges of addresses.
func mergedSpans(prefixes []netip.Prefix) []span {
	spans := make([]span, 0, len(prefixes))
	for _, p := range prefixes {
		if p.IsValid() {
			spans = append(spans, span{keyOf(p.Masked().Addr()), keyOf(lastAddr(p))})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.first.compare(b.first) })
	out := spans[:0]
	for _, s := range spans {
		if n := len(out); n > 0 && out[n-1].first.v6 == s.first.v6 {
			if after, ok := out[n-1].last.next(); !ok || after.compare(s.first) >= 0 {
				if out[n-1].last.compare(s.last) < 0 {
					out[n-1].last = s.last
				}
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// spanOver is the span that overlaps the prefix, if any.
func spanOver(spans []span, p netip.Prefix) (span, bool) {
	first, last := keyOf(p.Addr()), keyOf(lastAddr(p))
	// The first span that ends at or after the prefix's first address.
	i := sort.Search(len(spans), func(i int) bool { return spans[i].last.compare(first) >= 0 })
	if i < len(spans) && spans[i].first.compare(last) <= 0 {
		return spans[i], true
	}
	return span{}, false
}
