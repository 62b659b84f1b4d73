package containerd

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/pkg/netns"
	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/pkg/errors"
	"github.com/vishvananda/netlink"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A container's interfaces through CNI: its network namespace (created with loopback up), the
// CNI configuration list rendered per attachment (bridge, host-local, portmap, firewall), the
// plugins' invocation to add an interface (attach) and delete it (detach, and detachGone for
// an interface whose namespace a reboot took), and the port mappings passed to portmap.

// attach adds an interface on network to the container's namespace through CNI and records it.
// The primary network carries the default route, the fixed address and the published ports.
func (r *Runtime) attach(ctx context.Context, rec *record, network string, primary bool) error {
	n, err := r.loadNetwork(network)
	if err != nil {
		return err
	}
	a := attachment{Network: network, IfName: nextIfName(rec), Primary: primary}
	fixed := ""
	if primary {
		fixed = rec.IPv4Address
	}
	if a.Config, err = r.confList(n, primary, fixed); err != nil {
		return err
	}
	list, err := libcni.ConfListFromBytes(a.Config)
	if err != nil {
		return errors.Wrapf(err, "network %s: CNI configuration", network)
	}
	rt := r.cniRuntimeConf(rec, a)
	res, err := r.cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		_ = r.cni.DelNetworkList(context.WithoutCancel(ctx), list, rt)
		return errors.Wrapf(err, "attaching container %s to network %s", rec.Name, network)
	}
	cur, err := types100.NewResultFromResult(res)
	if err != nil {
		return errors.Wrapf(err, "reading the CNI result of container %s on %s", rec.Name, network)
	}
	for _, ip := range cur.IPs {
		if ip.Address.IP.To4() != nil && a.IPv4 == "" {
			a.IPv4 = ip.Address.IP.String()
		} else if ip.Address.IP.To4() == nil && a.IPv6 == "" {
			a.IPv6 = ip.Address.IP.String()
		}
	}
	rec.Attachments = append(rec.Attachments, a)
	return r.writeNetworkFiles(rec)
}

// detach deletes a container's interface through CNI, giving its address back.
func (r *Runtime) detach(ctx context.Context, rec *record, a *attachment) error {
	list, err := libcni.ConfListFromBytes(a.Config)
	if err != nil {
		return errors.Wrapf(err, "network %s: CNI configuration", a.Network)
	}
	rt := r.cniRuntimeConf(rec, *a)
	if _, err := os.Stat(rec.NetNS); err != nil {
		rt.NetNS = "" // plugins then only release what they hold on the host
	}
	return errors.Wrapf(r.cni.DelNetworkList(ctx, list, rt), "detaching container %s from network %s", rec.Name, a.Network)
}

// newNetNS creates a container's network namespace under runDir with its loopback interface up
// (as Docker has it; runc leaves a namespace it is given as it is).
func newNetNS(runDir string) (*netns.NetNS, error) {
	n, err := netns.NewNetNS(filepath.Join(runDir, "netns"))
	if err != nil {
		return nil, err
	}
	err = n.Do(func(cnins.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		_ = n.Remove()
		return nil, errors.Wrap(err, "bringing up the loopback interface")
	}
	return n, nil
}

// detachGone deletes an interface whose namespace is gone. The bridge plugin finds what to
// clean up (its masquerading rules) from the interface's addresses, so a stand-in interface
// with the old name and address is made in the container's new namespace first.
func (r *Runtime) detachGone(ctx context.Context, n *netns.NetNS, rec *record, a *attachment) error {
	if ip := net.ParseIP(a.IPv4); ip != nil {
		bits := 32
		if nw, err := r.loadNetwork(a.Network); err == nil {
			if p, err := netip.ParsePrefix(nw.Subnet); err == nil {
				bits = p.Bits()
			}
		}
		err := n.Do(func(cnins.NetNS) error {
			// A veth pair: kernels without modules may lack the dummy driver.
			veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a.IfName}, PeerName: "standin" + strings.TrimPrefix(a.IfName, "eth")}
			if err := netlink.LinkAdd(veth); err != nil {
				return err
			}
			link, err := netlink.LinkByName(a.IfName)
			if err != nil {
				return err
			}
			return netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, 32)}})
		})
		if err != nil {
			return errors.Wrapf(err, "container %s: standing in for interface %s", rec.Name, a.IfName)
		}
	}
	return r.detach(ctx, rec, a) // deleting the stand-in deletes its peer
}

func (r *Runtime) cniRuntimeConf(rec *record, a attachment) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{ContainerID: rec.Name, NetNS: rec.NetNS, IfName: a.IfName}
	if a.Primary && len(rec.Ports) > 0 {
		var pm []map[string]any
		for _, p := range rec.Ports {
			pm = append(pm, map[string]any{
				"hostPort": p.HostPort, "containerPort": p.ContainerPort, "protocol": protocol(p), "hostIP": p.HostIP,
			})
		}
		rt.CapabilityArgs = map[string]any{"portMappings": pm}
	}
	return rt
}

func protocol(p container.PortMapping) string {
	if p.Protocol == "" {
		return "tcp"
	}
	return p.Protocol
}

// nextIfName is the first of eth0, eth1... the container does not use.
func nextIfName(rec *record) string {
	used := map[string]bool{}
	for _, a := range rec.Attachments {
		used[a.IfName] = true
	}
	for i := 0; ; i++ {
		if name := fmt.Sprintf("eth%d", i); !used[name] {
			return name
		}
	}
}

// confList renders the CNI configuration of one attachment: a bridge with masquerading and
// hairpin, host-local addresses (the network's range, or only the fixed address), published
// ports, and firewall rules accepting the container's traffic in the FORWARD chain (whose
// policy Docker sets to DROP) while isolating the bridges from one another.
func (r *Runtime) confList(n *networkRecord, primary bool, fixed string) ([]byte, error) {
	rng, err := addressRange(n, fixed)
	if err != nil {
		return nil, err
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       n.Name,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": n.Bridge, "isGateway": true, "isDefaultGateway": primary,
				"ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "dataDir": filepath.Join(r.networkDir(n.Name), "ipam"),
					"ranges": []any{[]any{rng}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true},
			// Accept the containers' traffic in FORWARD, and drop what crosses from one of
			// the runtime's bridges to another: networks are isolated, as Docker's are.
			map[string]any{"type": "firewall", "backend": "iptables", "ingressPolicy": "same-bridge"},
		},
	}
	b, err := json.Marshal(conf)
	return b, errors.Wrapf(err, "encoding the CNI configuration of network %s", n.Name)
}
