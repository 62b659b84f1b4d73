package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A local registry is a container of distribution's registry on the engine (`dockyard
// registry create`): its blobs on a volume of its own, its port published on the host, where
// `docker push localhost:<port>/app:dev` reaches it, and attached to the network of every
// cluster that uses it, where the nodes' containerd pulls "localhost:<port>/..." from it
// (registryHostsFile). Nodes never need the host's network.

const (
	// registryLabel holds the registry's name on its container, volume and network.
	registryLabel = "dockyard.x-k8s.io/registry"
	// registryHostLabel holds the address images name it by on the host: "localhost:<port>".
	registryHostLabel = "dockyard.x-k8s.io/registry-host"
	// RegistryPort is the port the registry serves in its container.
	RegistryPort = 5000
	// DefaultRegistryName and DefaultRegistryHostPort are `dockyard registry create`'s.
	DefaultRegistryName     = "dockyard-registry"
	DefaultRegistryHostPort = 5001
)

// RegistrySpec describes a local registry.
type RegistrySpec struct {
	Name, Image string
	// HostPort is published on ListenAddress (127.0.0.1 when empty).
	HostPort      int
	ListenAddress string
}

// Registry is a local registry on the engine.
type Registry struct {
	Name string
	c    *container.Container
}

// Host is the address images name the registry by: localhost:<host port>.
func (r *Registry) Host() string { return r.c.Labels[registryHostLabel] }

// Running reports whether the registry's container runs.
func (r *Registry) Running() bool { return r.c.Running }

// State is the engine's state word of the registry's container.
func (r *Registry) State() string { return r.c.State }

// Address is the registry's address on a network, "" when it is not attached to it.
func (r *Registry) Address(network string) string { return nodeAddress(r.c, network) }

func registryVolume(name string) string  { return name + "-data" }
func registryNetwork(name string) string { return name }

// CreateRegistry creates and starts a local registry, or returns the one of that name when it
// has the same host port. Its data volume is kept across restarts and re-creations.
func (m *Manager) CreateRegistry(ctx context.Context, spec RegistrySpec) (*Registry, error) {
	if spec.Name == "" || spec.Image == "" || spec.HostPort <= 0 {
		return nil, errors.New("a registry needs a name, an image and a host port")
	}
	host := "localhost:" + strconv.Itoa(spec.HostPort)
	if r, err := m.FindRegistry(ctx, spec.Name); err != nil || r != nil {
		if r != nil && r.Host() != host {
			return nil, errors.Errorf("registry %s exists already, serving %s: delete it first to publish it on another port", spec.Name, r.Host())
		}
		if r != nil && !r.Running() {
			if err := m.runtime.StartContainer(ctx, r.Name); err != nil {
				return nil, errors.Wrapf(err, "starting registry %s", r.Name)
			}
			return m.FindRegistry(ctx, spec.Name)
		}
		return r, err
	}
	if c, err := m.runtime.InspectContainer(ctx, spec.Name); err == nil {
		return nil, errors.Errorf("a container named %s exists already and is not a registry Dockyard made: choose another name", c.Name)
	} else if !container.IsNotFound(err) {
		return nil, err
	}
	if err := m.EnsureImage(ctx, spec.Image); err != nil {
		return nil, err
	}
	labels := map[string]string{registryLabel: spec.Name, registryHostLabel: host}
	// Its own network: an engine publishes ports of containers on networks of its own.
	if _, err := m.runtime.InspectNetwork(ctx, registryNetwork(spec.Name)); container.IsNotFound(err) {
		if err := m.runtime.CreateNetwork(ctx, container.NetworkSpec{Name: registryNetwork(spec.Name), Labels: labels}); err != nil {
			return nil, errors.Wrapf(err, "creating the network of registry %s", spec.Name)
		}
	} else if err != nil {
		return nil, err
	}
	if err := m.runtime.CreateVolume(ctx, container.VolumeSpec{Name: registryVolume(spec.Name), Labels: labels}); err != nil {
		return nil, errors.Wrapf(err, "creating the volume of registry %s", spec.Name)
	}
	err := m.createAndStart(ctx, container.ContainerSpec{
		Name: spec.Name, Hostname: spec.Name, Image: spec.Image, Labels: labels, Network: registryNetwork(spec.Name),
		Mounts:        []container.Mount{{Type: container.MountVolume, Source: registryVolume(spec.Name), Target: "/var/lib/registry"}},
		Ports:         []container.PortMapping{{ContainerPort: RegistryPort, Protocol: "tcp", HostIP: orDefault(spec.ListenAddress, "127.0.0.1"), HostPort: spec.HostPort}},
		RestartPolicy: "unless-stopped",
	})
	if err != nil {
		if container.IsPortInUse(err) {
			_ = m.runtime.RemoveContainer(ctx, spec.Name)
			return nil, errors.Wrapf(err, "host port %d is taken: choose another with --port", spec.HostPort)
		}
		return nil, errors.Wrapf(err, "starting registry %s", spec.Name)
	}
	return m.FindRegistry(ctx, spec.Name)
}

// FindRegistry returns the local registry of that name, or nil.
func (m *Manager) FindRegistry(ctx context.Context, name string) (*Registry, error) {
	c, err := m.runtime.InspectContainer(ctx, name)
	if container.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.Wrapf(err, "finding registry %s", name)
	}
	if c.Labels[registryLabel] != name {
		return nil, nil
	}
	return &Registry{Name: name, c: c}, nil
}

// DeleteRegistry removes a local registry's container and network and, unless keepData, its
// volume. A registry that does not exist is not an error.
func (m *Manager) DeleteRegistry(ctx context.Context, name string, keepData bool) error {
	var errs []error
	if r, err := m.FindRegistry(ctx, name); err != nil {
		return err
	} else if r != nil {
		errs = append(errs, m.runtime.RemoveContainer(ctx, name))
	}
	if n, err := m.runtime.InspectNetwork(ctx, registryNetwork(name)); err == nil && n.Labels[registryLabel] == name {
		errs = append(errs, m.runtime.RemoveNetwork(ctx, n.Name))
	}
	if !keepData {
		errs = append(errs, m.runtime.RemoveVolume(ctx, registryVolume(name)))
	}
	return kerrors.NewAggregate(errs)
}

// ConnectRegistry attaches a local registry to a cluster's network (once) and returns it as it
// is now; nil when there is no registry of that name.
func (m *Manager) ConnectRegistry(ctx context.Context, name, network string) (*Registry, error) {
	r, err := m.FindRegistry(ctx, name)
	if err != nil || r == nil {
		return nil, err
	}
	if _, ok := r.c.Networks[network]; ok {
		return r, nil
	}
	if err := m.runtime.ConnectNetwork(ctx, network, name); err != nil {
		return nil, errors.Wrapf(err, "attaching registry %s to network %s", name, network)
	}
	return m.FindRegistry(ctx, name)
}

// disconnectRegistries detaches every local registry from a network about to be removed.
func (m *Manager) disconnectRegistries(ctx context.Context, network string) error {
	registries, err := m.runtime.ListContainers(ctx, map[string]string{registryLabel: ""})
	if err != nil {
		return errors.Wrap(err, "listing the local registries")
	}
	var errs []error
	for _, r := range registries {
		if _, ok := r.Networks[network]; ok {
			errs = append(errs, m.runtime.DisconnectNetwork(ctx, network, r.Name))
		}
	}
	return kerrors.NewAggregate(errs)
}

// containerdHostsDir is containerd's config_path in Dockyard's and kind's node images, where it
// reads how to reach each registry host (<host>/hosts.toml) at every pull.
const containerdHostsDir = "/etc/containerd/certs.d"

func registryHostsFile(host string) string { return containerdHostsDir + "/" + host + "/hosts.toml" }

// registryHosts is a node's hosts.toml for a registry host served at address.
func registryHosts(host, address string) string {
	server := "http://" + net.JoinHostPort(address, strconv.Itoa(RegistryPort))
	return fmt.Sprintf("# Written by Dockyard: %s is the local registry, on the cluster's network.\nserver = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", host, server, server)
}

// UseRegistry points the node's containerd at a local registry on the network: images named
// <registry host>/... are pulled from its address there. It changes nothing when the node has
// that configuration already; containerd reads it at each pull, no restart needed.
func (n *Node) UseRegistry(ctx context.Context, r *Registry, network string) error {
	address := r.Address(network)
	if address == "" {
		return errors.Errorf("registry %s is not attached to network %s", r.Name, network)
	}
	file, want := registryHostsFile(r.Host()), registryHosts(r.Host(), address)
	if got, err := n.m.readFile(ctx, n.Name, file); err == nil && string(got) == want {
		return nil
	}
	// Through the engine's archive API, into /etc/containerd, which every node image has.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	rel := strings.TrimPrefix(file, "/etc/containerd/")
	for _, dir := range []string{path.Dir(path.Dir(rel)), path.Dir(rel)} {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Now()}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(want)), ModTime: time.Now()}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(want)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return errors.Wrapf(n.m.runtime.CopyToContainer(ctx, n.Name, "/etc/containerd", &buf), "configuring registry %s in node %s", r.Host(), n.Name)
}
