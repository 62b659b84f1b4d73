// Package inmemory is an engine whose containers exist only in the manager's memory: containers
// with labels, states, addresses and a file tree, networks, volumes and images, with hooks to
// inject failures and to simulate the commands run in containers. It is the engine of in-memory
// clusters, whose nodes it simulates (Nodes), and the engine of unit tests and benchmarks.
package inmemory

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// ExecFunc simulates a command run in a container. It gets the container (locked: it may read
// and change Files) and returns the exit code.
type ExecFunc func(ctx context.Context, c *Container, opts container.ExecOptions) (int, error)

// Container is a simulated container.
type Container struct {
	Spec  container.ContainerSpec
	State container.Container
	// Files maps absolute paths to contents; directories are implied.
	Files map[string][]byte
	// Signals received, in order.
	Signals []string
	// Logs are the container's output lines (ContainerLogs).
	Logs []string
	// Data is free for ExecFuncs to keep simulated state in.
	Data map[string]any

	// indexed is where reindex filed the container: its byLabel and byNetwork keys.
	indexed []string
}

// Runtime is an in-memory container.Runtime. The zero value is not usable; call New.
type Runtime struct {
	mu         sync.Mutex
	containers map[string]*Container
	// index finds containers by label ("label:key=value" and "key:key") and by the network they
	// are attached to ("network:name") without a scan: a benchmark runs thousands of nodes on
	// one fake engine. reindex keeps it after every change to a container's networks.
	index    map[string]map[string]bool
	networks map[string]*container.Network
	// pools hand out the addresses of each network.
	pools map[string]*pool
	// pools6 hand out the IPv6 addresses of dual-stack networks.
	pools6  map[string]*pool
	volumes map[string]*container.Volume
	// networksByLabel and volumesByLabel find networks and volumes by label without a scan:
	// saving each of a thousand clusters looked through every cluster's.
	networksByLabel, volumesByLabel labelIndex
	// images by name; nil for an image the engine was made with (New), whose content the
	// fake makes up when it is saved.
	images map[string]v1.Image
	nextID int
	// nextHostPort is the host port the next start of a container with an unpinned published
	// port gets: like Docker's allocator, each start takes the next one, so a container that
	// is started again is published elsewhere.
	nextHostPort int

	// Exec simulates commands; nil runs the commands of the conformance suite (see shell) and
	// lets every other command succeed silently.
	ExecHandler ExecFunc
	// Pullable images can be pulled; pulling any other image fails like a missing registry.
	Pullable map[string]bool
	// StartHook, when set, runs before a container starts; an error fails the start.
	StartHook func(spec container.ContainerSpec) error
	// OnStart and OnSignal, when set, simulate what the container's main process does when
	// it starts or gets a signal (with the engine locked).
	OnStart  func(c *Container)
	OnSignal func(c *Container, signal string)
	// OnRemove, when set, runs as a container is removed (with the engine locked).
	OnRemove func(c *Container)
	// OnChange, when set, is told the labels of a container, network or volume that was made,
	// changed or removed (with the engine locked); ReadOnly, when set, names the commands whose
	// Exec changes nothing.
	OnChange func(labels map[string]string)
	ReadOnly func(cmd []string) bool
	// PullAnything lets every image be pulled (an engine with no registry to ask), not only
	// the Pullable ones.
	PullAnything bool
	// Calls counts calls by method name.
	Calls map[string]int

	// watchers receive events (Events).
	watchers []*watcher

	// host is what Info reports of the engine's host (SetHost).
	host Host
	// infoErr, when set, fails Info (SetInfoError).
	infoErr error
}

// Host is the engine's host as the fake's Info reports it.
type Host struct {
	CPUs         int
	MemoryBytes  int64
	Architecture string
}

// DefaultHost is the host of a new fake engine: 4 CPUs, 8 GiB, amd64.
var DefaultHost = Host{CPUs: 4, MemoryBytes: 8 << 30, Architecture: "amd64"}

var _ container.Runtime = &Runtime{}

// New returns an empty engine that has the given images.
func New(images ...string) *Runtime {
	r := &Runtime{
		containers:      map[string]*Container{},
		index:           map[string]map[string]bool{},
		networks:        map[string]*container.Network{},
		pools:           map[string]*pool{},
		pools6:          map[string]*pool{},
		volumes:         map[string]*container.Volume{},
		networksByLabel: labelIndex{},
		volumesByLabel:  labelIndex{},
		images:          map[string]v1.Image{},
		Pullable:        map[string]bool{},
		Calls:           map[string]int{},
		host:            DefaultHost,
	}
	for _, img := range images {
		r.images[img] = nil
	}
	return r
}

func (r *Runtime) count(method string) { r.Calls[method]++ }

// changed tells OnChange of a change. Called with mu held.
func (r *Runtime) changed(labels map[string]string) {
	if r.OnChange != nil {
		r.OnChange(labels)
	}
}

func notFound(kind, name string) error {
	return errors.Wrapf(container.ErrNotFound, "%s %s", kind, name)
}

// SetHost changes the host Info reports.
func (r *Runtime) SetHost(h Host) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.host = h
}

// SetInfoError makes Info fail with err (nil: answer again), like an engine that does not
// answer.
func (r *Runtime) SetInfoError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infoErr = err
}

// Info describes the fake engine and its host (SetHost).
func (r *Runtime) Info(context.Context) (container.EngineInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("Info")
	if r.infoErr != nil {
		return container.EngineInfo{}, errors.Wrap(r.infoErr, "reading the in-memory engine's info")
	}
	return container.EngineInfo{
		Name: "inmemory", Version: "0", CgroupVersion: "1", CgroupDriver: "cgroupfs",
		CPUs: r.host.CPUs, MemoryBytes: r.host.MemoryBytes, Architecture: r.host.Architecture,
	}, nil
}

// CreateContainer records a container in state "created".
func (r *Runtime) CreateContainer(_ context.Context, spec container.ContainerSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("CreateContainer")
	if _, ok := r.containers[spec.Name]; ok {
		return errors.Errorf("creating container %s: Conflict. The container name is already in use", spec.Name)
	}
	if _, ok := r.images[spec.Image]; !ok {
		return notFound("image", spec.Image)
	}
	switch spec.Network {
	case "":
	case "none", "host", "bridge": // the engine's own networks
		if len(spec.NetworkAliases) > 0 {
			return errors.Errorf("creating container %s: network-scoped alias is supported only for containers in user defined networks", spec.Name)
		}
	default:
		if _, ok := r.networks[spec.Network]; !ok {
			return notFound("network", spec.Network)
		}
	}
	for _, m := range spec.Mounts {
		// The fake engine's host is the test's: a bind source it lacks fails the container,
		// unless the mount is optional.
		if m.Type == container.MountBind && !m.Optional {
			if _, err := os.Stat(m.Source); err != nil {
				return errors.Errorf("creating container %s: invalid mount config: bind source path does not exist: %s", spec.Name, m.Source)
			}
		}
		if m.Type == container.MountVolume {
			if _, ok := r.volumes[m.Source]; !ok {
				// Engines create named volumes on demand; so does the fake, unlabelled.
				r.volumes[m.Source] = &container.Volume{Name: m.Source}
			}
		}
	}
	r.nextID++
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	r.containers[spec.Name] = &Container{
		Spec: spec,
		State: container.Container{
			ID: fmt.Sprintf("%012d", r.nextID), Name: spec.Name, Hostname: spec.Hostname, Image: spec.Image, Labels: labels,
			State: "created", Networks: map[string]container.Endpoint{},
		},
		Files: map[string][]byte{
			// What a container in its own cgroup namespace reads on a cgroup v1 host.
			cgroupCPUShares:    []byte(strconv.FormatInt(cmp.Or(spec.Resources.CPUShares, 1024), 10) + "\n"),
			"/etc/resolv.conf": resolvConf(spec.DNSSearch),
		},
		Data: map[string]any{},
	}
	r.reindex(r.containers[spec.Name])
	r.changed(labels)
	return nil
}

// reindex files a container under its labels and the networks it is attached to (its own,
// and those it joined), replacing where it was filed before.
func (r *Runtime) reindex(c *Container) {
	r.unindex(c)
	keys := make([]string, 0, 2*len(c.State.Labels)+len(c.State.Networks)+1)
	for k, v := range c.State.Labels {
		keys = append(keys, "label:"+k+"="+v, "key:"+k)
	}
	if c.Spec.Network != "" {
		keys = append(keys, "network:"+c.Spec.Network)
	}
	for n := range c.State.Networks {
		if n != c.Spec.Network {
			keys = append(keys, "network:"+n)
		}
	}
	for _, k := range keys {
		if r.index[k] == nil {
			r.index[k] = map[string]bool{}
		}
		r.index[k][c.Spec.Name] = true
	}
	c.indexed = keys
}

func (r *Runtime) unindex(c *Container) {
	for _, k := range c.indexed {
		delete(r.index[k], c.Spec.Name)
		if len(r.index[k]) == 0 {
			delete(r.index, k)
		}
	}
	c.indexed = nil
}

// labelled returns the containers carrying every label of the selector (an empty value: any
// value of the key), from the smallest index entry the selector names.
func (r *Runtime) labelled(labels map[string]string) []*Container {
	var names map[string]bool
	first := true
	for k, v := range labels {
		key := "label:" + k + "=" + v
		if v == "" {
			key = "key:" + k
		}
		if set := r.index[key]; first || len(set) < len(names) {
			names, first = set, false
		}
	}
	var out []*Container
	if first { // no label: every container
		for _, c := range r.containers {
			out = append(out, c)
		}
		return out
	}
	for name := range names {
		if c := r.containers[name]; c != nil && container.MatchLabels(c.State.Labels, labels) {
			out = append(out, c)
		}
	}
	return out
}

// cgroupCPUShares is the file of a container's CPU shares on a cgroup v1 host.
const cgroupCPUShares = "/sys/fs/cgroup/cpu/cpu.shares"

// StartContainer starts a container and gives it an address on its network.
func (r *Runtime) StartContainer(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("StartContainer")
	c, ok := r.containers[name]
	if !ok {
		return notFound("container", name)
	}
	if r.StartHook != nil {
		if err := r.StartHook(c.Spec); err != nil {
			c.State.State, c.State.Running, c.State.ExitCode = "created", false, 128
			return errors.Wrapf(err, "starting container %s", name)
		}
	}
	// Like runc: Linux takes hostnames of at most 64 bytes.
	if len(c.Spec.Hostname) > 64 {
		c.State.State, c.State.Running, c.State.ExitCode = "created", false, 128
		return errors.Errorf("starting container %s: error during container init: sethostname: invalid argument", name)
	}
	// Like Docker, a container gets its addresses when it starts: its fixed one, which must be
	// free, or the next one of the network's range; the other networks it joined too.
	for network, ep := range c.State.Networks {
		if network != c.Spec.Network && ep == (container.Endpoint{}) && r.pools[network] != nil {
			c.State.Networks[network] = r.dynamicEndpoint(network)
		}
	}
	if err := r.checkPorts(c); err != nil {
		c.State.State, c.State.ExitCode = "created", 128
		return err
	}
	if c.Spec.Network != "" {
		ep, err := r.startEndpoint(c)
		if err != nil {
			c.State.State, c.State.ExitCode = "created", 128
			return err
		}
		c.State.Networks[c.Spec.Network] = ep
	}
	r.reindex(c)
	c.State.State, c.State.Running, c.State.ExitCode = "running", true, 0
	c.State.StartedAt = time.Now()
	r.emit(container.Event{Type: container.EventContainer, Action: "start", Name: name, Labels: c.State.Labels})
	c.State.Ports = nil
	for _, p := range c.Spec.Ports {
		if p.HostPort == 0 {
			p.HostPort = r.allocateHostPort()
		}
		c.State.Ports = append(c.State.Ports, p)
	}
	if r.OnStart != nil {
		r.OnStart(c)
	}
	r.changed(c.State.Labels)
	return nil
}

// allocateHostPort hands out the next port of Docker's default dynamic range (32768-60999),
// going on from the last one as Docker does. Unlike Docker it does not skip the ports of
// containers that pinned theirs: tests pin ports it does not reach, or ones it gave out.
func (r *Runtime) allocateHostPort() int {
	const first, last = 32768, 60999
	if r.nextHostPort < first || r.nextHostPort > last {
		r.nextHostPort = first
	}
	p := r.nextHostPort
	r.nextHostPort++
	return p
}

// checkPorts fails, like an engine, when a fixed host port c publishes is published by another
// running container.
func (r *Runtime) checkPorts(c *Container) error {
	for _, p := range c.Spec.Ports {
		if p.HostPort == 0 {
			continue
		}
		for _, o := range r.containers {
			if o == c || !o.State.Running {
				continue
			}
			for _, op := range o.State.Ports {
				if op.HostPort == p.HostPort && strings.EqualFold(orTCP(op.Protocol), orTCP(p.Protocol)) && (op.HostIP == p.HostIP || op.HostIP == "" || p.HostIP == "") {
					return errors.Wrapf(container.ErrPortInUse, "starting container %s: Bind for %s:%d failed: port is already allocated", c.Spec.Name, p.HostIP, p.HostPort)
				}
			}
		}
	}
	return nil
}

func orTCP(protocol string) string {
	if protocol == "" {
		return "tcp"
	}
	return protocol
}

// StopContainer simulates a container stopping outside Dockyard (a crash or `docker stop`).
func (r *Runtime) StopContainer(name string, exitCode int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[name]; ok {
		r.stop(c, exitCode)
	}
}

func (r *Runtime) stop(c *Container, exitCode int) {
	if c.State.Running {
		r.emit(container.Event{Type: container.EventContainer, Action: "die", Name: c.Spec.Name, Labels: c.State.Labels})
	}
	c.State.State, c.State.Running, c.State.ExitCode = "exited", false, exitCode
	r.changed(c.State.Labels)
	// A stopped container gives its addresses back (a fixed one is asked for again when it
	// starts), and its host ports, which Docker no longer reports.
	for network := range c.State.Networks {
		c.State.Networks[network] = container.Endpoint{}
	}
	c.State.Ports = nil
}

// holder is the running container that has an address on a network, "" when none does.
func (r *Runtime) holder(network, ip string) string {
	for name := range r.index["network:"+network] {
		if c := r.containers[name]; c != nil {
			if ep := c.State.Networks[network]; c.State.Running && (ep.IPv4 == ip || ep.IPv6 == ip) {
				return c.Spec.Name
			}
		}
	}
	return ""
}

// startEndpoint gives a starting container its addresses on its own network: the fixed ones,
// which must be free, else those it had, else the next ones of the network's ranges.
func (r *Runtime) startEndpoint(c *Container) (container.Endpoint, error) {
	network, had := c.Spec.Network, c.State.Networks[c.Spec.Network]
	if r.pools6[network] == nil && c.Spec.IPv6Address != "" {
		return container.Endpoint{}, errors.Errorf("starting container %s: network %s has no IPv6 subnet for address %s", c.Spec.Name, network, c.Spec.IPv6Address)
	}
	ep := container.Endpoint{IPv4: c.Spec.IPv4Address, IPv6: c.Spec.IPv6Address}
	for _, ip := range []string{ep.IPv4, ep.IPv6} {
		if other := r.holder(network, ip); ip != "" && other != "" && other != c.Spec.Name {
			return container.Endpoint{}, errors.Errorf("starting container %s: Address already in use (%s has %s)", c.Spec.Name, other, ip)
		}
	}
	if ep.IPv4 == "" {
		ep.IPv4 = had.IPv4
		if p := r.pools[network]; ep.IPv4 == "" && p != nil {
			ep.IPv4 = p.next()
		}
	}
	if ep.IPv6 == "" {
		ep.IPv6 = had.IPv6
		if p := r.pools6[network]; ep.IPv6 == "" && p != nil {
			ep.IPv6 = p.next()
		}
	}
	return ep, nil
}

// dynamicEndpoint is a new endpoint on a network, with the next addresses of its ranges.
func (r *Runtime) dynamicEndpoint(network string) container.Endpoint {
	ep := container.Endpoint{IPv4: r.pools[network].next()}
	if p := r.pools6[network]; p != nil {
		ep.IPv6 = p.next()
	}
	return ep
}

// InspectContainer returns a copy of a container's state.
func (r *Runtime) InspectContainer(_ context.Context, name string) (*container.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("InspectContainer")
	c, ok := r.containers[name]
	if !ok {
		return nil, notFound("container", name)
	}
	st := copyState(c.State)
	return &st, nil
}

func copyState(in container.Container) container.Container {
	out := in
	out.Labels = map[string]string{}
	for k, v := range in.Labels {
		out.Labels[k] = v
	}
	out.Networks = map[string]container.Endpoint{}
	for k, v := range in.Networks {
		out.Networks[k] = v
	}
	out.Ports = append([]container.PortMapping(nil), in.Ports...)
	return out
}

// ListContainers returns copies of the containers carrying the labels.
func (r *Runtime) ListContainers(_ context.Context, labels map[string]string) ([]container.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("ListContainers")
	var out []container.Container
	for _, c := range r.labelled(labels) {
		out = append(out, copyState(c.State))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SignalContainer records a signal.
func (r *Runtime) SignalContainer(_ context.Context, name, signal string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("SignalContainer")
	c, ok := r.containers[name]
	if !ok {
		return notFound("container", name)
	}
	if !c.State.Running {
		return errors.Errorf("container %s is not running", name)
	}
	c.Signals = append(c.Signals, signal)
	if signal == "SIGKILL" {
		r.stop(c, 137)
		return nil
	}
	if r.OnSignal != nil {
		r.OnSignal(c, signal)
	}
	return nil
}

// RemoveContainer removes a container and its anonymous (unlabelled) volumes.
func (r *Runtime) RemoveContainer(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemoveContainer")
	if c, ok := r.containers[name]; ok {
		r.stop(c, 137)
		if r.OnRemove != nil {
			r.OnRemove(c)
		}
		r.emit(container.Event{Type: container.EventContainer, Action: "destroy", Name: name, Labels: c.State.Labels})
		r.unindex(c)
	}
	delete(r.containers, name)
	return nil
}

// watcher is one Events stream.
type watcher struct {
	labels map[string]string
	events chan container.Event
	errs   chan error
}

// Events streams the simulated engine's events; the stream holds up to 1024 unread events.
func (r *Runtime) Events(ctx context.Context, labels map[string]string) (<-chan container.Event, <-chan error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("Events")
	w := &watcher{labels: labels, events: make(chan container.Event, 1024), errs: make(chan error, 1)}
	r.watchers = append(r.watchers, w)
	go func() {
		<-ctx.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.endWatch(w, ctx.Err())
	}()
	return w.events, w.errs
}

// BreakEvents ends every event stream with err, as when the engine goes away.
func (r *Runtime) BreakEvents(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range append([]*watcher(nil), r.watchers...) {
		r.endWatch(w, err)
	}
}

func (r *Runtime) endWatch(w *watcher, err error) {
	for i, other := range r.watchers {
		if other == w {
			r.watchers = append(r.watchers[:i], r.watchers[i+1:]...)
			w.errs <- err
			close(w.errs)
			close(w.events)
			return
		}
	}
}

// emit sends an event to the streams that want it (with the engine locked).
func (r *Runtime) emit(e container.Event) {
	for _, w := range r.watchers {
		if e.Type == container.EventContainer && !container.MatchLabels(e.Labels, w.labels) {
			continue
		}
		e.Labels = maps.Clone(e.Labels)
		select {
		case w.events <- e:
		default: // a reader that fell 1024 events behind loses them, like a slow engine client
		}
	}
}

// SetExec sets the command simulator.
func (r *Runtime) SetExec(f ExecFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ExecHandler = f
}

// Exec runs the command simulator on a running container.
func (r *Runtime) Exec(ctx context.Context, name string, opts container.ExecOptions) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("Exec")
	c, ok := r.containers[name]
	if !ok {
		return -1, notFound("container", name)
	}
	if !c.State.Running {
		return -1, errors.Errorf("exec in container %s: container is not running", name)
	}
	if r.ReadOnly == nil || !r.ReadOnly(opts.Cmd) {
		r.changed(c.State.Labels)
	}
	if r.ExecHandler == nil {
		code, ok, err := shell(ctx, c, opts)
		if !ok && opts.Stdin != nil {
			_, _ = io.Copy(io.Discard, opts.Stdin)
		}
		return code, err
	}
	return r.ExecHandler(ctx, c, opts)
}

// CopyToContainer extracts a tar stream into a container's file tree.
func (r *Runtime) CopyToContainer(_ context.Context, name, dir string, tarStream io.Reader) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("CopyToContainer")
	c, ok := r.containers[name]
	if !ok {
		return notFound("container", name)
	}
	r.changed(c.State.Labels)
	return ExtractTar(c.Files, dir, tarStream)
}

// ExtractTar writes the regular files of a tar stream into a file tree under dir.
func ExtractTar(files map[string][]byte, dir string, tarStream io.Reader) error {
	tr := tar.NewReader(tarStream)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errors.Wrap(err, "reading tar stream")
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			return errors.Wrap(err, "reading tar stream")
		}
		files[path.Join(dir, hdr.Name)] = content
	}
}

// CopyFromContainer returns a tar stream holding one file.
func (r *Runtime) CopyFromContainer(_ context.Context, name, file string) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("CopyFromContainer")
	c, ok := r.containers[name]
	if !ok {
		return nil, notFound("container", name)
	}
	content, ok := c.Files[file]
	if !ok {
		return nil, notFound("file", name+":"+file)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: path.Base(file), Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(content)
	_ = tw.Close()
	return io.NopCloser(&buf), nil
}

// ContainerLogs returns the container's last log lines.
func (r *Runtime) ContainerLogs(_ context.Context, name string, tailLines int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[name]
	if !ok {
		return "", notFound("container", name)
	}
	lines := append([]string{"fake logs of " + name}, c.Logs...)
	if tailLines > 0 && len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// CreateNetwork records a network with the given subnet, or else the first free one of its
// pools, like an engine choosing from its own: 172.30.0.0/16, 172.31.0.0/16, the other /16s of
// Docker's default pools, then /20s of private address space (container.DockerSubnetPools),
// none overlapping another network's subnet. It fails when none is left.
func (r *Runtime) CreateNetwork(_ context.Context, spec container.NetworkSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("CreateNetwork")
	if _, ok := r.networks[spec.Name]; ok {
		return errors.Errorf("network with name %s already exists", spec.Name)
	}
	subnet, gateway, ipRange := spec.Subnet, spec.Gateway, spec.IPRange
	var err error
	if subnet == "" {
		if subnet, err = r.freeSubnet(); err != nil {
			return errors.Wrapf(err, "network %s", spec.Name)
		}
	}
	prefix, err := netip.ParsePrefix(subnet)
	if err != nil {
		return errors.Wrapf(err, "network %s: subnet %q", spec.Name, subnet)
	}
	if gateway == "" {
		gateway = prefix.Addr().Next().String()
	}
	dynamic := prefix
	if ipRange != "" {
		if dynamic, err = netip.ParsePrefix(ipRange); err != nil || !prefix.Contains(dynamic.Addr()) {
			return errors.Errorf("network %s: address range %q is not within %s", spec.Name, ipRange, subnet)
		}
	}
	n := &container.Network{
		ID: spec.Name + "-id", Name: spec.Name, Labels: spec.Labels,
		Subnets: []string{prefix.Masked().String()}, Gateways: []string{gateway},
		Interface: fmt.Sprintf("br-fake%05d", len(r.networks)),
	}
	if spec.WantsIPv6() {
		p6, err := ipv6Pool(spec, len(r.networks))
		if err != nil {
			return err
		}
		n.Subnets, n.Gateways = append(n.Subnets, p6.subnet.String()), append(n.Gateways, p6.gateway)
		r.pools6[spec.Name] = p6
	}
	r.networks[spec.Name] = n
	r.networksByLabel.add(spec.Name, n.Labels)
	r.pools[spec.Name] = &pool{subnet: prefix.Masked(), range_: dynamic, gateway: gateway}
	r.changed(spec.Labels)
	return nil
}

// ipv6Pool is the IPv6 side of a dual-stack network: the spec's subnet, or one the fake picks.
func ipv6Pool(spec container.NetworkSpec, n int) (*pool, error) {
	subnet := spec.IPv6Subnet
	if subnet == "" {
		subnet = fmt.Sprintf("fd00:fa6e:%x::/64", n+1)
	}
	prefix, err := netip.ParsePrefix(subnet)
	if err != nil || !prefix.Addr().Is6() {
		return nil, errors.Errorf("network %s: IPv6 subnet %q is not an IPv6 CIDR", spec.Name, subnet)
	}
	p := &pool{subnet: prefix.Masked(), range_: prefix.Masked(), gateway: spec.IPv6Gateway}
	if p.gateway == "" {
		p.gateway = prefix.Masked().Addr().Next().String()
	}
	if spec.IPv6Range != "" {
		if p.range_, err = netip.ParsePrefix(spec.IPv6Range); err != nil || !prefix.Contains(p.range_.Addr()) {
			return nil, errors.Errorf("network %s: address range %q is not within %s", spec.Name, spec.IPv6Range, subnet)
		}
	}
	return p, nil
}

// freeSubnet is the first subnet of subnetPools that overlaps no network's.
func (r *Runtime) freeSubnet() (string, error) {
	taken := make([]netip.Prefix, 0, len(r.pools))
	for _, p := range r.pools {
		taken = append(taken, p.subnet)
	}
	p, err := container.FreeSubnet(subnetPools(), taken)
	return p.String(), err
}

// subnetPools are where the fake picks subnets: 172.30.0.0/16 and 172.31.0.0/16 first, as it
// always has (records and tests of the node layer know them), then Docker's default pools and
// the rest of private address space (container.DockerSubnetPools), skipping those two.
func subnetPools() []container.SubnetPool {
	return append([]container.SubnetPool{{Base: netip.MustParsePrefix("172.30.0.0/15"), Bits: 16}}, container.DockerSubnetPools()...)
}

// pool hands out the addresses of a network's range, skipping the gateway.
type pool struct {
	subnet  netip.Prefix
	range_  netip.Prefix
	gateway string
	last    netip.Addr
}

func (p *pool) next() string {
	if !p.last.IsValid() {
		p.last = p.range_.Masked().Addr()
	}
	for {
		p.last = p.last.Next()
		if p.last.String() != p.gateway {
			return p.last.String()
		}
	}
}

// InspectNetwork returns a network with the running containers attached to it.
func (r *Runtime) InspectNetwork(_ context.Context, name string) (*container.Network, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("InspectNetwork")
	n, ok := r.networks[name]
	if !ok {
		return nil, notFound("network", name)
	}
	out := *n
	out.Containers = r.attached(name)
	return &out, nil
}

func (r *Runtime) attached(network string) []string {
	var names []string
	for name := range r.index["network:"+network] {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ListNetworks returns the networks carrying the labels.
func (r *Runtime) ListNetworks(_ context.Context, labels map[string]string) ([]container.Network, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []container.Network
	for _, n := range r.networks {
		if container.MatchLabels(n.Labels, labels) {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveNetwork removes a network that no container uses.
func (r *Runtime) RemoveNetwork(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemoveNetwork")
	if used := r.attached(name); len(used) > 0 {
		return errors.Errorf("network %s has active endpoints: %v", name, used)
	}
	if n, ok := r.networks[name]; ok {
		r.emit(container.Event{Type: container.EventNetwork, Action: "destroy", Name: name})
		r.changed(n.Labels)
		r.networksByLabel.remove(name, n.Labels)
	}
	delete(r.networks, name)
	delete(r.pools, name)
	delete(r.pools6, name)
	return nil
}

// ConnectNetwork attaches a container to one more network, with a made-up address.
func (r *Runtime) ConnectNetwork(_ context.Context, network, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("ConnectNetwork")
	c, ok := r.containers[name]
	if !ok {
		return notFound("container", name)
	}
	if _, ok := r.networks[network]; !ok {
		return notFound("network", network)
	}
	if _, ok := c.State.Networks[network]; ok {
		return nil
	}
	c.State.Networks[network] = container.Endpoint{}
	if c.State.Running {
		c.State.Networks[network] = r.dynamicEndpoint(network)
	}
	r.reindex(c)
	r.changed(c.State.Labels)
	return nil
}

// DisconnectNetwork detaches a container from a network.
func (r *Runtime) DisconnectNetwork(_ context.Context, network, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("DisconnectNetwork")
	c, ok := r.containers[name]
	if !ok {
		return nil
	}
	delete(c.State.Networks, network)
	if c.Spec.Network == network {
		c.Spec.Network = ""
	}
	r.reindex(c)
	r.changed(c.State.Labels)
	return nil
}

// CreateVolume records a volume.
func (r *Runtime) CreateVolume(_ context.Context, spec container.VolumeSpec) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("CreateVolume")
	if v, ok := r.volumes[spec.Name]; ok {
		r.volumesByLabel.remove(spec.Name, v.Labels)
	}
	r.volumes[spec.Name] = &container.Volume{Name: spec.Name, Labels: spec.Labels}
	r.volumesByLabel.add(spec.Name, spec.Labels)
	r.changed(spec.Labels)
	return nil
}

// ListVolumes returns the volumes carrying the labels.
func (r *Runtime) ListVolumes(_ context.Context, labels map[string]string) ([]container.Volume, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []container.Volume
	for _, v := range r.volumes {
		if container.MatchLabels(v.Labels, labels) {
			out = append(out, *v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveVolume removes a volume no container mounts.
func (r *Runtime) RemoveVolume(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemoveVolume")
	for _, c := range r.containers {
		for _, m := range c.Spec.Mounts {
			if m.Type == container.MountVolume && m.Source == name {
				return errors.Errorf("volume %s is in use by %s", name, c.Spec.Name)
			}
		}
	}
	if v, ok := r.volumes[name]; ok {
		r.changed(v.Labels)
		r.volumesByLabel.remove(name, v.Labels)
	}
	delete(r.volumes, name)
	return nil
}

// ImageExists reports whether the fake engine has an image.
func (r *Runtime) ImageExists(_ context.Context, ref string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.images[ref]
	return ok, nil
}

// PullImage succeeds for Pullable images only, or for any with PullAnything.
func (r *Runtime) PullImage(_ context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("PullImage")
	if !r.Pullable[ref] && !r.PullAnything {
		return errors.Errorf("pulling image %s: dial tcp: lookup registry: no such host", ref)
	}
	if _, ok := r.images[ref]; !ok {
		r.images[ref] = nil
	}
	return nil
}

// image returns the content of an image, made up (an empty image labelled with its name) for
// the images the engine was made with.
func (r *Runtime) image(ref string) (v1.Image, error) {
	img, ok := r.images[ref]
	if !ok {
		return nil, notFound("image", ref)
	}
	if img != nil {
		return img, nil
	}
	cfg, err := empty.Image.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Labels = map[string]string{"fake.dockyard.x-k8s.io/name": ref}
	return mutate.ConfigFile(empty.Image, cfg)
}

// SaveImages returns a docker-save archive of images.
func (r *Runtime) SaveImages(_ context.Context, refs []string) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byTag := map[name.Tag]v1.Image{}
	for _, ref := range refs {
		img, err := r.image(ref)
		if err != nil {
			return nil, err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return nil, errors.Wrapf(err, "saving image %s", ref)
		}
		byTag[tag] = img
	}
	var buf bytes.Buffer
	if err := tarball.MultiWrite(byTag, &buf); err != nil {
		return nil, errors.Wrap(err, "writing image archive")
	}
	return io.NopCloser(&buf), nil
}

// ImagesInArchive lists the names of the images of a docker-save archive.
func ImagesInArchive(r io.Reader) ([]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, errors.Wrap(err, "reading image archive")
	}
	manifest, err := tarball.LoadManifest(opener(data))
	if err != nil {
		return nil, errors.Wrap(err, "reading image archive")
	}
	var names []string
	for _, m := range manifest {
		names = append(names, m.RepoTags...)
	}
	return names, nil
}

func opener(data []byte) tarball.Opener {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
}

// LoadImages adds the images of a docker-save archive under their names.
func (r *Runtime) LoadImages(_ context.Context, tarStream io.Reader) error {
	data, err := io.ReadAll(tarStream)
	if err != nil {
		return errors.Wrap(err, "reading image archive")
	}
	names, err := ImagesInArchive(bytes.NewReader(data))
	if err != nil {
		return err
	}
	loaded := map[string]v1.Image{}
	for _, n := range names {
		tag, err := name.NewTag(n)
		if err != nil {
			return errors.Wrapf(err, "loading image %s", n)
		}
		img, err := tarball.Image(opener(data), &tag)
		if err != nil {
			return errors.Wrapf(err, "loading image %s", n)
		}
		loaded[n] = img
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.images, loaded)
	return nil
}

// ContainerNames lists the names of all containers, sorted.
func (r *Runtime) ContainerNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n := range r.containers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// VolumeNames lists the names of all volumes, sorted.
func (r *Runtime) VolumeNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n := range r.volumes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NetworkNames lists the names of all networks, sorted.
func (r *Runtime) NetworkNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	for n := range r.networks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WithContainer runs f on a container while holding the engine's lock.
func (r *Runtime) WithContainer(name string, f func(c *Container)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[name]
	if ok {
		f(c)
		r.reindex(c) // f may have changed its labels or networks
	}
	return ok
}

// CallCount returns how often a method was called.
func (r *Runtime) CallCount(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Calls[method]
}

// CallTotal returns how many calls the engine answered, of every method.
func (r *Runtime) CallTotal() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.Calls {
		n += c
	}
	return n
}

// HasPrefix reports whether any file path in the tree starts with prefix.
func (c *Container) HasPrefix(prefix string) bool {
	for p := range c.Files {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// InspectImage returns an image's ID (its configuration's digest) and labels.
func (r *Runtime) InspectImage(_ context.Context, ref string) (*container.Image, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	img, err := r.image(ref)
	if err != nil {
		return nil, err
	}
	id, err := img.ConfigName()
	if err != nil {
		return nil, errors.Wrapf(err, "inspecting image %s", ref)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, errors.Wrapf(err, "inspecting image %s", ref)
	}
	return &container.Image{ID: id.String(), Labels: maps.Clone(cfg.Config.Labels)}, nil
}

// RemoveImage forgets an image no container uses.
func (r *Runtime) RemoveImage(_ context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count("RemoveImage")
	for _, c := range r.containers {
		if c.Spec.Image == ref {
			return errors.Errorf("removing image %s: conflict: container %s uses it", ref, c.Spec.Name)
		}
	}
	delete(r.images, ref)
	return nil
}

// resolvConf is the fake engine's /etc/resolv.conf: its host's search domain, or search.
func resolvConf(search *[]string) []byte {
	conf := "nameserver 192.0.2.53\n"
	switch {
	case search == nil:
		conf = "search fake-host.example\n" + conf
	case len(*search) > 0:
		conf = "search " + strings.Join(*search, " ") + "\n" + conf
	}
	return []byte(conf)
}

// Zones is none: the engine's containers run on one host.
func (r *Runtime) Zones(context.Context) ([]string, error) { return nil, nil }

// Balancer is nil: the engine does not balance traffic over its containers itself.
func (r *Runtime) Balancer() container.Balancer { return nil }
