// Package docker implements container.Runtime on a Docker engine through the Docker Go SDK
// (the moby client). It honours DOCKER_HOST and the other DOCKER_* variables and negotiates
// the API version with the engine; it never runs the docker CLI.
package dockerengine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	dockercontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Runtime is a container.Runtime backed by a Docker engine.
type Runtime struct {
	client *client.Client
}

var _ container.Runtime = &Runtime{}

// New connects to the engine named by the DOCKER_* environment variables (the local socket
// when DOCKER_HOST is unset).
func New() (*Runtime, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, errors.Wrap(err, "creating Docker client")
	}
	return &Runtime{client: c}, nil
}

// NewFromClient wraps a client the caller configured, e.g. for another engine's
// Docker-compatible API (Podman's); Close closes it.
func NewFromClient(c *client.Client) *Runtime { return &Runtime{client: c} }

// Close releases the client's connections.
func (r *Runtime) Close() error { return r.client.Close() }

// wrap adds context to an engine error and marks "not found" errors with container.ErrNotFound.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	if cerrdefs.IsNotFound(err) {
		return errors.Wrapf(container.ErrNotFound, "%s: %v", msg, err)
	}
	return errors.Wrap(err, msg)
}

// Info describes the engine.
func (r *Runtime) Info(ctx context.Context) (container.EngineInfo, error) {
	res, err := r.client.Info(ctx, client.InfoOptions{})
	if err != nil {
		return container.EngineInfo{}, wrap(err, "reading Docker engine info")
	}
	return container.EngineInfo{
		Name:            "docker",
		Version:         res.Info.ServerVersion,
		CgroupVersion:   res.Info.CgroupVersion,
		CgroupDriver:    res.Info.CgroupDriver,
		OperatingSystem: res.Info.OperatingSystem,
		CPUs:            res.Info.NCPU,
		MemoryBytes:     res.Info.MemTotal,
		Architecture:    container.GoArch(res.Info.Architecture),
	}, nil
}

// CreateContainer creates a container from a spec.
func (r *Runtime) CreateContainer(ctx context.Context, spec container.ContainerSpec) error {
	cfg, hc := containerConfig(spec), hostConfig(spec)
	optional, err := addMounts(spec, hc)
	if err != nil {
		return err
	}
	if err := publishPorts(spec, cfg, hc); err != nil {
		return err
	}
	netCfg, err := networkingConfig(spec)
	if err != nil {
		return err
	}
	return r.createWithoutMissingBinds(ctx, spec.Name, cfg, hc, netCfg, optional)
}

// containerConfig is the container's own configuration: hostname, image, command,
// environment, labels, terminal and stop signal, with no port exposed yet.
func containerConfig(spec container.ContainerSpec) *dockercontainer.Config {
	return &dockercontainer.Config{
		Hostname:     spec.Hostname,
		Image:        spec.Image,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Env:          spec.Env,
		Labels:       spec.Labels,
		Tty:          spec.Tty,
		StopSignal:   spec.StopSignal,
		ExposedPorts: network.PortSet{},
	}
}

// hostConfig is what the container gets of its host: network mode, restart policy,
// privileges, resources, DNS search list, cgroup namespace and confinement, with no mount or
// port binding yet.
func hostConfig(spec container.ContainerSpec) *dockercontainer.HostConfig {
	hc := &dockercontainer.HostConfig{
		NetworkMode:   dockercontainer.NetworkMode(spec.Network),
		PortBindings:  network.PortMap{},
		RestartPolicy: dockercontainer.RestartPolicy{Name: dockercontainer.RestartPolicyMode(spec.RestartPolicy)},
		Privileged:    spec.Security.Privileged,
		CapAdd:        spec.Security.CapAdd,
		CapDrop:       spec.Security.CapDrop,
		Tmpfs:         map[string]string{},
		Resources: dockercontainer.Resources{
			NanoCPUs:          spec.Resources.NanoCPUs,
			CPUShares:         spec.Resources.CPUShares,
			Memory:            spec.Resources.MemoryBytes,
			DeviceCgroupRules: spec.Security.DeviceCgroupRules,
		},
	}
	if hc.RestartPolicy.Name == "" {
		hc.RestartPolicy.Name = dockercontainer.RestartPolicyDisabled
	}
	hc.DNSSearch = DNSSearch(spec)
	if spec.Security.PrivateCgroupNamespace {
		hc.CgroupnsMode = dockercontainer.CgroupnsModePrivate
	}
	if spec.Security.Unconfined {
		hc.SecurityOpt = []string{"seccomp=unconfined", "apparmor=unconfined"}
		// The Go SDK equivalent of --security-opt systempaths=unconfined: nothing masked or
		// read-only under /proc and /sys (kube-proxy writes /proc/sys).
		hc.MaskedPaths = []string{}
		hc.ReadonlyPaths = []string{}
	}
	return hc
}

// addMounts adds the spec's mounts to the host configuration and returns the sources of its
// optional bind mounts.
func addMounts(spec container.ContainerSpec, hc *dockercontainer.HostConfig) ([]string, error) {
	var optional []string // sources of optional bind mounts
	for _, m := range spec.Mounts {
		switch m.Type {
		case container.MountTmpfs:
			hc.Tmpfs[m.Target] = ""
		case container.MountVolume:
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
		case container.MountBind:
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
			if m.Optional {
				optional = append(optional, m.Source)
			}
		default:
			return nil, errors.Errorf("container %s: unknown mount type %q", spec.Name, m.Type)
		}
	}
	return optional, nil
}

// publishPorts exposes the spec's ports and binds each on the host, at its host address and
// port when it names them.
func publishPorts(spec container.ContainerSpec, cfg *dockercontainer.Config, hc *dockercontainer.HostConfig) error {
	for _, p := range spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		port, err := network.ParsePort(fmt.Sprintf("%d/%s", p.ContainerPort, proto))
		if err != nil {
			return errors.Wrapf(err, "container %s: port %d", spec.Name, p.ContainerPort)
		}
		binding := network.PortBinding{}
		if p.HostIP != "" {
			ip, err := netip.ParseAddr(p.HostIP)
			if err != nil {
				return errors.Wrapf(err, "container %s: host IP %q", spec.Name, p.HostIP)
			}
			binding.HostIP = ip
		}
		if p.HostPort != 0 {
			binding.HostPort = strconv.Itoa(p.HostPort)
		}
		cfg.ExposedPorts[port] = struct{}{}
		hc.PortBindings[port] = append(hc.PortBindings[port], binding)
	}
	return nil
}

// networkingConfig attaches the container to its network with its aliases and fixed
// addresses; nil when it names no network.
func networkingConfig(spec container.ContainerSpec) (*network.NetworkingConfig, error) {
	if spec.Network == "" {
		return nil, nil
	}
	ep := &network.EndpointSettings{Aliases: spec.NetworkAliases}
	if spec.IPv4Address != "" {
		ip, err := netip.ParseAddr(spec.IPv4Address)
		if err != nil {
			return nil, errors.Wrapf(err, "container %s: address %q", spec.Name, spec.IPv4Address)
		}
		ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ip}
	}
	if spec.IPv6Address != "" {
		ip, err := netip.ParseAddr(spec.IPv6Address)
		if err != nil || !ip.Is6() {
			return nil, errors.Errorf("container %s: %q is not an IPv6 address", spec.Name, spec.IPv6Address)
		}
		if ep.IPAMConfig == nil {
			ep.IPAMConfig = &network.EndpointIPAMConfig{}
		}
		ep.IPAMConfig.IPv6Address = ip
	}
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{spec.Network: ep}}, nil
}

// createWithoutMissingBinds creates the container, again without each optional bind mount
// whose source the engine says is missing.
func (r *Runtime) createWithoutMissingBinds(ctx context.Context, name string, cfg *dockercontainer.Config, hc *dockercontainer.HostConfig, netCfg *network.NetworkingConfig, optional []string) error {
	for {
		_, err := r.client.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: name, Config: cfg, HostConfig: hc, NetworkingConfig: netCfg,
		})
		// The engine checks bind sources on its own host; only it can say one is missing.
		missing := missingBindSource(err, optional)
		if missing == "" {
			return wrap(err, "creating container %s", name)
		}
		optional = slices.DeleteFunc(optional, func(src string) bool { return src == missing })
		hc.Mounts = slices.DeleteFunc(hc.Mounts, func(m mount.Mount) bool {
			return m.Type == mount.TypeBind && m.Source == missing
		})
	}
}

// missingBindSource returns which of sources a container create error says does not exist on
// the engine's host, "" when it says nothing of them.
func missingBindSource(err error, sources []string) string {
	if err == nil {
		return ""
	}
	for _, src := range sources {
		if strings.Contains(err.Error(), "bind source path does not exist: "+src) {
			return src
		}
	}
	return ""
}

// StartContainer starts a container.
func (r *Runtime) StartContainer(ctx context.Context, name string) error {
	_, err := r.client.ContainerStart(ctx, name, client.ContainerStartOptions{})
	if isPortInUse(err) {
		return errors.Wrapf(container.ErrPortInUse, "starting container %s: %v", name, err)
	}
	return wrap(err, "starting container %s", name)
}

// isPortInUse recognizes the engine's refusal to publish a taken port: Docker's own
// bookkeeping ("port is already allocated") or the host's bind ("address already in use", also
// Podman's).
func isPortInUse(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "port is already allocated") || strings.Contains(err.Error(), "address already in use"))
}

// InspectContainer returns the state of a container.
func (r *Runtime) InspectContainer(ctx context.Context, name string) (*container.Container, error) {
	res, err := r.client.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return nil, wrap(err, "inspecting container %s", name)
	}
	in := res.Container
	c := &container.Container{
		ID:       in.ID,
		Name:     strings.TrimPrefix(in.Name, "/"),
		Networks: map[string]container.Endpoint{},
	}
	if in.Config != nil {
		c.Image = in.Config.Image
		c.Labels = in.Config.Labels
		c.Hostname = in.Config.Hostname
	}
	if in.State != nil {
		c.State = string(in.State.Status)
		c.Running = in.State.Running
		c.ExitCode = in.State.ExitCode
		if t, err := time.Parse(time.RFC3339Nano, in.State.StartedAt); err == nil {
			c.StartedAt = t
		}
	}
	if in.NetworkSettings != nil {
		for name, ep := range in.NetworkSettings.Networks {
			c.Networks[name] = endpoint(ep)
		}
		c.Ports = portMappings(in.NetworkSettings.Ports)
	}
	return c, nil
}

func endpoint(ep *network.EndpointSettings) container.Endpoint {
	if ep == nil {
		return container.Endpoint{}
	}
	var e container.Endpoint
	if ep.IPAddress.IsValid() {
		e.IPv4 = ep.IPAddress.String()
	}
	if ep.GlobalIPv6Address.IsValid() {
		e.IPv6 = ep.GlobalIPv6Address.String()
	}
	return e
}

func portMappings(pm network.PortMap) []container.PortMapping {
	var out []container.PortMapping
	for port, bindings := range pm {
		for _, b := range bindings {
			hostPort, _ := strconv.Atoi(b.HostPort)
			m := container.PortMapping{ContainerPort: int(port.Num()), Protocol: string(port.Proto()), HostPort: hostPort}
			if b.HostIP.IsValid() {
				m.HostIP = b.HostIP.String()
			}
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ContainerPort != out[j].ContainerPort {
			return out[i].ContainerPort < out[j].ContainerPort
		}
		return out[i].HostIP < out[j].HostIP
	})
	return out
}

func labelFilters(labels map[string]string) client.Filters {
	f := client.Filters{}
	for k, v := range labels {
		if v == "" {
			f.Add("label", k)
		} else {
			f.Add("label", k+"="+v)
		}
	}
	return f
}

// Events streams container starts, stops and removals (of containers carrying the labels) and
// network removals. The engine filters by type and action; labels are matched here, because
// Docker's label filter would also drop every network event.
func (r *Runtime) Events(ctx context.Context, labels map[string]string) (<-chan container.Event, <-chan error) {
	out, errs := make(chan container.Event), make(chan error, 1)
	f := client.Filters{}
	f.Add("type", string(events.ContainerEventType), string(events.NetworkEventType))
	f.Add("event", string(events.ActionStart), string(events.ActionDie), string(events.ActionDestroy))
	res := r.client.Events(ctx, client.EventsListOptions{Filters: f})
	go func() {
		defer close(errs)
		defer close(out)
		for {
			select {
			case m := <-res.Messages:
				e := container.Event{Type: string(m.Type), Action: string(m.Action), Name: m.Actor.Attributes["name"]}
				if m.Type == events.ContainerEventType {
					e.Labels = m.Actor.Attributes
					if !container.MatchLabels(e.Labels, labels) {
						continue
					}
				}
				select {
				case out <- e:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			case err := <-res.Err:
				errs <- wrap(err, "watching the engine's events")
				return
			}
		}
	}()
	return out, errs
}

// ListContainers returns every container carrying the labels.
func (r *Runtime) ListContainers(ctx context.Context, labels map[string]string) ([]container.Container, error) {
	res, err := r.client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, wrap(err, "listing containers")
	}
	out := make([]container.Container, 0, len(res.Items))
	for _, s := range res.Items {
		c := container.Container{
			ID:       s.ID,
			Image:    s.Image,
			Labels:   s.Labels,
			State:    string(s.State),
			Running:  s.State == dockercontainer.StateRunning,
			Networks: map[string]container.Endpoint{},
		}
		if len(s.Names) > 0 {
			c.Name = strings.TrimPrefix(s.Names[0], "/")
		}
		if s.NetworkSettings != nil {
			for name, ep := range s.NetworkSettings.Networks {
				c.Networks[name] = endpoint(ep)
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SignalContainer sends a signal to a container's main process.
func (r *Runtime) SignalContainer(ctx context.Context, name, signal string) error {
	_, err := r.client.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: signal})
	return wrap(err, "sending %s to container %s", signal, name)
}

// RemoveContainer force-removes a container and its anonymous volumes.
func (r *Runtime) RemoveContainer(ctx context.Context, name string) error {
	_, err := r.client.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return wrap(err, "removing container %s", name)
}

// Exec runs a command in a container, streaming stdin and collecting its output.
func (r *Runtime) Exec(ctx context.Context, name string, opts container.ExecOptions) (int, error) {
	created, err := r.client.ExecCreate(ctx, name, client.ExecCreateOptions{
		User:         opts.User,
		Env:          opts.Env,
		Cmd:          opts.Cmd,
		AttachStdin:  opts.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, wrap(err, "creating exec in container %s", name)
	}
	attached, err := r.client.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, wrap(err, "attaching to exec in container %s", name)
	}
	defer attached.Close()

	// Close the connection when the context ends, so a stuck command cannot hold the caller.
	stop := context.AfterFunc(ctx, func() { attached.Close() })
	defer stop()

	stdinDone := make(chan error, 1)
	if opts.Stdin != nil {
		go func() {
			_, err := io.Copy(attached.Conn, opts.Stdin)
			if cerr := attached.CloseWrite(); err == nil {
				err = cerr
			}
			stdinDone <- err
		}()
	} else {
		stdinDone <- nil
	}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	_, copyErr := stdcopy.StdCopy(stdout, stderr, attached.Reader)
	if copyErr != nil && ctx.Err() != nil {
		return -1, errors.Wrapf(ctx.Err(), "exec in container %s", name)
	}
	if copyErr != nil && opts.Stdin == nil {
		return -1, errors.Wrapf(copyErr, "reading exec output from container %s", name)
	}
	// The output ends when the command does. A command that ended without reading all of its
	// stdin (a failure often: ctr import on a full disk) leaves the copy blocked on a write the
	// engine no longer reads, for minutes: closing the connection ends it, and the command's
	// exit code and stderr say what happened, not the broken stream. Podman's service resets
	// the stream instead; the exit code still says what happened, once the engine recorded it.
	attached.Close()
	stdinErr := <-stdinDone
	codeCtx := ctx
	if copyErr != nil {
		// The stream broke: the command may still run; the engine is asked only a moment.
		var cancel context.CancelFunc
		codeCtx, cancel = context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
	}
	code, err := r.execExitCode(codeCtx, name, created.ID)
	switch {
	case copyErr != nil && (err != nil || code == 0):
		readErr := errors.Wrapf(copyErr, "reading exec output from container %s", name)
		if stdinErr != nil {
			return -1, errors.WithMessagef(readErr, "streaming stdin: %v", stdinErr)
		}
		return -1, readErr
	case err == nil && stdinErr != nil && code == 0:
		// It said it succeeded but may not have had all its input: the stream's error is all
		// there is to tell.
		return -1, errors.Wrapf(stdinErr, "streaming stdin to container %s", name)
	}
	return code, err
}

// execExitCode waits for the engine to record an exec's exit code: the output stream ends a
// moment before it does.
func (r *Runtime) execExitCode(ctx context.Context, name, id string) (int, error) {
	for {
		res, err := r.client.ExecInspect(ctx, id, client.ExecInspectOptions{})
		if err != nil {
			return -1, wrap(err, "inspecting exec in container %s", name)
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, errors.Wrapf(ctx.Err(), "exec in container %s", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// CopyToContainer extracts a tar stream into a directory of a container.
func (r *Runtime) CopyToContainer(ctx context.Context, name, dir string, tarStream io.Reader) error {
	_, err := r.client.CopyToContainer(ctx, name, client.CopyToContainerOptions{DestinationPath: dir, Content: tarStream})
	return wrap(err, "copying into %s:%s", name, dir)
}

// CopyFromContainer returns a tar stream of a path in a container.
func (r *Runtime) CopyFromContainer(ctx context.Context, name, path string) (io.ReadCloser, error) {
	res, err := r.client.CopyFromContainer(ctx, name, client.CopyFromContainerOptions{SourcePath: path})
	if err != nil {
		return nil, wrap(err, "copying %s:%s", name, path)
	}
	return res.Content, nil
}

// ContainerLogs returns the last lines of a container's output.
func (r *Runtime) ContainerLogs(ctx context.Context, name string, tailLines int) (string, error) {
	res, err := r.client.ContainerLogs(ctx, name, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(tailLines),
	})
	if err != nil {
		return "", wrap(err, "reading logs of container %s", name)
	}
	defer res.Close()
	raw, err := io.ReadAll(res)
	if err != nil {
		return "", errors.Wrapf(err, "reading logs of container %s", name)
	}
	// Containers without a terminal multiplex stdout and stderr; try to demultiplex and fall
	// back to the raw bytes (terminal output is not multiplexed).
	var out strings.Builder
	if _, err := stdcopy.StdCopy(&out, &out, strings.NewReader(string(raw))); err == nil {
		return out.String(), nil
	}
	return string(raw), nil
}

// CreateNetwork creates a bridge network.
func (r *Runtime) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	opts := client.NetworkCreateOptions{Driver: "bridge", Labels: spec.Labels}
	if spec.WantsIPv6() {
		v6 := true
		opts.EnableIPv6 = &v6
	}
	if spec.Subnet != "" {
		cfg, err := ipamConfig(spec.Subnet, spec.Gateway, spec.IPRange)
		if err != nil {
			return errors.Wrapf(err, "network %s", spec.Name)
		}
		opts.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{cfg}}
	}
	if spec.IPv6Subnet != "" {
		if opts.IPAM == nil {
			return errors.Errorf("network %s: an IPv6 subnet needs an IPv4 subnet too", spec.Name)
		}
		cfg, err := ipamConfig(spec.IPv6Subnet, spec.IPv6Gateway, spec.IPv6Range)
		if err != nil {
			return errors.Wrapf(err, "network %s", spec.Name)
		}
		opts.IPAM.Config = append(opts.IPAM.Config, cfg)
	}
	if _, err := r.InspectNetwork(ctx, spec.Name); err == nil {
		return errors.Errorf("creating network %s: a network with that name already exists", spec.Name)
	}
	res, err := r.client.NetworkCreate(ctx, spec.Name, opts)
	if err != nil {
		return wrap(err, "creating network %s", spec.Name)
	}
	return r.keepOneNetwork(ctx, spec.Name, res.ID)
}

// keepOneNetwork removes the network just created when another of the same name exists: engines
// before API 1.44 (Debian's Docker 20.10) create a second network of a name unless asked to
// check, which this client no longer can, and names then become ambiguous. Of two racing
// creations, both may step back; the caller's next attempt creates one.
func (r *Runtime) keepOneNetwork(ctx context.Context, name, id string) error {
	res, err := r.client.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return wrap(err, "listing networks named %s", name)
	}
	same := 0
	for _, n := range res.Items {
		if n.Name == name {
			same++
		}
	}
	if same <= 1 {
		return nil
	}
	if _, err := r.client.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil {
		return wrap(err, "removing the second network named %s", name)
	}
	return errors.Errorf("creating network %s: a network with that name already exists", name)
}

func ipamConfig(subnet, gateway, ipRange string) (network.IPAMConfig, error) {
	var cfg network.IPAMConfig
	var err error
	if cfg.Subnet, err = netip.ParsePrefix(subnet); err != nil {
		return cfg, errors.Wrapf(err, "subnet %q", subnet)
	}
	if gateway != "" {
		if cfg.Gateway, err = netip.ParseAddr(gateway); err != nil {
			return cfg, errors.Wrapf(err, "gateway %q", gateway)
		}
	}
	if ipRange != "" {
		if cfg.IPRange, err = netip.ParsePrefix(ipRange); err != nil {
			return cfg, errors.Wrapf(err, "address range %q", ipRange)
		}
	}
	return cfg, nil
}

// InspectNetwork returns a network.
func (r *Runtime) InspectNetwork(ctx context.Context, name string) (*container.Network, error) {
	res, err := r.client.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		return nil, wrap(err, "inspecting network %s", name)
	}
	n := toNetwork(res.Network.Network)
	for _, ep := range res.Network.Containers {
		n.Containers = append(n.Containers, ep.Name)
	}
	sort.Strings(n.Containers)
	return &n, nil
}

func toNetwork(in network.Network) container.Network {
	n := container.Network{ID: in.ID, Name: in.Name, Labels: in.Labels, Interface: bridgeOf(in)}
	for _, c := range in.IPAM.Config {
		if c.Subnet.IsValid() {
			n.Subnets = append(n.Subnets, c.Subnet.String())
		}
		if c.Gateway.IsValid() {
			n.Gateways = append(n.Gateways, c.Gateway.String())
		}
	}
	return n
}

// bridgeOf is a bridge network's interface on the host: the name its options give it (Podman's
// compatible API gives every network's), else Docker's br-<the first 12 digits of its ID>.
func bridgeOf(in network.Network) string {
	if name := in.Options["com.docker.network.bridge.name"]; name != "" {
		return name
	}
	if in.Driver == "bridge" && len(in.ID) >= 12 {
		return "br-" + in.ID[:12]
	}
	return ""
}

// ListNetworks returns the networks carrying the labels.
func (r *Runtime) ListNetworks(ctx context.Context, labels map[string]string) ([]container.Network, error) {
	res, err := r.client.NetworkList(ctx, client.NetworkListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, wrap(err, "listing networks")
	}
	out := make([]container.Network, 0, len(res.Items))
	for _, s := range res.Items {
		out = append(out, toNetwork(s.Network))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveNetwork removes a network.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	_, err := r.client.NetworkRemove(ctx, name, client.NetworkRemoveOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return wrap(err, "removing network %s", name)
}

// ConnectNetwork attaches a container to a network unless it already is.
func (r *Runtime) ConnectNetwork(ctx context.Context, networkName, name string) error {
	c, err := r.InspectContainer(ctx, name)
	if err != nil {
		return err
	}
	if _, ok := c.Networks[networkName]; ok {
		return nil
	}
	_, err = r.client.NetworkConnect(ctx, networkName, client.NetworkConnectOptions{Container: name})
	if err == nil {
		return nil
	}
	// Two managers (or a retry) may have connected it in between: judge by the outcome.
	if c, ierr := r.InspectContainer(ctx, name); ierr == nil {
		if _, ok := c.Networks[networkName]; ok {
			return nil
		}
	}
	return wrap(err, "connecting container %s to network %s", name, networkName)
}

// DisconnectNetwork detaches a container from a network when it is attached.
func (r *Runtime) DisconnectNetwork(ctx context.Context, networkName, name string) error {
	c, err := r.InspectContainer(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, ok := c.Networks[networkName]; !ok {
		return nil
	}
	_, err = r.client.NetworkDisconnect(ctx, networkName, client.NetworkDisconnectOptions{Container: name})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return wrap(err, "disconnecting container %s from network %s", name, networkName)
}

// CreateVolume creates a named volume.
func (r *Runtime) CreateVolume(ctx context.Context, spec container.VolumeSpec) error {
	_, err := r.client.VolumeCreate(ctx, client.VolumeCreateOptions{Name: spec.Name, Labels: spec.Labels})
	return wrap(err, "creating volume %s", spec.Name)
}

// ListVolumes returns the volumes carrying the labels.
func (r *Runtime) ListVolumes(ctx context.Context, labels map[string]string) ([]container.Volume, error) {
	res, err := r.client.VolumeList(ctx, client.VolumeListOptions{Filters: labelFilters(labels)})
	if err != nil {
		return nil, wrap(err, "listing volumes")
	}
	out := make([]container.Volume, 0, len(res.Items))
	for _, v := range res.Items {
		out = append(out, container.Volume{Name: v.Name, Labels: v.Labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveVolume removes a volume.
func (r *Runtime) RemoveVolume(ctx context.Context, name string) error {
	_, err := r.client.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return wrap(err, "removing volume %s", name)
}

// ImageExists reports whether the engine has an image.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := r.client.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, wrap(err, "inspecting image %s", ref)
	}
	return true, nil
}

// PullImage pulls an image and waits until the pull completes.
func (r *Runtime) PullImage(ctx context.Context, ref string) error {
	res, err := r.client.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return wrap(err, "pulling image %s", ref)
	}
	defer res.Close()
	return wrap(res.Wait(ctx), "pulling image %s", ref)
}

// SaveImages returns a docker-save tar stream of images.
func (r *Runtime) SaveImages(ctx context.Context, refs []string) (io.ReadCloser, error) {
	res, err := r.client.ImageSave(ctx, refs)
	if err != nil {
		return nil, wrap(err, "saving images %s", strings.Join(refs, ", "))
	}
	return res, nil
}

// LoadImages loads a docker-save tar stream.
func (r *Runtime) LoadImages(ctx context.Context, tarStream io.Reader) error {
	res, err := r.client.ImageLoad(ctx, tarStream, client.ImageLoadWithQuiet(true))
	if err != nil {
		return wrap(err, "loading images")
	}
	defer res.Close()
	// The engine reports a failed load inside its JSON message stream, not as an HTTP error.
	dec := json.NewDecoder(res)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return errors.Wrap(err, "reading the engine's answer to loading images")
		}
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return errors.Errorf("loading images: %s", msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.Errorf("loading images: %s", msg.Error)
		}
	}
}

// InspectImage returns an image's ID and labels.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (*container.Image, error) {
	res, err := r.client.ImageInspect(ctx, ref)
	if err != nil {
		return nil, wrap(err, "inspecting image %s", ref)
	}
	img := &container.Image{ID: res.ID}
	if res.Config != nil {
		img.Labels = res.Config.Labels
	}
	return img, nil
}

// RemoveImage removes an image name or ID, like docker image rm without --force.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	_, err := r.client.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return wrap(err, "removing image %s", ref)
}

// DNSSearch is a spec's search list as Docker and Podman take it: nil keeps the engine's, and
// "." is their word for no search domain.
func DNSSearch(spec container.ContainerSpec) []string {
	if spec.DNSSearch == nil {
		return nil
	}
	if len(*spec.DNSSearch) == 0 {
		return []string{"."}
	}
	return *spec.DNSSearch
}

// Zones is none: the engine's containers run on one host.
func (r *Runtime) Zones(context.Context) ([]string, error) { return nil, nil }

// Balancer is nil: the engine does not balance traffic over its containers itself.
func (r *Runtime) Balancer() container.Balancer { return nil }
