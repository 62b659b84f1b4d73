package docker

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/runner"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

const (
	// DefaultLoadBalancerImage is the haproxy image of clusters that name none.
	DefaultLoadBalancerImage = "kindest/haproxy:v20230606-42a2262b"
	// DefaultNodeImageRepository holds the node images of machines that name none; the tag is
	// the Machine's Kubernetes version.
	DefaultNodeImageRepository = "kindest/node"
)

// PrivilegeMode says whether node containers run privileged.
type PrivilegeMode string

// Privilege modes.
const (
	// PrivilegeAuto runs nodes privileged where the engine allows it and otherwise with an
	// explicit capability set; the engine is probed by the first node created.
	PrivilegeAuto PrivilegeMode = "auto"
	// PrivilegeAlways always runs nodes privileged.
	PrivilegeAlways PrivilegeMode = "always"
	// PrivilegeNever never runs nodes privileged.
	PrivilegeNever PrivilegeMode = "never"
)

// ParsePrivilegeMode parses the value of --node-privileged.
func ParsePrivilegeMode(s string) (PrivilegeMode, error) {
	switch m := PrivilegeMode(s); m {
	case PrivilegeAuto, PrivilegeAlways, PrivilegeNever:
		return m, nil
	}
	return "", errors.Errorf("--node-privileged=%q: must be auto, always or never", s)
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	Privilege PrivilegeMode
	// ManagementNodes selects the management cluster's node containers, which are connected
	// to every cluster network (see Manager.ManagementSelector); nil connects nothing.
	ManagementNodes map[string]string
	// Policy bounds what the nodes, load balancers and networks the Manager creates ask of
	// the engine's host; nil allows everything (the administrator's own tools).
	Policy *policy.Policy
	// SubnetsInUse returns subnets besides the engine's networks that a network Dockyard
	// creates must not overlap (the management cluster's, the host's routes); nil: none.
	SubnetsInUse policy.SubnetsFunc
	// ManagementPortsOpenToWorkloads are TCP ports of the management nodes that workload nodes
	// may connect to on the nodes' addresses in their networks (scripts/isolate.sh drops every
	// other new connection from a workload network); none by default.
	ManagementPortsOpenToWorkloads []int
	// GuardHost keeps the engine's host from answering the networks Dockyard makes for clusters
	// (hostguard.go), but on HostPortsOpenToWorkloads.
	GuardHost                bool
	HostPortsOpenToWorkloads []int
}

// Manager is the node layer of one engine: it creates, finds and deletes Dockyard's nodes, load
// balancers, networks and registries there. Which engine a cluster's nodes run on is decided
// above it, once per reconcile (a DockyardCluster names its infrastructure); a Manager never
// asks again, never reads the API and never calls back up.
type Manager struct {
	runtime    container.Runtime
	privilege  PrivilegeMode
	management map[string]string
	openPorts  []int
	policy     *policy.Policy
	inUse      policy.SubnetsFunc
	// bootstrap is where the bootstrap runner lives in nodes and how it is driven.
	bootstrap runner.Protocol
	// lbs is how this engine gives a cluster's control plane one address, chosen once: haproxy
	// containers, or the engine's own fronts (loadbalancer.go).
	lbs loadBalancers
	// images is the engine images are copied into nodes from: this one, or for an engine made
	// with ForEngine the one images are built on.
	images container.Runtime

	// privileged caches what the engine allowed the first node in auto mode; the engine does
	// not change its mind while the manager runs, and a restart probes again.
	privilegedMu sync.Mutex
	privileged   *bool

	// clusterLocks serialize load balancer configuration changes and address picks per cluster.
	clusterLocks sync.Map // map[string]*sync.Mutex

	// settled holds, by container ID, when this manager last isolated and routed each
	// management node and when that node had started (management.go): a node it has not seen,
	// that restarted since, or that it settled longer than ManagementResync ago is settled at
	// the next cluster network check.
	settledMu sync.Mutex
	settled   map[string]settledNode

	// noHostGuard leaves the engine's host as it is (ManagerOptions.GuardHost false);
	// hostGuard is what was last done to it, for hostPorts.
	noHostGuard bool
	hostPorts   []int
	hostGuard   hostGuard
}

// NewManager returns the node layer of an engine. The engine's way to balance the API server
// of a cluster (a load balancer container, or its own front) is chosen here, once.
func NewManager(rt container.Runtime, opts ManagerOptions) *Manager {
	if opts.Privilege == "" {
		opts.Privilege = PrivilegeAuto
	}
	m := &Manager{
		runtime: rt, privilege: opts.Privilege, management: opts.ManagementNodes, openPorts: opts.ManagementPortsOpenToWorkloads,
		policy: opts.Policy, inUse: opts.SubnetsInUse, bootstrap: runner.Default(), images: rt,
		noHostGuard: !opts.GuardHost, hostPorts: opts.HostPortsOpenToWorkloads,
	}
	m.lbs = &haproxies{m: m}
	if b := rt.Balancer(); b != nil {
		m.lbs = &fronts{m: m, b: b}
	}
	return m
}

// ForEngine returns the node layer of another engine, one a cluster's nodes run on (a
// Kubernetes infrastructure cluster), with this one's privilege mode and policy. Images loaded
// into its nodes come from this engine, where they are built; management nodes stay this
// engine's.
func (m *Manager) ForEngine(rt container.Runtime) *Manager {
	other := NewManager(rt, ManagerOptions{Privilege: m.privilege, Policy: m.policy})
	other.images = m.images
	return other
}

func (m *Manager) lockCluster(k ClusterKey) func() {
	mu, _ := m.clusterLocks.LoadOrStore(k.String(), &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// ensureImage makes sure the engine has an image for a node, load balancer or registry,
// pulling it when it is missing; an image outside the policy is refused before anything is
// pulled.
func (m *Manager) ensureImage(ctx context.Context, ref string) error {
	if err := m.allowedImage(ref); err != nil {
		return err
	}
	ok, err := m.runtime.ImageExists(ctx, ref)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	if err := m.runtime.PullImage(ctx, ref); err != nil {
		return &imageError{image: ref, err: err}
	}
	return nil
}

// imageError says an image is missing from the engine and could not be pulled.
type imageError struct {
	image string
	err   error
}

func (e *imageError) Error() string {
	return fmt.Sprintf("image %s is not on the container engine and pulling it failed: %v", e.image, e.err)
}

func (e *imageError) Unwrap() error { return e.err }

// IsImageError reports whether err says an image is missing from the engine and could not be
// pulled.
func IsImageError(err error) bool {
	var ie *imageError
	return errors.As(err, &ie)
}

// allowedNode checks what a node asks of the engine's host against the policy (nil allows
// everything): its image, host paths and published ports; a refusal is a *policy.RefusedError
// naming the flag.
func (m *Manager) allowedNode(spec NodeSpec) error {
	if m.policy == nil {
		return nil
	}
	if err := m.policy.CheckImage(spec.Image); err != nil {
		return err
	}
	for _, mt := range spec.ExtraMounts {
		if err := m.policy.CheckHostPath(mt.HostPath); err != nil {
			return err
		}
	}
	for _, p := range spec.Ports {
		if err := m.policy.CheckPort(p.HostIP, p.HostPort); err != nil {
			return errors.Wrapf(err, "port %d of the node", p.ContainerPort)
		}
	}
	return nil
}

// allowedImage checks the image of a node, load balancer or registry against the policy.
func (m *Manager) allowedImage(ref string) error {
	if m.policy == nil {
		return nil
	}
	return m.policy.CheckImage(ref)
}

// allowedLoad checks an image the engine would copy into a node of a cluster.
func (m *Manager) allowedLoad(ref string, cluster ClusterKey) error {
	if m.policy == nil {
		return nil
	}
	return m.policy.CheckLoadImage(ref, cluster.Namespace)
}

// ImageExists reports whether the engine has an image.
func (m *Manager) ImageExists(ctx context.Context, ref string) (bool, error) {
	return m.runtime.ImageExists(ctx, ref)
}

// HostInfo describes the engine's host, where nodes run: what a node without limits (and its
// kubelet) sees.
type HostInfo struct {
	// Engine names the engine and its version, e.g. "docker 20.10.24".
	Engine string
	// CPUs and MemoryBytes of the host.
	CPUs        int
	MemoryBytes int64
	// Arch is the host's architecture in Go's words (amd64, arm64, ...), that of its node
	// images.
	Arch string
}

// HostInfo asks the engine about its host (for nodes as Pods, the infrastructure cluster's
// largest schedulable node); it is also how a health check knows the engine answers.
func (m *Manager) HostInfo(ctx context.Context) (HostInfo, error) {
	info, err := m.runtime.Info(ctx)
	if err != nil {
		return HostInfo{}, errors.Wrap(err, "asking the container engine about its host")
	}
	return HostInfo{
		Engine: strings.TrimSpace(info.Name + " " + info.Version), CPUs: info.CPUs, MemoryBytes: info.MemoryBytes,
		Arch: container.GoArch(info.Architecture),
	}, nil
}

// Zones returns the failure domains of the engine: its zones where its hosts have them
// (Kubernetes), none on an engine of one host.
func (m *Manager) Zones(ctx context.Context) ([]string, error) {
	zones, err := m.runtime.Zones(ctx)
	return zones, errors.Wrap(err, "listing the zones of the engine")
}
