package podman

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/dockerengine"
)

// DefaultEndpoint is rootful Podman's API socket.
const DefaultEndpoint = "unix:///run/podman/podman.sock"

// Runtime is a container.Runtime backed by a Podman engine. The embedded dockerengine.Runtime
// speaks Podman's Docker-compatible API for everything it gets right; the methods defined in
// this package replace the rest (see doc.go for each difference).
type Runtime struct {
	*dockerengine.Runtime
	compat   *client.Client
	libpod   *libpod
	removals *broker // networks this Runtime removed, for Events (Podman emits no network events)

	mu             sync.Mutex
	defaultNetwork string // the name of the network Docker calls "bridge", once known
}

var _ container.Runtime = &Runtime{}

// New connects to the Podman API at endpoint (unix:///path or tcp://host:port; empty means
// DefaultEndpoint). It does not read DOCKER_HOST: that names a Docker engine. Nothing is
// sent until the first call.
func New(endpoint string) (*Runtime, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	lp, err := newLibpod(endpoint)
	if err != nil {
		return nil, err
	}
	c, err := client.New(client.WithHost(endpoint))
	if err != nil {
		return nil, errors.Wrapf(err, "creating a client of Podman's Docker-compatible API at %s", endpoint)
	}
	return &Runtime{Runtime: dockerengine.NewFromClient(c), compat: c, libpod: lp, removals: newBroker()}, nil
}

// Close releases the clients' connections.
func (r *Runtime) Close() error {
	r.libpod.client.CloseIdleConnections()
	return r.Runtime.Close()
}

// Info describes the engine; the compatible API reports the cgroup version and driver, and
// the host's CPUs, memory and architecture.
func (r *Runtime) Info(ctx context.Context) (container.EngineInfo, error) {
	res, err := r.compat.Info(ctx, client.InfoOptions{})
	if err != nil {
		return container.EngineInfo{}, errors.Wrap(err, "reading Podman engine info")
	}
	return container.EngineInfo{
		Name:            "podman",
		Version:         res.Info.ServerVersion,
		CgroupVersion:   res.Info.CgroupVersion,
		CgroupDriver:    res.Info.CgroupDriver,
		OperatingSystem: res.Info.OperatingSystem,
		CPUs:            res.Info.NCPU,
		MemoryBytes:     res.Info.MemTotal,
		Architecture:    container.GoArch(res.Info.Architecture),
	}, nil
}

// RemoveContainer force-removes a container and its anonymous volumes through libpod with a
// zero stop timeout: the compatible API's removal waits the container's stop timeout (10s)
// before it kills a running container, where Docker kills at once.
func (r *Runtime) RemoveContainer(ctx context.Context, name string) error {
	q := url.Values{"force": {"true"}, "v": {"true"}, "timeout": {"0"}}
	err := r.libpod.do(ctx, "DELETE", "/containers/"+url.PathEscape(name), q, nil, nil)
	if container.IsNotFound(err) {
		return nil
	}
	return errors.Wrapf(err, "removing container %s", name)
}

// StartContainer starts a container. When the host's configuration makes every container fail
// to start, the error names the fix (startFailureFix).
func (r *Runtime) StartContainer(ctx context.Context, name string) error {
	err := r.Runtime.StartContainer(ctx, name)
	if fix := startFailureFix(err); fix != "" {
		return errors.Wrap(err, fix)
	}
	return err
}

// startFailureFix names the fix for the start failures that come from the engine host's
// configuration rather than from the container, or "" for any other error (and for nil).
func startFailureFix(err error) string {
	switch {
	case err == nil:
		return ""
	case strings.Contains(err.Error(), "error setting rlimit"):
		return "the engine's default container ulimits exceed the engine host's hard limits: " +
			`set [containers] default_ulimits = ["nofile=<ulimit -Hn>:<ulimit -Hn>", "nproc=<N>:<N>"] (N: ulimit -Hu, at most kernel.pid_max; ` +
			"soft equal to hard, as Podman 4.3's API swaps them) " +
			"in /etc/containers/containers.conf and restart the Podman service (hack/ensure-podman.sh does this)"
	case strings.Contains(err.Error(), "cgroups in hybrid mode not supported"):
		return "the OCI runtime crun refuses hybrid cgroups with controllers on cgroup v2, as this host has: " +
			`install runc, set [engine] runtime = "runc" in /etc/containers/containers.conf ` +
			"and restart the Podman service (hack/ensure-podman.sh does this)"
	}
	return ""
}

// InspectContainer returns the state of a container. A container on the engine's default
// network is reported on it under Podman's name ("podman") and Docker's ("bridge"): Podman's
// compatible API takes "bridge" on create but reports "podman".
func (r *Runtime) InspectContainer(ctx context.Context, name string) (*container.Container, error) {
	c, err := r.Runtime.InspectContainer(ctx, name)
	if err != nil {
		return nil, err
	}
	r.aliasDefaultNetwork(ctx, c.Networks)
	return c, nil
}

// ListContainers returns every container carrying all the labels. The engine's label filter
// is checked again here (see ListVolumes); the default network is aliased as in
// InspectContainer.
func (r *Runtime) ListContainers(ctx context.Context, labels map[string]string) ([]container.Container, error) {
	cs, err := r.Runtime.ListContainers(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := cs[:0]
	for _, c := range cs {
		if container.MatchLabels(c.Labels, labels) {
			r.aliasDefaultNetwork(ctx, c.Networks)
			out = append(out, c)
		}
	}
	return out, nil
}

// aliasDefaultNetwork adds a "bridge" entry for an endpoint on the default network. When the
// engine cannot say which network that is, nothing is added.
func (r *Runtime) aliasDefaultNetwork(ctx context.Context, networks map[string]container.Endpoint) {
	if len(networks) == 0 {
		return
	}
	if _, ok := networks["bridge"]; ok {
		return
	}
	def := r.defaultNetworkName(ctx)
	if ep, ok := networks[def]; ok && def != "" {
		networks["bridge"] = ep
	}
}

// defaultNetworkName asks the engine once which network "bridge" stands for.
func (r *Runtime) defaultNetworkName(ctx context.Context) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.defaultNetwork != "" {
		return r.defaultNetwork
	}
	res, err := r.compat.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		return ""
	}
	var n struct {
		Name string `json:"name"`
	}
	if err := r.libpod.do(ctx, "GET", "/networks/"+url.PathEscape(res.Network.ID)+"/json", nil, nil, &n); err != nil {
		return ""
	}
	r.defaultNetwork = n.Name
	return n.Name
}

// ListNetworks returns the networks carrying all the labels, re-checked here.
func (r *Runtime) ListNetworks(ctx context.Context, labels map[string]string) ([]container.Network, error) {
	ns, err := r.Runtime.ListNetworks(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := ns[:0]
	for _, n := range ns {
		if container.MatchLabels(n.Labels, labels) {
			out = append(out, n)
		}
	}
	return out, nil
}

// ListVolumes returns the volumes carrying all the labels. Podman's volume label filter
// matches volumes carrying ANY of the given labels, so every label is checked here: trusting
// it once made Dockyard delete another machine's volume.
func (r *Runtime) ListVolumes(ctx context.Context, labels map[string]string) ([]container.Volume, error) {
	vs, err := r.Runtime.ListVolumes(ctx, labels)
	if err != nil {
		return nil, err
	}
	out := vs[:0]
	for _, v := range vs {
		if container.MatchLabels(v.Labels, labels) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveNetwork removes a network and reports its removal to this Runtime's Events streams:
// Podman emits no network events.
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	_, err := r.compat.NetworkRemove(ctx, name, client.NetworkRemoveOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "removing network %s", name)
	}
	r.removals.publish(name)
	return nil
}
