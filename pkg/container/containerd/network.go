package containerd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pkg/errors"
	"github.com/vishvananda/netlink"

	"github.com/dockyard-dev/dockyard/pkg/container"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

// Networks are the runtime's own: containerd has none. Each is a Linux bridge set up by the CNI
// bridge plugin, with host-local address management whose allocations live beside the
// network's record, so removing the network forgets them.
//
// This file holds the network record and the Runtime's network methods (create, inspect, list,
// remove, connect, disconnect). cni.go adds and deletes containers' interfaces through CNI,
// addresses.go chooses subnets and address ranges, firewall.go keeps the iptables rules the
// runtime manages beside the firewall plugin's.

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
	return fileutil.WriteAtomic(filepath.Join(dir, "network.json"), b, 0o600)
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
	return container.Network{ID: n.ID, Name: n.Name, Labels: n.Labels, Subnets: []string{n.Subnet}, Gateways: []string{n.Gateway}, Interface: n.Bridge}
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
