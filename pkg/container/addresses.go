package container

import "net/netip"

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
	b := p.Masked().Addr().AsSlice()
	for i := range b {
		switch bit := i * 8; {
		case bit >= p.Bits():
			b[i] = 0xff
		case bit+8 > p.Bits():
			b[i] |= byte(0xff >> (p.Bits() - bit))
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
