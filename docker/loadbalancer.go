package docker

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
)

const (
	// LoadBalancerConfigPath is where the load balancer image reads haproxy's configuration
	// (the kindest/haproxy layout, which Dockyard's own image follows).
	LoadBalancerConfigPath = "/usr/local/etc/haproxy/haproxy.cfg"
	// loadBalancerReloadSignal makes haproxy's master process load the new configuration with
	// new workers while the old ones finish their established connections.
	loadBalancerReloadSignal = "SIGHUP"

	// hostPortLabel on a load balancer holds the host port pinned in its configuration, which
	// the engine publishes it on at every start (its own, the engine's, the host's). A load
	// balancer without it gets the port the engine picks at each start.
	hostPortLabel = "dockyard.x-k8s.io/host-port"
	// hostPortTakenLabel on a load balancer holds the host port it was to be pinned to, which
	// another process or container held when it was created: it is published on a port the
	// engine picked instead.
	hostPortTakenLabel = "dockyard.x-k8s.io/host-port-taken"
)

// LoadBalancerSpec describes a cluster's load balancer container.
type LoadBalancerSpec struct {
	Cluster ClusterKey
	Image   string
	Network string
	// Port the load balancer serves the API on (the cluster's endpoint port); APIServerPort
	// when 0.
	Port int
	// HostPort is where Port is published on the engine's host (127.0.0.1), pinned in the
	// container's configuration so that every start publishes it there. When another process
	// or container holds it, the load balancer is published on a port the engine picks
	// (TakenHostPort). 0: the engine picks a port for a new load balancer, which is then
	// created again at once with that port pinned.
	HostPort int
}

// loadBalancers is how an engine gives each cluster's control plane one address, chosen once
// per engine (NewManager): a haproxy container per cluster (haproxies, below), or, on an engine
// that balances traffic itself, its front (fronts, front.go). Controllers see the same
// LoadBalancer handle either way.
type loadBalancers interface {
	// ensure makes the cluster's load balancer run, or keeps the one there.
	ensure(ctx context.Context, spec LoadBalancerSpec) (*LoadBalancer, error)
	// find returns the cluster's load balancer, nil when it has none.
	find(ctx context.Context, cluster ClusterKey) (*LoadBalancer, error)
	// remove removes it; one that is gone is not an error.
	remove(ctx context.Context, cluster ClusterKey) error
	// update sends the API to the backends; false when nothing changed.
	update(ctx context.Context, lb *LoadBalancer, tmpl string, backends func(context.Context) ([]haproxy.Backend, error)) (bool, error)
	// nodePort is where the load balancer also answers on the engine's hosts; none for a
	// container.
	nodePort(ctx context.Context, lb *LoadBalancer) (hosts []string, port int, err error)
	// collectLogs writes what a person needs to debug the load balancer into dir.
	collectLogs(ctx context.Context, lb *LoadBalancer, dir *logdir.Dir) error
	// fronted reports whether the engine's front reaches the control plane nodes, which then
	// publish nothing for the API server on a host.
	fronted() bool
}

// LoadBalancer is a handle on a cluster's load balancer, as Node is on a node: what the engine
// said of it when the handle was made, and what controllers do with it. Look it up again
// (FindLoadBalancer) to see its state change.
type LoadBalancer struct {
	lbs loadBalancers

	// Name is the load balancer's name on the engine.
	Name    string
	Cluster ClusterKey
	// Running and State are the engine's words of it; the engine's front always runs.
	Running bool
	State   string
	// Pending says why the load balancer has no address yet: the engine's front waiting for
	// one from its infrastructure (a Kubernetes Service of type LoadBalancer); "" otherwise.
	Pending string
	// Port is where it serves the API server: the port it was asked for, or the one the
	// engine's front was given where that one was taken (the in-memory engine's).
	Port int
	// TakenHostPort is the host port the load balancer was to be pinned to but is not, because
	// another process or container held it when it was created; 0 otherwise.
	TakenHostPort int

	// addresses are its addresses by network; anyNetwork, when set, is its address whatever
	// the network (a front).
	addresses  map[string]string
	anyNetwork string
	// ports are the ports it publishes on the engine's host; frontNodePort the node port of a
	// front.
	ports         []container.PortMapping
	frontNodePort int
	// c is the container of a haproxy load balancer, front the engine's front.
	c     *container.Container
	front *container.Front
}

// Address returns the load balancer's address on a network (IPv4, or IPv6 when it has no IPv4),
// "" when it is not attached to it.
func (lb *LoadBalancer) Address(network string) string {
	if lb.anyNetwork != "" {
		return lb.anyNetwork
	}
	return lb.addresses[network]
}

// PublishedPort returns where a port of the load balancer is published on the engine's host;
// a zero port when it is not.
func (lb *LoadBalancer) PublishedPort(port int) (hostIP string, hostPort int) {
	return publishedPort(lb.ports, port)
}

func publishedPort(ports []container.PortMapping, port int) (hostIP string, hostPort int) {
	for _, p := range ports {
		if p.ContainerPort == port && p.HostPort != 0 {
			return p.HostIP, p.HostPort
		}
	}
	return "", 0
}

// Update sends the API to the control plane nodes the function returns: a haproxy load
// balancer renders its configuration with them and, when it changed, writes it next to the
// live one, has haproxy check it, puts it in place and reloads haproxy without dropping
// established connections; the engine's front follows the ready nodes itself and has nothing to
// do. The backends are computed under a per-cluster lock, so concurrent updates never write an
// older view last. It reports whether it changed anything.
func (lb *LoadBalancer) Update(ctx context.Context, tmpl string, backends func(context.Context) ([]haproxy.Backend, error)) (bool, error) {
	return lb.lbs.update(ctx, lb, tmpl, backends)
}

// NodePort is where a load balancer that is the engine's front also answers from outside the
// engine's network: the addresses of the engine's hosts now and the port; none for a container
// (or no load balancer). The hosts are asked for here, not with every look at the front.
func (lb *LoadBalancer) NodePort(ctx context.Context) (hosts []string, port int, err error) {
	if lb == nil {
		return nil, 0, nil
	}
	return lb.lbs.nodePort(ctx, lb)
}

// CollectLogs writes what a person needs to debug the load balancer into dir: a container's
// haproxy configuration, console output (haproxy's log) and the engine's inspect data; a
// front's description. One removed since it was listed gets its inspect data and removed.txt,
// and no error.
func (lb *LoadBalancer) CollectLogs(ctx context.Context, dir *logdir.Dir) error {
	return errors.Wrapf(lb.lbs.collectLogs(ctx, lb, dir), "collecting the logs of load balancer %s", lb.Name)
}

// EnsureLoadBalancer returns the running load balancer of a cluster: a haproxy container (see
// haproxies.ensure) or the engine's front. Its configuration is rendered by Update.
func (m *Manager) EnsureLoadBalancer(ctx context.Context, spec LoadBalancerSpec) (*LoadBalancer, error) {
	return m.lbs.ensure(ctx, spec)
}

// FindLoadBalancer returns the handle of a cluster's load balancer, nil when it has none.
func (m *Manager) FindLoadBalancer(ctx context.Context, cluster ClusterKey) (*LoadBalancer, error) {
	return m.lbs.find(ctx, cluster)
}

// haproxies are load balancers that are haproxy containers on the cluster's network.
type haproxies struct{ m *Manager }

func (h *haproxies) fronted() bool { return false }

// handle is the LoadBalancer of a haproxy container; nil for none.
func (h *haproxies) handle(cluster ClusterKey, c *container.Container) *LoadBalancer {
	if c == nil {
		return nil
	}
	lb := &LoadBalancer{
		lbs: h, c: c, Name: c.Name, Cluster: cluster, Running: c.Running, State: c.State, Port: frontendPort(c),
		TakenHostPort: labelPort(c, hostPortTakenLabel), ports: c.Ports, addresses: map[string]string{},
	}
	for network := range c.Networks {
		lb.addresses[network] = nodeAddress(c, network)
	}
	return lb
}

// frontendPort is the port a load balancer container serves: the one it publishes.
func frontendPort(lb *container.Container) int {
	for _, p := range lb.Ports {
		return p.ContainerPort
	}
	return APIServerPort
}

// pinnedHostPort is the host port pinned in a load balancer's configuration; 0 when the engine
// picks one at each start.
func pinnedHostPort(c *container.Container) int { return labelPort(c, hostPortLabel) }

func labelPort(c *container.Container, label string) int {
	port, err := strconv.Atoi(c.Labels[label])
	if err != nil || port < 1 || port > 65535 {
		return 0
	}
	return port
}

// ensure returns the running load balancer of a cluster: one that stopped is started again
// (it keeps its configuration) when it is pinned to the host port asked for; one that is
// missing, will not start, or stopped without that pin is created anew, on the network's fixed
// load balancer address when it has one, so the cluster's endpoint stays valid, and on the host
// port asked for when it is free. A running one is kept whatever host port it publishes (see
// PublishedPort).
func (h *haproxies) ensure(ctx context.Context, spec LoadBalancerSpec) (*LoadBalancer, error) {
	c, err := h.m.ensureLoadBalancer(ctx, spec)
	if err != nil {
		return nil, err
	}
	return h.handle(spec.Cluster, c), nil
}

func (h *haproxies) find(ctx context.Context, cluster ClusterKey) (*LoadBalancer, error) {
	c, err := h.m.getLoadBalancer(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return h.handle(cluster, c), nil
}

func (h *haproxies) remove(ctx context.Context, cluster ClusterKey) error {
	c, err := h.m.getLoadBalancer(ctx, cluster)
	if err != nil || c == nil {
		return err
	}
	return h.m.runtime.RemoveContainer(ctx, c.Name)
}

func (h *haproxies) nodePort(context.Context, *LoadBalancer) ([]string, int, error) {
	return nil, 0, nil
}

func (h *haproxies) collectLogs(ctx context.Context, lb *LoadBalancer, dir *logdir.Dir) error {
	return h.m.collectLoadBalancerLogs(ctx, lb.c, dir)
}

func (m *Manager) ensureLoadBalancer(ctx context.Context, spec LoadBalancerSpec) (*container.Container, error) {
	if spec.Port == 0 {
		spec.Port = APIServerPort
	}
	allowed := m.allowedLoadBalancer(spec)
	c, err := m.getLoadBalancer(ctx, spec.Cluster)
	switch {
	case err != nil:
		return nil, err
	case c != nil && c.Running && frontendPort(c) == spec.Port:
		// Even on another host port than the one asked for: replacing a running load balancer
		// would drop its connections, and could move it off the endpoint on a network without
		// fixed addresses.
		return c, nil
	case allowed != nil:
		// Nothing is removed or created for a spec the policy refuses.
		return nil, allowed
	case c != nil && frontendPort(c) != spec.Port:
		// Made for another port before the endpoint was set: it holds nothing to keep.
		if err := m.runtime.RemoveContainer(ctx, c.Name); err != nil {
			return nil, errors.Wrapf(err, "replacing the load balancer %s, which serves port %d, not %d", c.Name, frontendPort(c), spec.Port)
		}
	case c != nil && (pinnedHostPort(c) == 0 || (spec.HostPort != 0 && pinnedHostPort(c) != spec.HostPort)):
		// Stopped, and a start would publish it wherever the engine picks (made before host
		// ports were pinned, or on a picked port because the one asked for was taken): created
		// anew, so it tries that port again.
		if err := m.runtime.RemoveContainer(ctx, c.Name); err != nil {
			return nil, errors.Wrapf(err, "replacing the load balancer %s, which stopped and is not pinned to its host port", c.Name)
		}
	case c != nil:
		startErr := m.runtime.StartContainer(ctx, c.Name)
		if startErr == nil {
			return m.runtime.InspectContainer(ctx, c.Name)
		}
		if err := m.runtime.RemoveContainer(ctx, c.Name); err != nil {
			return nil, errors.Wrapf(err, "replacing the load balancer %s, which did not start (%v)", c.Name, startErr)
		}
	}
	name := LoadBalancerName(spec.Cluster)
	if err := m.ensureImage(ctx, spec.Image); err != nil {
		return nil, err
	}
	n, err := m.runtime.InspectNetwork(ctx, spec.Network)
	if err != nil {
		return nil, err
	}
	labels := spec.Cluster.labels(roleLoadBalancer)
	address := withIPv6(n, spec.Cluster, loadBalancerAddress(n, spec.Cluster))
	if address.IPv4 != "" {
		labels[addressLabel] = address.IPv4
	}
	cs := container.ContainerSpec{
		Name:          name,
		Hostname:      loadBalancerHostname(spec.Cluster),
		Image:         spec.Image,
		Labels:        labels,
		Network:       spec.Network,
		IPv4Address:   address.IPv4,
		IPv6Address:   address.IPv6,
		RestartPolicy: "unless-stopped",
		Ports:         []container.PortMapping{{ContainerPort: spec.Port, Protocol: "tcp", HostIP: "127.0.0.1"}},
	}
	if err := m.createLoadBalancer(ctx, cs, spec.HostPort); err != nil {
		return nil, errors.Wrapf(err, "creating the load balancer %s", name)
	}
	return m.runtime.InspectContainer(ctx, name)
}

// allowedLoadBalancer checks a load balancer's image and host port against the policy.
func (m *Manager) allowedLoadBalancer(spec LoadBalancerSpec) error {
	if m.policy == nil {
		return nil
	}
	if err := m.policy.CheckImage(spec.Image); err != nil {
		return err
	}
	return errors.Wrap(m.policy.CheckPort("127.0.0.1", spec.HostPort), "the load balancer's host port (spec.loadBalancer.hostPort)")
}

// createLoadBalancer creates and starts a load balancer container with its host port pinned:
// hostPort, or else the port the engine picks for it, learnt from a first container that is
// then created again with it pinned. Dockyard cannot pick a free port itself: the engine's
// host is not the manager's (which runs in a container, or talks to a remote engine). A
// hostPort another process or container holds falls back to a port the engine picks, recorded
// in hostPortTakenLabel and not pinned, so the next creation tries hostPort again.
func (m *Manager) createLoadBalancer(ctx context.Context, cs container.ContainerSpec, hostPort int) error {
	if hostPort != 0 {
		err := m.createAndStart(ctx, pinHostPort(cs, hostPort))
		if !container.IsPortInUse(err) {
			return err
		}
		if err := m.runtime.RemoveContainer(ctx, cs.Name); err != nil {
			return errors.Wrapf(err, "removing %s, which could not have host port %d", cs.Name, hostPort)
		}
		cs.Labels = maps.Clone(cs.Labels)
		cs.Labels[hostPortTakenLabel] = strconv.Itoa(hostPort)
		return m.createAndStart(ctx, cs)
	}
	if err := m.createAndStart(ctx, cs); err != nil {
		return err
	}
	c, err := m.runtime.InspectContainer(ctx, cs.Name)
	if err != nil {
		return err
	}
	picked := 0
	for _, p := range c.Ports {
		if p.ContainerPort == cs.Ports[0].ContainerPort && p.HostPort != 0 {
			picked = p.HostPort
		}
	}
	if picked == 0 {
		return errors.Errorf("the engine published port %d of %s on no host port (%+v)", cs.Ports[0].ContainerPort, cs.Name, c.Ports)
	}
	if err := m.runtime.RemoveContainer(ctx, cs.Name); err != nil {
		return errors.Wrapf(err, "removing %s to pin host port %d", cs.Name, picked)
	}
	// Should something take the port in between, the container stays created, pinned: the
	// next ensure fails to start it and picks again.
	return m.createAndStart(ctx, pinHostPort(cs, picked))
}

// pinHostPort is a load balancer's container spec with its port published on a fixed host
// port, recorded in hostPortLabel.
func pinHostPort(cs container.ContainerSpec, port int) container.ContainerSpec {
	cs.Ports = append([]container.PortMapping(nil), cs.Ports...)
	cs.Ports[0].HostPort = port
	cs.Labels = maps.Clone(cs.Labels)
	cs.Labels[hostPortLabel] = strconv.Itoa(port)
	return cs
}

// getLoadBalancer returns a cluster's load balancer container, or nil when it does not exist.
func (m *Manager) getLoadBalancer(ctx context.Context, cluster ClusterKey) (*container.Container, error) {
	labels := cluster.ClusterLabels()
	labels[kindRoleLabel] = string(roleLoadBalancer)
	return m.findContainer(ctx, LoadBalancerName(cluster), labels)
}

// hasIPv6Address reports whether a container has an IPv6 address on any of its networks.
func hasIPv6Address(c *container.Container) bool {
	for _, ep := range c.Networks {
		if ep.IPv6 != "" {
			return true
		}
	}
	return false
}

// update renders the container's configuration; it looks the container up again under the
// cluster's lock.
func (h *haproxies) update(ctx context.Context, lb *LoadBalancer, tmpl string, backends func(context.Context) ([]haproxy.Backend, error)) (bool, error) {
	m, cluster := h.m, lb.Cluster
	unlock := m.lockCluster(cluster)
	defer unlock()

	c, err := m.getLoadBalancer(ctx, cluster)
	if err != nil {
		return false, err
	}
	if c == nil {
		return false, errors.Errorf("cluster %s has no load balancer", cluster)
	}
	name := c.Name
	list, err := backends(ctx)
	if err != nil {
		return false, err
	}
	cfg, err := haproxy.Render(tmpl, haproxy.Data{FrontendPort: frontendPort(c), Backends: list, IPv6: hasIPv6Address(c)})
	if err != nil {
		return false, err
	}
	return m.applyHAProxyConfig(ctx, name, cfg)
}

// applyHAProxyConfig makes a haproxy container run cfg: checked by haproxy, written, reloaded
// (SIGHUP) and confirmed by haproxy's log. It changes nothing, and reports false, when haproxy
// runs cfg already.
func (m *Manager) applyHAProxyConfig(ctx context.Context, name string, cfg []byte) (bool, error) {
	// What haproxy runs is known from the marker written once haproxy confirmed loading it;
	// the configuration file alone cannot tell, since it is written before the reload, which
	// may be lost (the manager stopped, haproxy did not confirm in time).
	sum := sha256.Sum256(cfg)
	want := hex.EncodeToString(sum[:])
	loaded, err := m.readFile(ctx, name, loadedConfigMarker)
	if err == nil && string(loaded) == want {
		return false, nil
	}

	candidate := LoadBalancerConfigPath + ".dockyard-new"
	if err := m.writeFile(ctx, name, candidate, cfg); err != nil {
		return false, err
	}
	if _, err := m.output(ctx, name, command{argv: nodecmd.HAProxyCheck(candidate), what: "haproxy rejected the rendered configuration"}); err != nil {
		return false, errors.Wrapf(err, "checking the haproxy configuration in %s", name)
	}
	if err := m.writeFile(ctx, name, LoadBalancerConfigPath, cfg); err != nil {
		return false, err
	}
	reloads, err := m.countReloads(ctx, name)
	if err != nil {
		return false, err
	}
	if err := m.runtime.SignalContainer(ctx, name, loadBalancerReloadSignal); err != nil {
		return false, errors.Wrapf(err, "reloading haproxy in %s", name)
	}
	if err := m.waitForReload(ctx, name, reloads); err != nil {
		return false, err
	}
	return true, m.writeFile(ctx, name, loadedConfigMarker, []byte(want))
}

// loadedConfigMarker holds the SHA-256 of the configuration haproxy last confirmed loading. At
// a restart haproxy loads the configuration file, which then may be newer than the marker: the
// next update reloads once more, which costs nothing.
const loadedConfigMarker = LoadBalancerConfigPath + ".dockyard-loaded"

// haproxy's master process logs this line each time workers load a configuration.
const reloadConfirmation = "Loading success"

func (m *Manager) countReloads(ctx context.Context, name string) (int, error) {
	logs, err := m.runtime.ContainerLogs(ctx, name, loadBalancerLogLines)
	if err != nil {
		return 0, errors.Wrapf(err, "reading the log of %s", name)
	}
	return strings.Count(logs, reloadConfirmation), nil
}

// loadBalancerLogLines bounds how much of haproxy's log is read; it logs notices only (no
// connection logs), so reload confirmations stay within reach.
const loadBalancerLogLines = 5000

// waitForReload waits until haproxy confirms it loaded the new configuration, so a backend
// removed from it gets no new connections once Update returns: its node may be
// deleted right after. Images that never log confirmations get a short grace period.
func (m *Manager) waitForReload(ctx context.Context, name string, before int) error {
	if before == 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
			return nil
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		logs, err := m.runtime.ContainerLogs(ctx, name, loadBalancerLogLines)
		if err != nil {
			return errors.Wrapf(err, "reading the log of %s", name)
		}
		if strings.Count(logs, reloadConfirmation) > before {
			// The master confirmed; give the old worker a moment to stop accepting.
			time.Sleep(200 * time.Millisecond)
			return nil
		}
		if i := strings.LastIndex(logs, "Loading failure"); i >= 0 && strings.Count(logs[i:], "\n") < 20 {
			return errors.Errorf("haproxy in %s failed to load the new configuration: %s", name, lastLines(logs, 10))
		}
		if time.Now().After(deadline) {
			return errors.Errorf("haproxy in %s did not confirm the reload within 15s: %s", name, lastLines(logs, 10))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeFile writes one file into a container through the engine's archive API.
func (m *Manager) writeFile(ctx context.Context, name, file string, content []byte) error {
	return m.writeArchive(ctx, name, path.Dir(file), []archiveEntry{{name: path.Base(file), content: string(content), mode: 0o644}})
}

// readFile reads one file from a container through the engine's archive API; ErrNotFound
// when the container has no such file.
func (m *Manager) readFile(ctx context.Context, name, file string) ([]byte, error) {
	rc, err := m.runtime.CopyFromContainer(ctx, name, file)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, errors.Wrapf(container.ErrNotFound, "%s:%s", name, file)
		}
		if err != nil {
			return nil, errors.Wrapf(err, "reading %s:%s", name, file)
		}
		if hdr.Typeflag == tar.TypeReg {
			if hdr.Size > maxReadFile {
				return nil, errors.Errorf("%s:%s is %d bytes, more than the %d Dockyard reads", name, file, hdr.Size, maxReadFile)
			}
			return io.ReadAll(io.LimitReader(tr, maxReadFile))
		}
	}
}

// maxReadFile bounds what ReadFile reads: configurations and kubeconfigs are a few KiB.
const maxReadFile = 4 << 20
