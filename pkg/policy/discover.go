package policy

import (
	"context"
	"net/netip"

	"github.com/pkg/errors"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SubnetsFunc returns the subnets in use at the time of the call, which clusters' subnets must
// not overlap.
type SubnetsFunc func(ctx context.Context) ([]netip.Prefix, error)

// ManagementClusterSubnets returns what the management cluster the manager runs in uses of the
// address space: its Service ranges (ServiceCIDRs) and its Nodes' pod ranges. A workload
// cluster's network on one of them would take that traffic away from the management cluster
// (its nodes join every cluster network). An API the cluster does not serve gives nothing.
func ManagementClusterSubnets(ctx context.Context, c client.Reader) ([]netip.Prefix, error) {
	var out []netip.Prefix
	add := func(cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			out = append(out, p.Masked())
		}
	}
	cidrs := &networkingv1.ServiceCIDRList{}
	switch err := c.List(ctx, cidrs); {
	case err == nil:
		for _, sc := range cidrs.Items {
			for _, cidr := range sc.Spec.CIDRs {
				add(cidr)
			}
		}
	case !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err):
		return nil, errors.Wrap(err, "listing the management cluster's ServiceCIDRs")
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return nil, errors.Wrap(err, "listing the management cluster's Nodes")
	}
	for _, n := range nodes.Items {
		for _, cidr := range n.Spec.PodCIDRs {
			add(cidr)
		}
	}
	return out, nil
}

// Routes returns the destinations the network namespace of the calling process routes, but
// its default routes and what is special-purpose anyway (loopback, link-local, multicast):
// for a manager on the engine's host, the host's own networks.
func Routes() ([]netip.Prefix, error) {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, errors.Wrap(err, "listing the routes")
	}
	var out []netip.Prefix
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		addr, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		bits, _ := r.Dst.Mask.Size()
		p := netip.PrefixFrom(addr.Unmap(), bits).Masked()
		if bits == 0 || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() || p.Addr().IsMulticast() {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}
