package containerd

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/pkg/netns"
	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/coreos/go-iptables/iptables"
	"github.com/pkg/errors"
	"github.com/vishvananda/netlink"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Networks are the runtime's own: containerd has none. Each is a Linux bridge set up by the CNI
// bridge plugin, with host-local address management whose allocations live beside the
// network's record, so removing the network forgets them.

// autoPool is where networks created without a subnet get one: away from Docker's 172.17-31
// and 192.168 pools.
var autoPool = netip.MustParsePrefix("10.210.0.0/16")

// networkRecord is a network as the runtime keeps it.
type networkRecord struct {
	ID      string            `json:"id"`
	Name    string            `json:"name"`
	Labels  map[string]string `json:"labels,omitempty"`
	Subnet  string            `json:"subnet"`
	Gateway string            `json:"gateway"`
	IPRange string            `json:"ipRange,omitempty"`
	Bridge  string            `json:"bridge"`
}

func (r *Runtime) networkDir(name string) string {
	return filepath.Join(r.opts.StateDir, "networks", name)
}

func (r *Runtime) loadNetwork(name string) (*networkRecord, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return nil, notFound("network %q", name)
	}
	b, err := os.ReadFile(filepath.Join(r.networkDir(name), "network.json"))
	if err != nil {
		return nil, wrap(err, "network %s", name)
	}
	var n networkRecord
	return &n, errors.Wrapf(json.Unmarshal(b, &n), "decoding network %s", name)
}

func (r *Runtime) listNetworkRecords() ([]*networkRecord, error) {
	entries, err := os.ReadDir(filepath.Join(r.opts.StateDir, "networks"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrap(err, "listing networks")
	}
	var out []*networkRecord
	for _, e := range entries {
		if n, err := r.loadNetwork(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CreateNetwork creates a bridge network. Without a subnet, a free /24 of 10.210.0.0/16 that
// meets no host route or address and no other network of the runtime is chosen.
func (r *Runtime) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	if spec.WantsIPv6() {
		return errors.Errorf("network %s: IPv6 networks are not supported by the containerd runtime", spec.Name)
	}
	if spec.Name == "" || strings.ContainsAny(spec.Name, "/\x00") || spec.Name == "." || spec.Name == ".." {
		return errors.Errorf("invalid network name %q", spec.Name)
	}
	defer r.lock()()
	if _, err := r.loadNetwork(spec.Name); err == nil {
		return errors.Errorf("network %s already exists", spec.Name)
	}
	n, err := r.networkFromSpec(spec)
	if err != nil {
		return errors.Wrapf(err, "network %s", spec.Name)
	}
	if err := forwardBridgedFrames(n.Bridge, true); err != nil {
		return errors.Wrapf(err, "network %s", spec.Name)
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "encoding network %s", spec.Name)
	}
	dir := r.networkDir(spec.Name)
	if err := os.MkdirAll(filepath.Join(dir, "ipam"), 0o700); err != nil {
		return errors.Wrapf(err, "creating %s", dir)
	}
	return writeFileAtomic(filepath.Join(dir, "network.json"), b, 0o600)
}

func (r *Runtime) networkFromSpec(spec container.NetworkSpec) (*networkRecord, error) {
	id := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return nil, errors.Wrap(err, "generating an ID")
	}
	sum := sha256.Sum256([]byte(spec.Name))
	n := &networkRecord{ID: hex.EncodeToString(id), Name: spec.Name, Labels: spec.Labels, Bridge: "dy-" + hex.EncodeToString(sum[:])[:10]}
	var subnet netip.Prefix
	var err error
	if spec.Subnet == "" {
		if subnet, err = r.freeSubnet(); err != nil {
			return nil, err
		}
	} else if subnet, err = netip.ParsePrefix(spec.Subnet); err != nil || !subnet.Addr().Is4() {
		return nil, errors.Errorf("subnet %q is not an IPv4 CIDR", spec.Subnet)
	}
	subnet = subnet.Masked()
	n.Subnet = subnet.String()
	n.Gateway = subnet.Addr().Next().String()
	if spec.Gateway != "" {
		gw, err := netip.ParseAddr(spec.Gateway)
		if err != nil || !subnet.Contains(gw) {
			return nil, errors.Errorf("gateway %q is not an address of %s", spec.Gateway, subnet)
		}
		n.Gateway = gw.String()
	}
	if spec.IPRange != "" {
		rng, err := netip.ParsePrefix(spec.IPRange)
		if err != nil || !subnet.Contains(rng.Addr()) || rng.Bits() < subnet.Bits() {
			return nil, errors.Errorf("address range %q is not within %s", spec.IPRange, subnet)
		}
		n.IPRange = rng.Masked().String()
	}
	return n, nil
}

// freeSubnet picks a /24 of autoPool used by no network of the runtime, no host address and no
// host route.
func (r *Runtime) freeSubnet() (netip.Prefix, error) {
	taken, err := hostPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	nets, err := r.listNetworkRecords()
	if err != nil {
		return netip.Prefix{}, err
	}
	for _, n := range nets {
		if p, err := netip.ParsePrefix(n.Subnet); err == nil {
			taken = append(taken, p)
		}
	}
	base := autoPool.Addr().As4()
	for i := range 256 {
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], byte(i), 0}), 24)
		if !overlapsAny(cand, taken) {
			return cand, nil
		}
	}
	return netip.Prefix{}, errors.Errorf("no free /24 left in %s", autoPool)
}

func overlapsAny(p netip.Prefix, others []netip.Prefix) bool {
	for _, o := range others {
		if o.Bits() > 0 && p.Overlaps(o) { // a default route overlaps everything
			return true
		}
	}
	return false
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

// InspectNetwork returns a network and the containers attached to it.
func (r *Runtime) InspectNetwork(ctx context.Context, name string) (*container.Network, error) {
	n, err := r.loadNetwork(name)
	if err != nil {
		return nil, err
	}
	out := toNetwork(n)
	recs, err := r.listRecords()
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if rec.attachment(name) != nil {
			out.Containers = append(out.Containers, rec.Name)
		}
	}
	sort.Strings(out.Containers)
	return &out, nil
}

func toNetwork(n *networkRecord) container.Network {
	return container.Network{ID: n.ID, Name: n.Name, Labels: n.Labels, Subnets: []string{n.Subnet}, Gateways: []string{n.Gateway}}
}

// ListNetworks returns the networks carrying the labels.
func (r *Runtime) ListNetworks(ctx context.Context, labels map[string]string) ([]container.Network, error) {
	nets, err := r.listNetworkRecords()
	if err != nil {
		return nil, err
	}
	out := []container.Network{}
	for _, n := range nets {
		if container.MatchLabels(n.Labels, labels) {
			out = append(out, toNetwork(n))
		}
	}
	return out, nil
}

// RemoveNetwork removes a network that no container is attached to, with its bridge, and tells
// event subscribers.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	defer r.lock()()
	n, err := r.loadNetwork(name)
	if errors.Is(err, container.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	recs, err := r.listRecords()
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.attachment(name) != nil {
			return errors.Errorf("network %s has active endpoints (container %s)", name, rec.Name)
		}
	}
	if link, err := netlink.LinkByName(n.Bridge); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			return errors.Wrapf(err, "deleting bridge %s of network %s", n.Bridge, name)
		}
	}
	if err := removeIsolationRules(n.Bridge); err != nil {
		return errors.Wrapf(err, "network %s", name)
	}
	if err := forwardBridgedFrames(n.Bridge, false); err != nil {
		return errors.Wrapf(err, "network %s", name)
	}
	if err := os.RemoveAll(r.networkDir(name)); err != nil {
		return errors.Wrapf(err, "removing network %s", name)
	}
	return r.publishNetworkDestroy(ctx, name)
}

// forwardBridgedFrames adds (or removes) a rule letting a bridge forward frames between its own
// ports. The firewall plugin accepts traffic from and to the containers' own addresses only;
// where the FORWARD policy is DROP (Docker sets it) and bridged frames go through iptables
// (br_netfilter), pods routed between nodes by their pod addresses (flannel host-gw) were
// dropped. Traffic from one bridge to another is routed, not bridged, so isolation holds. The
// rule lives in CNI-ADMIN, the plugin's chain for administrators' rules.
func forwardBridgedFrames(bridge string, add bool) error {
	ipt, err := iptables.New()
	if err != nil {
		return errors.Wrap(err, "iptables")
	}
	rule := []string{"-i", bridge, "-o", bridge, "-m", "physdev", "--physdev-is-bridged",
		"-m", "comment", "--comment", "dockyard: " + bridge + " forwards its own frames", "-j", "ACCEPT"}
	exists, err := ipt.ChainExists("filter", adminChain)
	if err != nil {
		return errors.Wrap(err, "iptables")
	}
	if !add {
		if !exists {
			return nil
		}
		return errors.Wrapf(ipt.DeleteIfExists("filter", adminChain, rule...), "deleting the forwarding rule of bridge %s", bridge)
	}
	if !exists {
		if err := ipt.NewChain("filter", adminChain); err != nil {
			return errors.Wrapf(err, "creating chain %s", adminChain)
		}
	}
	return errors.Wrapf(ipt.AppendUnique("filter", adminChain, rule...), "letting bridge %s forward its own frames", bridge)
}

// adminChain is the firewall plugin's chain for administrators' rules, jumped to before its own.
const adminChain = "CNI-ADMIN"

// isolationComment marks the firewall plugin's bridge isolation rules.
const isolationComment = "CNI firewall plugin rules (ingressPolicy: same-bridge)"

// removeIsolationRules deletes the rules the firewall plugin added for a bridge to isolate it
// (it leaves them when the last container leaves).
func removeIsolationRules(bridge string) error {
	ipt, err := iptables.New()
	if err != nil {
		return errors.Wrap(err, "iptables")
	}
	rules := map[string][]string{
		"CNI-ISOLATION-STAGE-1": {"-i", bridge, "!", "-o", bridge, "-m", "comment", "--comment", isolationComment, "-j", "CNI-ISOLATION-STAGE-2"},
		"CNI-ISOLATION-STAGE-2": {"-o", bridge, "-m", "comment", "--comment", isolationComment, "-j", "DROP"},
	}
	for chain, rule := range rules {
		if ok, err := ipt.ChainExists("filter", chain); err != nil || !ok {
			continue
		}
		if err := ipt.DeleteIfExists("filter", chain, rule...); err != nil {
			return errors.Wrapf(err, "deleting the isolation rule of bridge %s", bridge)
		}
	}
	return nil
}

// ConnectNetwork attaches a container to one more network (a new interface, eth1...) unless it
// already is. A container that never started gets the interface at once as well: its network
// namespace exists from creation.
func (r *Runtime) ConnectNetwork(ctx context.Context, network, name string) error {
	defer r.lock()()
	rec, err := r.loadRecord(name)
	if err != nil {
		return err
	}
	if _, err := r.loadNetwork(network); err != nil {
		return err
	}
	if rec.attachment(network) != nil {
		return nil
	}
	if rec.NetNS == "" {
		return errors.Errorf("container %s has the host's network or none; it cannot join %s", name, network)
	}
	if err := r.attach(ctx, rec, network, false); err != nil {
		return err
	}
	return r.saveRecord(rec)
}

// DisconnectNetwork removes a container's interface on a network.
func (r *Runtime) DisconnectNetwork(ctx context.Context, network, name string) error {
	defer r.lock()()
	rec, err := r.loadRecord(name)
	if errors.Is(err, container.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	a := rec.attachment(network)
	if a == nil {
		return nil
	}
	if err := r.detach(ctx, rec, a); err != nil {
		return err
	}
	rec.Attachments = removeAttachment(rec.Attachments, network)
	if err := r.saveRecord(rec); err != nil {
		return err
	}
	return r.refreshHosts(network)
}

func removeAttachment(as []attachment, network string) []attachment {
	out := as[:0]
	for _, a := range as {
		if a.Network != network {
			out = append(out, a)
		}
	}
	return out
}

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
