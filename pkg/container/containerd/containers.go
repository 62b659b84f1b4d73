package containerd

import (
	"context"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/netns"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/sys/signal"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// CreateContainer creates a container: its containerd record and root filesystem snapshot,
// its network namespace (interfaces are added when it first starts), its volumes (filled from
// the image on first use) and its /etc files.
func (r *Runtime) CreateContainer(ctx context.Context, spec container.ContainerSpec) (err error) {
	ctx = ns(ctx)
	if !validName.MatchString(spec.Name) {
		return errors.Errorf("invalid container name %q", spec.Name)
	}
	if spec.IPv6Address != "" {
		return errors.Errorf("container %s: IPv6 addresses are not supported by the containerd runtime", spec.Name)
	}
	img, err := r.image(ctx, spec.Image) // may unpack: outside the lock
	if err != nil {
		return errors.Wrapf(err, "container %s", spec.Name)
	}
	// The lock keeps two creations of one name (from two processes) from sharing a record.
	defer r.lock()()
	if _, err := r.client.LoadContainer(ctx, spec.Name); err == nil {
		return errors.Errorf("container %s already exists", spec.Name)
	}
	if spec.Network != "" && spec.Network != "none" && spec.Network != "host" {
		if _, err := r.loadNetwork(spec.Network); err != nil {
			return errors.Wrapf(err, "container %s", spec.Name)
		}
	}
	// Leftovers of a container removed half-way go first.
	r.cleanupLeftovers(ctx, spec.Name)
	rec := newRecord(spec)
	defer func() {
		if err != nil {
			r.cleanupLeftovers(context.WithoutCancel(ctx), spec.Name)
		}
	}()
	if rec.Ports, err = resolvePorts(spec.Ports); err != nil {
		return errors.Wrapf(err, "container %s", spec.Name)
	}
	mounts, err := r.resolveMounts(spec, rec)
	if err != nil {
		return err
	}
	if err := r.writeContainerFiles(rec, spec.DNSSearch); err != nil {
		return errors.Wrapf(err, "container %s", spec.Name)
	}
	if spec.Network != "host" {
		n, err := newNetNS(r.opts.RunDir)
		if err != nil {
			return errors.Wrapf(err, "creating the network namespace of container %s", spec.Name)
		}
		rec.NetNS = n.GetPath()
	}
	if err := r.saveRecord(rec); err != nil {
		return err
	}
	return r.newContainer(ctx, spec, rec, img, mounts)
}

// newRecord is a new container's record, its hostname defaulting to the first 12 characters
// of its name.
func newRecord(spec container.ContainerSpec) *record {
	rec := &record{
		Name: spec.Name, Image: spec.Image, Hostname: spec.Hostname, Network: spec.Network,
		Aliases: spec.NetworkAliases, IPv4Address: spec.IPv4Address, StopSignal: spec.StopSignal,
		RestartPolicy: spec.RestartPolicy,
	}
	if rec.Hostname == "" {
		rec.Hostname = spec.Name
		if len(rec.Hostname) > 12 {
			rec.Hostname = rec.Hostname[:12]
		}
	}
	return rec
}

func (r *Runtime) newContainer(ctx context.Context, spec container.ContainerSpec, rec *record, img client.Image, mounts []specs.Mount) error {
	opts, err := r.specOpts(ctx, spec, rec, img, mounts)
	if err != nil {
		return err
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	_, err = r.client.NewContainer(ctx, spec.Name,
		client.WithImage(img),
		client.WithSnapshotter(Snapshotter),
		client.WithNewSnapshot(spec.Name, img),
		client.WithRuntime(runcRuntime, nil),
		client.WithContainerLabels(labels),
		client.WithNewSpec(opts...),
	)
	if err != nil {
		return wrap(err, "creating container %s", spec.Name)
	}
	return r.fillVolumes(ctx, spec.Name, rec)
}

// resolvePorts picks a free host port for published ports that name none (Docker picks one
// when the container starts; here it is kept from creation on).
func resolvePorts(in []container.PortMapping) ([]container.PortMapping, error) {
	out := make([]container.PortMapping, 0, len(in))
	for _, p := range in {
		p.Protocol = protocol(p)
		if p.HostPort == 0 {
			port, err := freePort(p)
			if err != nil {
				return nil, err
			}
			p.HostPort = port
		}
		out = append(out, p)
	}
	return out, nil
}

func freePort(p container.PortMapping) (int, error) {
	addr := net.JoinHostPort(p.HostIP, "0")
	if p.Protocol == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return 0, errors.Wrapf(err, "finding a free UDP port on %q", p.HostIP)
		}
		defer func() { _ = c.Close() }()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return 0, errors.Wrapf(err, "finding a free TCP port on %q", p.HostIP)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartContainer starts a created or stopped container: a stopped task is deleted and a new
// one started in the same network namespace, so the container keeps its addresses. Starting a
// running container is not an error.
func (r *Runtime) StartContainer(ctx context.Context, name string) error {
	ctx = ns(ctx)
	defer r.lock()()
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil {
		return wrap(err, "starting container %s", name)
	}
	rec, err := r.loadRecord(name)
	if err != nil {
		return err
	}
	if task, err := c.Task(ctx, nil); err == nil {
		st, err := task.Status(ctx)
		if err != nil {
			return wrap(err, "reading the state of container %s", name)
		}
		if st.Status == client.Running {
			return nil
		}
		if _, err := task.Delete(ctx, client.WithProcessKill); err != nil && !cerrdefs.IsNotFound(err) {
			return wrap(err, "deleting the stopped task of container %s", name)
		}
	} else if !cerrdefs.IsNotFound(err) {
		return wrap(err, "reading the task of container %s", name)
	}
	if err := r.checkPorts(ctx, rec); err != nil {
		return err
	}
	if err := r.ensureNetwork(ctx, c, rec); err != nil {
		return err
	}
	return r.startTask(ctx, c, rec)
}

// checkPorts fails with ErrPortInUse when a host port the container publishes is held by
// another running container or a process of the host: CNI's portmap rewrites traffic without
// binding the port, so neither would be noticed otherwise.
func (r *Runtime) checkPorts(ctx context.Context, rec *record) error {
	if len(rec.Ports) == 0 {
		return nil
	}
	others, err := r.listRecords()
	if err != nil {
		return err
	}
	for _, p := range rec.Ports {
		for _, o := range others {
			if o.Name == rec.Name || !r.taskRunning(ctx, o.Name) {
				continue
			}
			for _, op := range o.Ports {
				if op.HostPort == p.HostPort && protocol(op) == protocol(p) && (op.HostIP == p.HostIP || op.HostIP == "" || p.HostIP == "") {
					return errors.Wrapf(container.ErrPortInUse, "starting container %s: host port %s/%d is published by container %s", rec.Name, protocol(p), p.HostPort, o.Name)
				}
			}
		}
		if err := bindable(p); err != nil {
			return errors.Wrapf(container.ErrPortInUse, "starting container %s: host port %s/%d: %v", rec.Name, protocol(p), p.HostPort, err)
		}
	}
	return nil
}

// taskRunning reports whether a container's task runs.
func (r *Runtime) taskRunning(ctx context.Context, name string) bool {
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil {
		return false
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return false
	}
	st, err := task.Status(ctx)
	return err == nil && st.Status == client.Running
}

// bindable fails when a process of the host holds a port.
func bindable(p container.PortMapping) error {
	addr := net.JoinHostPort(p.HostIP, strconv.Itoa(p.HostPort))
	if protocol(p) == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// ensureNetwork gives the container a network namespace again if the host lost it (a reboot
// empties RunDir) and its primary interface if it has none yet.
func (r *Runtime) ensureNetwork(ctx context.Context, c client.Container, rec *record) error {
	if rec.NetNS == "" {
		return nil
	}
	if _, err := os.Stat(rec.NetNS); err != nil {
		if err := r.renewNetNS(ctx, c, rec); err != nil {
			return err
		}
	}
	primary := rec.Network != "" && rec.Network != "none"
	if primary && rec.attachment(rec.Network) == nil {
		if err := r.attach(ctx, rec, rec.Network, true); err != nil {
			return err
		}
		return r.saveRecord(rec)
	}
	return nil
}

// renewNetNS gives a container whose network namespace is gone a new one with the same
// networks (and fixed address): the old interfaces' addresses and rules are released first,
// and the container's spec is pointed at the new namespace.
func (r *Runtime) renewNetNS(ctx context.Context, c client.Container, rec *record) error {
	old := rec.Attachments
	n, err := newNetNS(r.opts.RunDir)
	if err != nil {
		return errors.Wrapf(err, "creating a network namespace for container %s", rec.Name)
	}
	rec.NetNS = n.GetPath()
	for i := range old {
		if err := r.detachGone(ctx, n, rec, &old[i]); err != nil {
			return err
		}
	}
	rec.Attachments = nil
	if err := r.saveRecord(rec); err != nil {
		return err
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return wrap(err, "reading the spec of container %s", rec.Name)
	}
	for i, ns := range spec.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			spec.Linux.Namespaces[i].Path = rec.NetNS
		}
	}
	if err := c.Update(ctx, client.UpdateContainerOpts(client.WithSpec(spec))); err != nil {
		return wrap(err, "updating the network namespace of container %s", rec.Name)
	}
	if rec.Network != "" && rec.Network != "none" {
		if err := r.attach(ctx, rec, rec.Network, true); err != nil {
			return err
		}
	}
	for _, a := range old {
		if a.Network != rec.Network {
			if err := r.attach(ctx, rec, a.Network, false); err != nil {
				return err
			}
		}
	}
	return r.saveRecord(rec)
}

func (r *Runtime) startTask(ctx context.Context, c client.Container, rec *record) error {
	spec, err := c.Spec(ctx)
	if err != nil {
		return wrap(err, "reading the spec of container %s", rec.Name)
	}
	task, err := c.NewTask(ctx, logFileIO(r.logPath(rec.Name), spec.Process != nil && spec.Process.Terminal))
	if err != nil {
		return wrap(err, "creating the task of container %s", rec.Name)
	}
	rec.StartedAt, rec.FinishedAt, rec.ExitCode = time.Now().UTC(), time.Time{}, 0
	if err := r.saveRecord(rec); err != nil {
		return err
	}
	if err := task.Start(ctx); err != nil {
		_, _ = task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
		return wrap(err, "starting container %s", rec.Name)
	}
	return nil
}

// InspectContainer returns the state of a container.
func (r *Runtime) InspectContainer(ctx context.Context, name string) (*container.Container, error) {
	ctx = ns(ctx)
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil {
		return nil, wrap(err, "inspecting container %s", name)
	}
	out, err := r.describe(ctx, c)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// describe reads a container's state from containerd (labels, task) and the runtime's record
// (networks, ports, times).
func (r *Runtime) describe(ctx context.Context, c client.Container) (*container.Container, error) {
	info, err := c.Info(ctx, client.WithoutRefreshedMetadata)
	if err != nil {
		return nil, wrap(err, "inspecting container %s", c.ID())
	}
	rec, err := r.loadRecord(c.ID())
	if err != nil {
		return nil, err
	}
	out := &container.Container{
		ID: c.ID(), Name: c.ID(), Hostname: rec.Hostname, Image: rec.Image, Labels: info.Labels,
		State: "created", ExitCode: rec.ExitCode, StartedAt: rec.StartedAt,
		Networks: map[string]container.Endpoint{}, Ports: append([]container.PortMapping{}, rec.Ports...),
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if !rec.StartedAt.IsZero() {
		out.State = "exited"
	}
	for _, a := range rec.Attachments {
		out.Networks[a.Network] = container.Endpoint{IPv4: a.IPv4, IPv6: a.IPv6}
	}
	task, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return out, nil
	}
	if err != nil {
		return nil, wrap(err, "reading the task of container %s", c.ID())
	}
	st, err := task.Status(ctx)
	if err != nil {
		return nil, wrap(err, "reading the state of container %s", c.ID())
	}
	switch st.Status {
	case client.Running:
		out.State, out.Running = "running", true
	case client.Created:
		out.State = "created"
	case client.Stopped:
		out.State, out.ExitCode = "exited", int(st.ExitStatus)
	case client.Paused, client.Pausing:
		out.State = "paused"
	default:
		out.State = string(st.Status)
	}
	return out, nil
}

// ListContainers returns every container carrying the labels.
func (r *Runtime) ListContainers(ctx context.Context, labels map[string]string) ([]container.Container, error) {
	ctx = ns(ctx)
	cs, err := r.client.Containers(ctx)
	if err != nil {
		return nil, wrap(err, "listing containers")
	}
	out := []container.Container{}
	for _, c := range cs {
		l, err := c.Labels(ctx)
		if err != nil || !container.MatchLabels(l, labels) {
			continue
		}
		d, err := r.describe(ctx, c)
		if container.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		d.Hostname = ""
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SignalContainer sends a signal to a running container's main process.
func (r *Runtime) SignalContainer(ctx context.Context, name, sig string) error {
	ctx = ns(ctx)
	s, err := signal.ParseSignal(sig)
	if err != nil {
		return errors.Wrapf(err, "signal %q", sig)
	}
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil {
		return wrap(err, "sending %s to container %s", sig, name)
	}
	task, err := runningTask(ctx, c)
	if err != nil {
		return errors.Wrapf(err, "sending %s to container %s", sig, name)
	}
	return wrap(task.Kill(ctx, s), "sending %s to container %s", sig, name)
}

// runningTask returns a container's task when it runs, and an error that is not ErrNotFound
// (the container exists) when it does not.
func runningTask(ctx context.Context, c client.Container) (client.Task, error) {
	task, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return nil, errors.Errorf("container %s is not running", c.ID())
	}
	if err != nil {
		return nil, wrap(err, "reading the task of container %s", c.ID())
	}
	st, err := task.Status(ctx)
	if err != nil {
		return nil, wrap(err, "reading the state of container %s", c.ID())
	}
	if st.Status != client.Running {
		return nil, errors.Errorf("container %s is not running (%s)", c.ID(), st.Status)
	}
	return task, nil
}

// RemoveContainer kills and removes a container with its task, snapshot, network interfaces
// and namespace, anonymous volumes, logs and record.
func (r *Runtime) RemoveContainer(ctx context.Context, name string) error {
	ctx = ns(ctx)
	defer r.lock()()
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return wrap(err, "removing container %s", name)
	}
	if err == nil {
		if err := killTask(ctx, c); err != nil {
			return err
		}
	}
	if err := r.releaseNetwork(ctx, name); err != nil {
		return err
	}
	if c != nil {
		if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil && !cerrdefs.IsNotFound(err) {
			return wrap(err, "removing container %s", name)
		}
	}
	if err := os.RemoveAll(r.containerDir(name)); err != nil {
		return errors.Wrapf(err, "removing the files of container %s", name)
	}
	return r.refreshHosts("")
}

// killTask kills a container's task, if any, and deletes it.
func killTask(ctx context.Context, c client.Container) error {
	task, err := c.Task(ctx, nil)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return wrap(err, "reading the task of container %s", c.ID())
	}
	_, err = task.Delete(ctx, client.WithProcessKill)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return wrap(err, "deleting the task of container %s", c.ID())
	}
	return nil
}

// releaseNetwork deletes a container's interfaces (giving their addresses back) and network
// namespace.
func (r *Runtime) releaseNetwork(ctx context.Context, name string) error {
	rec, err := r.loadRecord(name)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := range rec.Attachments {
		if err := r.detach(ctx, rec, &rec.Attachments[i]); err != nil {
			return err
		}
	}
	rec.Attachments = nil
	if rec.NetNS != "" {
		if err := netns.LoadNetNS(rec.NetNS).Remove(); err != nil && !errors.Is(err, syscall.ENOENT) {
			return errors.Wrapf(err, "removing the network namespace of container %s", name)
		}
	}
	return r.saveRecord(rec)
}

// cleanupLeftovers removes what a failed create or an interrupted removal left of a container
// containerd does not know.
func (r *Runtime) cleanupLeftovers(ctx context.Context, name string) {
	if c, err := r.client.LoadContainer(ctx, name); err == nil {
		_ = killTask(ctx, c)
		_ = c.Delete(ctx, client.WithSnapshotCleanup)
	}
	_ = r.releaseNetwork(ctx, name)
	_ = os.RemoveAll(r.containerDir(name))
}
