package podman

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/dockerengine"
)

// The subset of libpod's SpecGenerator (pkg/specgen in Podman 4.x) Dockyard sets; the JSON
// names are libpod's.
type specGenerator struct {
	Name          string            `json:"name"`
	Hostname      string            `json:"hostname,omitempty"`
	Image         string            `json:"image"`
	Entrypoint    []string          `json:"entrypoint,omitempty"`
	Command       []string          `json:"command,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Terminal      bool              `json:"terminal,omitempty"`
	StopSignal    *int              `json:"stop_signal,omitempty"`
	RestartPolicy string            `json:"restart_policy,omitempty"`

	NetNS        *namespace            `json:"netns,omitempty"`
	Networks     map[string]perNetwork `json:"Networks,omitempty"`
	PortMappings []portMapping         `json:"portmappings,omitempty"`
	DNSSearch    []string              `json:"dns_search,omitempty"`
	Mounts       []ociMount            `json:"mounts,omitempty"`
	Volumes      []namedVolume         `json:"volumes,omitempty"`
	CgroupNS     *namespace            `json:"cgroupns,omitempty"`
	Privileged   bool                  `json:"privileged,omitempty"`
	CapAdd       []string              `json:"cap_add,omitempty"`
	CapDrop      []string              `json:"cap_drop,omitempty"`
	DeviceRules  []deviceCgroup        `json:"device_cgroup_rule,omitempty"`
	Seccomp      string                `json:"seccomp_profile_path,omitempty"`
	Apparmor     string                `json:"apparmor_profile,omitempty"`
	Unmask       []string              `json:"unmask,omitempty"`
	Resources    *resources            `json:"resource_limits,omitempty"`
}

type namespace struct {
	NSMode string `json:"nsmode"`
}

type perNetwork struct {
	StaticIPs []string `json:"static_ips,omitempty"`
	Aliases   []string `json:"aliases,omitempty"`
}

type portMapping struct {
	HostIP        string `json:"host_ip,omitempty"`
	ContainerPort int    `json:"container_port"`
	HostPort      int    `json:"host_port,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type namedVolume struct {
	Name    string   `json:"Name"`
	Dest    string   `json:"Dest"`
	Options []string `json:"Options,omitempty"`
}

type deviceCgroup struct {
	Allow  bool   `json:"allow"`
	Type   string `json:"type,omitempty"`
	Major  *int64 `json:"major,omitempty"`
	Minor  *int64 `json:"minor,omitempty"`
	Access string `json:"access,omitempty"`
}

type cpuResources struct {
	Shares uint64 `json:"shares,omitempty"`
	Quota  int64  `json:"quota,omitempty"`
	Period uint64 `json:"period,omitempty"`
}

type resources struct {
	Memory *struct {
		Limit int64 `json:"limit"`
	} `json:"memory,omitempty"`
	CPU  *cpuResources `json:"cpu,omitempty"`
	Pids *struct {
		Limit int64 `json:"limit"`
	} `json:"pids,omitempty"`
}

// CreateContainer creates a container through libpod's create endpoint. The compatible
// API's create makes a missing bind-mount source as an empty directory on the engine's host;
// libpod's fails on it ("statfs <source>: no such file or directory"), which is what a mount
// that is not Optional needs. Optional mounts whose source the engine lacks are dropped and
// the create retried; only the engine can tell, as its host may not be the caller's.
func (r *Runtime) CreateContainer(ctx context.Context, spec container.ContainerSpec) error {
	s, err := specFor(spec)
	if err != nil {
		return errors.Wrapf(err, "container %s", spec.Name)
	}
	var optional []string
	for _, m := range spec.Mounts {
		if m.Type == container.MountBind && m.Optional {
			optional = append(optional, m.Source)
		}
	}
	for {
		err := r.libpod.do(ctx, "POST", "/containers/create", nil, s, nil)
		if err == nil {
			return nil
		}
		missing := missingSource(err, optional)
		if missing == "" && (strings.Contains(err.Error(), "image not known") || strings.Contains(err.Error(), "network not found")) {
			// libpod answers 500 for a missing image or network, Docker 404.
			return errors.Wrapf(container.ErrNotFound, "creating container %s: %v", spec.Name, err)
		}
		if missing == "" {
			return errors.Wrapf(err, "creating container %s", spec.Name)
		}
		optional = slices.DeleteFunc(optional, func(src string) bool { return src == missing })
		s.Mounts = slices.DeleteFunc(s.Mounts, func(m ociMount) bool { return m.Type == "bind" && m.Source == missing })
	}
}

// missingSource returns which of sources a libpod create error says does not exist.
func missingSource(err error, sources []string) string {
	for _, src := range sources {
		if strings.Contains(err.Error(), src+": no such file or directory") {
			return src
		}
	}
	return ""
}

// specFor translates a container spec into libpod's.
func specFor(spec container.ContainerSpec) (*specGenerator, error) {
	s := &specGenerator{
		Name: spec.Name, Hostname: spec.Hostname, Image: spec.Image,
		Entrypoint: spec.Entrypoint, Command: spec.Cmd, Env: envMap(spec.Env), Labels: spec.Labels,
		Terminal: spec.Tty, RestartPolicy: spec.RestartPolicy,
		Privileged: spec.Security.Privileged, CapAdd: spec.Security.CapAdd, CapDrop: spec.Security.CapDrop,
		// Docker sets no pids limit; rootful Podman's default is 2048, too few for a node.
		Resources: &resources{Pids: &struct {
			Limit int64 `json:"limit"`
		}{Limit: -1}},
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = "no"
	}
	if spec.StopSignal != "" {
		sig, err := signalNumber(spec.StopSignal)
		if err != nil {
			return nil, err
		}
		s.StopSignal = &sig
	}
	if err := setNetwork(s, spec); err != nil {
		return nil, err
	}
	s.DNSSearch = dockerengine.DNSSearch(spec)
	if err := setMounts(s, spec.Mounts); err != nil {
		return nil, err
	}
	if err := setSecurity(s, spec.Security); err != nil {
		return nil, err
	}
	setResources(s, spec.Resources)
	return s, nil
}

// envMap turns KEY=VALUE entries into libpod's map; a bare KEY gets an empty value.
func envMap(env []string) map[string]string {
	if len(env) == 0 {
		return nil
	}
	m := make(map[string]string, len(env))
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		m[k] = v
	}
	return m
}

// setNetwork attaches the container to spec.Network ("none" and "host" are namespace modes,
// "" and "bridge" the engine's default network) with its aliases, fixed address and ports.
func setNetwork(s *specGenerator, spec container.ContainerSpec) error {
	switch spec.Network {
	case "none", "host":
		s.NetNS = &namespace{NSMode: spec.Network}
	case "", "bridge":
		s.NetNS = &namespace{NSMode: "bridge"}
	default:
		s.NetNS = &namespace{NSMode: "bridge"}
		pn := perNetwork{Aliases: spec.NetworkAliases}
		if spec.IPv4Address != "" {
			ip, err := netip.ParseAddr(spec.IPv4Address)
			if err != nil || !ip.Is4() {
				return errors.Errorf("address %q is not an IPv4 address", spec.IPv4Address)
			}
			pn.StaticIPs = []string{ip.String()}
		}
		if spec.IPv6Address != "" {
			ip, err := netip.ParseAddr(spec.IPv6Address)
			if err != nil || !ip.Is6() {
				return errors.Errorf("address %q is not an IPv6 address", spec.IPv6Address)
			}
			pn.StaticIPs = append(pn.StaticIPs, ip.String())
		}
		s.Networks = map[string]perNetwork{spec.Network: pn}
	}
	for _, p := range spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		s.PortMappings = append(s.PortMappings, portMapping{
			HostIP: p.HostIP, ContainerPort: p.ContainerPort, HostPort: p.HostPort, Protocol: proto,
		})
	}
	return nil
}

// setMounts translates mounts: binds and tmpfs as OCI mounts, named volumes as libpod volumes.
func setMounts(s *specGenerator, mounts []container.Mount) error {
	for _, m := range mounts {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		switch m.Type {
		case container.MountBind:
			s.Mounts = append(s.Mounts, ociMount{Destination: m.Target, Type: "bind", Source: m.Source, Options: []string{"rbind", mode}})
		case container.MountTmpfs:
			s.Mounts = append(s.Mounts, ociMount{Destination: m.Target, Type: "tmpfs", Source: "tmpfs", Options: []string{mode, "nosuid", "nodev"}})
		case container.MountVolume:
			s.Volumes = append(s.Volumes, namedVolume{Name: m.Source, Dest: m.Target, Options: []string{mode}})
		default:
			return errors.Errorf("unknown mount type %q", m.Type)
		}
	}
	return nil
}

// setSecurity translates privilege: Unconfined is seccomp and AppArmor off and nothing masked
// or read-only under /proc and /sys (unmask=ALL).
func setSecurity(s *specGenerator, sec container.SecuritySpec) error {
	if sec.Unconfined {
		s.Seccomp = "unconfined"
		s.Apparmor = "unconfined"
		s.Unmask = []string{"ALL"}
	}
	if sec.PrivateCgroupNamespace {
		s.CgroupNS = &namespace{NSMode: "private"}
	}
	for _, rule := range sec.DeviceCgroupRules {
		d, err := parseDeviceRule(rule)
		if err != nil {
			return err
		}
		s.DeviceRules = append(s.DeviceRules, d)
	}
	return nil
}

// parseDeviceRule parses a device cgroup rule such as "a *:* rwm" or "c 10:200 rwm".
func parseDeviceRule(rule string) (deviceCgroup, error) {
	f := strings.Fields(rule)
	if len(f) != 3 {
		return deviceCgroup{}, errors.Errorf("device cgroup rule %q: want \"<type> <major>:<minor> <access>\"", rule)
	}
	majMin := strings.SplitN(f[1], ":", 2)
	if len(majMin) != 2 {
		return deviceCgroup{}, errors.Errorf("device cgroup rule %q: want <major>:<minor>", rule)
	}
	d := deviceCgroup{Allow: true, Type: f[0], Access: f[2]}
	for i, dst := range []**int64{&d.Major, &d.Minor} {
		if majMin[i] == "*" {
			continue
		}
		n, err := strconv.ParseInt(majMin[i], 10, 64)
		if err != nil {
			return deviceCgroup{}, errors.Wrapf(err, "device cgroup rule %q", rule)
		}
		*dst = &n
	}
	return d, nil
}

// setResources converts NanoCPUs into a CFS quota over a 100ms period, as Docker does.
func setResources(s *specGenerator, res container.Resources) {
	if res.MemoryBytes > 0 {
		s.Resources.Memory = &struct {
			Limit int64 `json:"limit"`
		}{Limit: res.MemoryBytes}
	}
	if res.NanoCPUs > 0 || res.CPUShares > 0 {
		s.Resources.CPU = &cpuResources{Shares: uint64(max(res.CPUShares, 0))}
	}
	if res.NanoCPUs > 0 {
		const period = 100_000
		s.Resources.CPU.Quota, s.Resources.CPU.Period = res.NanoCPUs*period/1e9, period
	}
}

// signalNumber converts a signal name ("SIGTERM", "TERM", "SIGRTMIN+3") or number: libpod
// takes the stop signal as a number, Docker as a name.
func signalNumber(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, nil
	}
	upper := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	if rest, ok := strings.CutPrefix(upper, "RTMIN"); ok {
		off := 0
		if rest != "" {
			n, err := strconv.Atoi(rest)
			if err != nil {
				return 0, errors.Errorf("unknown signal %q", name)
			}
			off = n
		}
		return sigRTMin + off, nil
	}
	if sig, ok := namedSignal(upper); ok {
		return int(sig), nil
	}
	return 0, errors.Errorf("unknown signal %q", name)
}

// sigRTMin is Linux's SIGRTMIN as programs (glibc, musl) see it: 34.
const sigRTMin = 34

// namedSignal returns the number of a classic signal named without its SIG prefix.
func namedSignal(name string) (syscall.Signal, bool) {
	switch name {
	case "HUP":
		return syscall.SIGHUP, true
	case "INT":
		return syscall.SIGINT, true
	case "QUIT":
		return syscall.SIGQUIT, true
	case "ABRT":
		return syscall.SIGABRT, true
	case "KILL":
		return syscall.SIGKILL, true
	case "USR1":
		return syscall.SIGUSR1, true
	case "USR2":
		return syscall.SIGUSR2, true
	case "TERM":
		return syscall.SIGTERM, true
	case "CONT":
		return syscall.SIGCONT, true
	case "STOP":
		return syscall.SIGSTOP, true
	case "WINCH":
		return syscall.SIGWINCH, true
	case "PWR":
		return syscall.SIGPWR, true
	}
	return 0, false
}
