package podman

import (
	"context"
	"net/netip"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// libpodNetwork is the part of libpod's network create request Dockyard sets.
type libpodNetwork struct {
	Name        string            `json:"name"`
	Driver      string            `json:"driver"`
	Labels      map[string]string `json:"labels,omitempty"`
	Subnets     []libpodSubnet    `json:"subnets,omitempty"`
	IPv6Enabled bool              `json:"ipv6_enabled,omitempty"`
	Options     map[string]string `json:"options,omitempty"`
}

type libpodSubnet struct {
	Subnet     string      `json:"subnet"`
	Gateway    string      `json:"gateway,omitempty"`
	LeaseRange *leaseRange `json:"lease_range,omitempty"`
}

type leaseRange struct {
	StartIP string `json:"start_ip"`
	EndIP   string `json:"end_ip"`
}

// CreateNetwork creates a bridge network through libpod: the compatible API ignores the
// "isolate" option ("not a recognized option"), and netavark routes between networks that are
// not isolated, where Docker keeps its bridges apart. An address range (IPRange) becomes
// netavark's lease range.
func (r *Runtime) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	req := libpodNetwork{
		Name: spec.Name, Driver: "bridge", Labels: spec.Labels, IPv6Enabled: spec.WantsIPv6(),
		Options: map[string]string{"isolate": "true"},
	}
	if spec.Subnet != "" {
		sn, err := subnet(spec.Subnet, spec.Gateway, spec.IPRange)
		if err != nil {
			return errors.Wrapf(err, "creating network %s", spec.Name)
		}
		req.Subnets = []libpodSubnet{sn}
	}
	if spec.IPv6Subnet != "" {
		sn, err := subnet(spec.IPv6Subnet, spec.IPv6Gateway, spec.IPv6Range)
		if err != nil {
			return errors.Wrapf(err, "creating network %s", spec.Name)
		}
		req.Subnets = append(req.Subnets, sn)
	}
	return errors.Wrapf(r.libpod.do(ctx, "POST", "/networks/create", nil, req, nil), "creating network %s", spec.Name)
}

func subnet(cidr, gateway, ipRange string) (libpodSubnet, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return libpodSubnet{}, errors.Wrapf(err, "subnet %q", cidr)
	}
	sn := libpodSubnet{Subnet: prefix.Masked().String(), Gateway: gateway}
	if ipRange == "" {
		return sn, nil
	}
	r, err := netip.ParsePrefix(ipRange)
	if err != nil {
		return sn, errors.Wrapf(err, "address range %q", ipRange)
	}
	start, end := container.LeaseRange(prefix, r)
	sn.LeaseRange = &leaseRange{StartIP: start.String(), EndIP: end.String()}
	return sn, nil
}
