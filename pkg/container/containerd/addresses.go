package containerd

import (
	"bufio"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Addresses of the runtime's networks: the subnet a network created without one gets (a free
// /24 of autoPool meeting no host address or route and no other network), and the range
// host-local allocates an attachment's address from (the network's address range or whole
// subnet, or one fixed address). host-local keeps its allocations under the network's
// directory (ipam/), so they go with the network.

// autoPool is where networks created without a subnet get one, in /24s: away from Docker's
// 172.17-31 and 192.168 pools.
var autoPool = container.SubnetPool{Base: netip.MustParsePrefix("10.210.0.0/16"), Bits: 24}

// freeSubnet picks a /24 of autoPool used by no network of the runtime, no host address and no
// host route (a default route excepted: it overlaps everything).
func (r *Runtime) freeSubnet() (netip.Prefix, error) {
	host, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	nets, err := r.listNetworkRecords()
	if err != nil {
		return netip.Prefix{}, err
	}
	taken := make([]netip.Prefix, 0, len(host)+len(nets))
	for _, p := range host {
		if p.Bits() > 0 {
			taken = append(taken, p)
		}
	}
	for _, n := range nets {
		if p, err := netip.ParsePrefix(n.Subnet); err == nil {
			taken = append(taken, p)
		}
	}
	return container.FreeSubnet([]container.SubnetPool{autoPool}, taken)
}

// hostPrefixes are the host's IPv4 interface networks and routes.
func hostPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, errors.Wrap(err, "listing the host's addresses")
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			out = append(out, p.Masked())
		}
	}
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return out, nil // routes are a refinement
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 8 || fields[0] == "Iface" {
			continue
		}
		dst, err1 := strconv.ParseUint(fields[1], 16, 32)
		mask, err2 := strconv.ParseUint(fields[7], 16, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		d, m := uint32(dst), uint32(mask) // little-endian in /proc
		addr := netip.AddrFrom4([4]byte{byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24)})
		bits := 0
		for x := m; x != 0; x &= x - 1 {
			bits++
		}
		out = append(out, netip.PrefixFrom(addr, bits).Masked())
	}
	return out, nil
}

// addressRange is host-local's range: the network's IPRange (or whole subnet), or one fixed
// address, which host-local then refuses to give twice.
func addressRange(n *networkRecord, fixed string) (map[string]any, error) {
	rng := map[string]any{"subnet": n.Subnet, "gateway": n.Gateway}
	subnet := netip.MustParsePrefix(n.Subnet)
	if fixed != "" {
		ip, err := netip.ParseAddr(fixed)
		if err != nil || !subnet.Contains(ip) {
			return nil, errors.Errorf("address %q is not in network %s's subnet %s", fixed, n.Name, n.Subnet)
		}
		rng["rangeStart"], rng["rangeEnd"] = ip.String(), ip.String()
		return rng, nil
	}
	if n.IPRange == "" {
		return rng, nil
	}
	first, last := container.LeaseRange(subnet, netip.MustParsePrefix(n.IPRange))
	rng["rangeStart"], rng["rangeEnd"] = first.String(), last.String()
	return rng, nil
}
