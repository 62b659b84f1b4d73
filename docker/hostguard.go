package docker

import (
	"context"
	"crypto/rand"
	_ "embed" // scripts/host-guard.sh, scripts/host-routes.sh
	"encoding/hex"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// The engine's host is its networks' gateway: a workload node (root there is what a team's
// bootstrap commands or a privileged pod get) reaches every service the host listens on, on
// 0.0.0.0 or on the bridge's address. Dockyard keeps the host from answering the networks it
// made for clusters but on the ports the administrator opens (HostPortsOpenToWorkloads):
// scripts/host-guard.sh, run in the host's network namespace by a helper container that lives
// for the run (the image of a node on the engine, with NET_ADMIN), after a network is made or
// removed and every hostGuardResync. Networks Dockyard did not make (a user's, kind's, the
// management cluster's own) are left as they are. The same helper reads the host's routes
// (HostRoutes), which the subnets of new networks must not overlap: a manager in a pod sees
// its pod's routes, not the host's.
const (
	// hostGuardResync is how often the host's rules are made again (something may have flushed
	// them: the host's firewall, a reboot with the manager elsewhere).
	hostGuardResync = 10 * time.Minute
	// hostHelperLabel marks the helper containers, which are removed after each run (and by
	// label before one, when a run was cut short).
	hostHelperLabel = "dockyard.x-k8s.io/host-helper"
	// hostChain is the chain scripts/host-guard.sh keeps in table filter.
	hostChain = "DOCKYARD-HOST"
)

var (
	//go:embed scripts/host-guard.sh
	hostGuardScript string
	//go:embed scripts/host-routes.sh
	hostRoutesScript string
)

// hostGuard is what a Manager last did to its engine's host, and what it last read of it.
type hostGuard struct {
	mu sync.Mutex
	// key says which bridges and ports the rules are for, at the time done.
	key  string
	done time.Time
	// routes are the host's routes, read at routesRead.
	routes     []netip.Prefix
	routesRead time.Time
	// image is the image the last helper ran (helperImage), read without mu: HostRoutes's
	// helper runs under it too.
	image atomic.Pointer[string]
}

// hostRoutesFresh is how long the host's routes read once are used.
const hostRoutesFresh = time.Minute

// hostRoutesInUse is HostRoutes, read again when the last read is older than hostRoutesFresh.
func (m *Manager) hostRoutesInUse(ctx context.Context) ([]netip.Prefix, error) {
	m.hostGuard.mu.Lock()
	defer m.hostGuard.mu.Unlock()
	if !m.hostGuard.routesRead.IsZero() && time.Since(m.hostGuard.routesRead) < hostRoutesFresh {
		return m.hostGuard.routes, nil
	}
	routes, err := m.HostRoutes(ctx)
	if err != nil {
		return nil, err
	}
	m.hostGuard.routes, m.hostGuard.routesRead = routes, time.Now()
	return routes, nil
}

// guardHost keeps the engine's host from answering the cluster networks Dockyard made on it,
// when changed says one was made or removed, or the last run is older than hostGuardResync.
// Engines that balance traffic themselves (Kubernetes) have no host of the manager's to guard.
func (m *Manager) guardHost(ctx context.Context, changed bool) error {
	if m.runtime.Balancer() != nil || m.noHostGuard {
		return nil
	}
	m.hostGuard.mu.Lock()
	defer m.hostGuard.mu.Unlock()
	if !changed && time.Since(m.hostGuard.done) < hostGuardResync {
		return nil
	}
	networks, err := m.runtime.ListNetworks(ctx, map[string]string{clusterLabel: ""})
	if err != nil {
		return errors.Wrap(err, "listing the cluster networks Dockyard made")
	}
	var args []string
	for _, p := range m.hostPorts {
		args = append(args, "-o", strconv.Itoa(p))
	}
	var bridges []string
	for _, n := range networks {
		// A management cluster's own network (its nodes carry an empty namespace) is not a
		// workload network: the host reaches its API server there.
		if n.Interface != "" && !strings.HasPrefix(n.Labels[clusterLabel], "/") {
			bridges = append(bridges, n.Interface)
		}
	}
	slices.Sort(bridges)
	key := strings.Join(append(slices.Clone(args), bridges...), " ")
	if key == m.hostGuard.key && time.Since(m.hostGuard.done) < hostGuardResync {
		return nil
	}
	out, err := m.onHost(ctx, hostGuardScript, "host-guard.sh", append(args, bridges...), "keeping the engine's host from answering workload networks")
	if errors.Is(err, errNoHelperImage) {
		return nil // no node on the engine yet: nothing to keep off the host
	}
	if err != nil {
		return err
	}
	if len(out) > 0 {
		ctrl.LoggerFrom(ctx).Info("Engine's host kept from answering workload networks", "bridges", bridges, "openPorts", m.hostPorts, "rules", out)
	}
	m.hostGuard.key, m.hostGuard.done = key, time.Now()
	return nil
}

// HostRoutes returns the destinations the engine's host routes (but its default routes and
// what is special-purpose anyway), read in the host's network namespace by a helper container;
// nil when the engine has no node to lend the helper its image yet, or is not one host.
func (m *Manager) HostRoutes(ctx context.Context) ([]netip.Prefix, error) {
	if m.runtime.Balancer() != nil {
		return nil, nil
	}
	lines, err := m.onHost(ctx, hostRoutesScript, "host-routes.sh", nil, "reading the engine host's routes")
	if errors.Is(err, errNoHelperImage) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, l := range lines {
		p, err := netip.ParsePrefix(l)
		if err != nil {
			a, aerr := netip.ParseAddr(l)
			if aerr != nil {
				continue // "default", or what ip prints for a route type
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		a := p.Addr()
		if p.Bits() == 0 || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() {
			continue
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// errNoHelperImage says no node on the engine lends the helper its image.
var errNoHelperImage = errors.New("no Dockyard node on the engine to take the helper's image from")

// onHost runs an embedded script in the engine host's network namespace, in a helper container
// made for it (the image of a node on the engine: it has sh, ip and iptables) and removed after,
// and returns the lines it printed.
func (m *Manager) onHost(ctx context.Context, script, scriptName string, args []string, what string) ([]string, error) {
	image, err := m.helperImage(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.removeHostHelpers(ctx); err != nil {
		return nil, err
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := "dockyard-host-helper-" + hex.EncodeToString(suffix)
	spec := container.ContainerSpec{
		Name: name, Image: image, Entrypoint: []string{"sleep"}, Cmd: []string{"300"},
		Labels: map[string]string{hostHelperLabel: ""}, Network: container.HostNetwork,
		Security: container.SecuritySpec{CapAdd: []string{"NET_ADMIN", "NET_RAW"}},
	}
	if err := m.runtime.CreateContainer(ctx, spec); err != nil {
		return nil, errors.Wrapf(err, "%s: creating the helper container", what)
	}
	defer func() { _ = m.runtime.RemoveContainer(context.WithoutCancel(ctx), name) }()
	if err := m.runtime.StartContainer(ctx, name); err != nil {
		return nil, errors.Wrapf(err, "%s: starting the helper container", what)
	}
	return m.nodeScript(ctx, name, script, scriptName, args, what)
}

// helperImage is the image of a node on the engine. With no node left (the last cluster's nodes
// are deleted before its network), it is the image the last helper ran, while the engine still
// has it: removing the last network then still takes its rules off the host.
func (m *Manager) helperImage(ctx context.Context) (string, error) {
	cs, err := m.runtime.ListContainers(ctx, map[string]string{clusterLabel: ""})
	if err != nil {
		return "", errors.Wrap(err, "finding a node image for the host's helper")
	}
	for _, c := range cs {
		if r := Role(c.Labels[kindRoleLabel]); (r == RoleControlPlane || r == RoleWorker) && c.Image != "" {
			m.hostGuard.image.Store(&c.Image)
			return c.Image, nil
		}
	}
	if last := m.hostGuard.image.Load(); last != nil {
		if ok, err := m.runtime.ImageExists(ctx, *last); err == nil && ok {
			return *last, nil
		}
	}
	return "", errNoHelperImage
}

// removeHostHelpers removes the helper containers a cut-short run left.
func (m *Manager) removeHostHelpers(ctx context.Context) error {
	left, err := m.runtime.ListContainers(ctx, map[string]string{hostHelperLabel: ""})
	if err != nil {
		return errors.Wrap(err, "listing the host's helper containers")
	}
	for _, c := range left {
		if err := m.runtime.RemoveContainer(ctx, c.Name); err != nil {
			return errors.Wrapf(err, "removing the host's helper container %s", c.Name)
		}
	}
	return nil
}
