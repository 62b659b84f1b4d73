package docker

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
)

// APIServerPort is the port kube-apiserver listens on in control plane nodes.
const APIServerPort = 6443

// NodeSpec describes the node container of one machine.
type NodeSpec struct {
	Cluster ClusterKey
	// Machine is the DockyardMachine's name.
	Machine string
	Image   string
	Role    Role
	Network string
	// ExtraMounts are bind mounts from the engine's host.
	ExtraMounts []Mount
	Resources   Resources
	// APIServerHostPort publishes a control plane node's API server on this port of the host's
	// 127.0.0.1; 0 lets the engine choose one, which it may change when the node joins
	// another network or restarts. Only a caller on the engine's host can pick a free port.
	APIServerHostPort int
	// Ports are further ports of the node published on the engine's host.
	Ports []Port
	// ServiceCIDRs are the cluster's Service ranges. The node drops packets to them that
	// kube-proxy did not translate to an endpoint, so they never reach the engine's host and the
	// networks beyond it (images/node/entrypoint).
	ServiceCIDRs []string
	// DNSSearch, when not nil, is the search list of the node's resolv.conf (empty: none) in
	// place of the engine host's.
	DNSSearch *[]string
	// FailureDomain is the zone the node must run in, on an engine whose hosts have zones
	// (Kubernetes); engines of one host ignore it.
	FailureDomain string

	// address is the node's fixed addresses on Network, picked by createNode.
	address fixedAddresses
	// fronted: the engine's front reaches the control plane nodes, so they publish nothing for
	// the API server: there is no host to publish it on.
	fronted bool
}

// IsPortInUse reports whether err says a node could not start because a host port it
// publishes is taken (by another container or a process of the engine's host).
func IsPortInUse(err error) bool { return container.IsPortInUse(err) }

// Port publishes a port of a node on the engine's host.
type Port struct {
	// ContainerPort is the port in the node.
	ContainerPort int
	// Protocol is "tcp" (when empty) or "udp".
	Protocol string
	// HostIP is the host address it is published on; empty: 127.0.0.1.
	HostIP string
	// HostPort is the port on the host; 0: the engine picks one.
	HostPort int
}

// Mount bind-mounts a path of the engine's host into a node.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Resources bound a node's CPU and memory; zero is unbounded.
type Resources struct {
	// NanoCPUs is CPU time in billionths of a CPU.
	NanoCPUs int64
	// MemoryBytes is the memory limit.
	MemoryBytes int64
	// CPUShares weighs the node's CPU time against other containers when they compete for it;
	// zero is the engine's default, 1024.
	CPUShares int64
}

// serviceCIDRsEnv tells the node's entrypoint the cluster's Service ranges.
const serviceCIDRsEnv = "DOCKYARD_SERVICE_CIDRS"

// predefinedNetworks are the networks every Docker engine has.
var predefinedNetworks = sets.New("", "none", "host", "bridge")

// Name returns the container name of the node.
func (s NodeSpec) Name() string { return NodeName(s.Cluster, s.Machine) }

// containerSpec renders the engine-level description of the node container.
func (s NodeSpec) containerSpec(privileged bool) container.ContainerSpec {
	name := s.Name()
	labels := s.Cluster.labels(s.Role)
	labels[machineLabel] = s.Cluster.Namespace + "/" + s.Machine

	mounts := []container.Mount{
		// containerd's overlayfs snapshots only work on a real filesystem, and the node's
		// state (kubelet, etcd, the bootstrap sentinel) must survive a container restart.
		{Type: container.MountVolume, Source: volumeName(name), Target: "/var"},
		{Type: container.MountTmpfs, Target: "/run"},
		{Type: container.MountTmpfs, Target: "/tmp"},
		// Kernel modules for kube-proxy and CNI plugins to load; some hosts (micro-VMs with a
		// monolithic kernel) have none, and the node does without.
		{Type: container.MountBind, Source: "/lib/modules", Target: "/lib/modules", ReadOnly: true, Optional: true},
	}
	for _, m := range s.ExtraMounts {
		mounts = append(mounts, container.Mount{Type: container.MountBind, Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}

	hostname := NodeHostname(s.Cluster.Name, s.Machine)
	if s.address.IPv4 != "" {
		labels[addressLabel] = s.address.IPv4
	}
	var aliases []string
	if !predefinedNetworks.Has(s.Network) { // the engine's own networks take no aliases
		aliases = []string{hostname}
	}
	spec := container.ContainerSpec{
		IPv4Address:    s.address.IPv4,
		IPv6Address:    s.address.IPv6,
		Name:           name,
		Hostname:       hostname,
		Image:          s.Image,
		Labels:         labels,
		Network:        s.Network,
		NetworkAliases: aliases,
		Mounts:         mounts,
		DNSSearch:      s.DNSSearch,
		Tty:            true,
		StopSignal:     "SIGRTMIN+3", // systemd's clean shutdown
		RestartPolicy:  "unless-stopped",
		Resources:      container.Resources{NanoCPUs: s.Resources.NanoCPUs, MemoryBytes: s.Resources.MemoryBytes, CPUShares: s.Resources.CPUShares},
		Security:       nodeSecurity(privileged),
		Zone:           s.FailureDomain,
		// The cluster's nodes of a role spread over the hosts and zones of an engine that has
		// many (a MachineDeployment without a failure domain).
		SpreadFrom: s.Cluster.labels(s.Role),
	}
	if len(s.ServiceCIDRs) > 0 {
		spec.Env = append(spec.Env, serviceCIDRsEnv+"="+strings.Join(s.ServiceCIDRs, ","))
	}
	if s.Role == RoleControlPlane {
		// An engine that balances traffic itself sends the API only to nodes serving it.
		spec.ReadyPort = APIServerPort
		if !s.fronted {
			spec.Ports = []container.PortMapping{{ContainerPort: APIServerPort, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: s.APIServerHostPort}}
		}
	}
	for _, p := range s.Ports {
		spec.Ports = append(spec.Ports, container.PortMapping{
			ContainerPort: p.ContainerPort, Protocol: orDefault(strings.ToLower(p.Protocol), "tcp"), HostIP: orDefault(p.HostIP, "127.0.0.1"), HostPort: p.HostPort,
		})
	}
	return spec
}

// nodeSecurity is what a systemd node with nested containers needs. Where the engine refuses
// privileged containers (its host lacks CAP_SYS_RESOURCE in the bounding set, so "all
// capabilities" cannot be granted), the node gets every other capability, every device and no
// confinement; the node image's entrypoint then remounts the cgroup hierarchies read-write.
func nodeSecurity(privileged bool) container.SecuritySpec {
	sec := container.SecuritySpec{Unconfined: true, PrivateCgroupNamespace: true}
	if privileged {
		sec.Privileged = true
		return sec
	}
	sec.CapAdd = []string{"ALL"}
	sec.CapDrop = []string{"SYS_RESOURCE"}
	sec.DeviceCgroupRules = []string{"a *:* rwm"}
	return sec
}

// AddNode creates and starts the node container of a machine and returns its handle. What the
// node asks of the engine's host is checked against the policy first (a refusal is a
// *policy.RefusedError naming the flag, and nothing is pulled or created); its image is pulled
// when the engine lacks it (IsImageError when that fails). The node gets its /var volume and,
// on a network Dockyard manages, fixed addresses. The first node in auto privilege mode tells
// whether the engine allows privileged containers.
func (m *Manager) AddNode(ctx context.Context, spec NodeSpec) (*Node, error) {
	if err := m.allowedNode(spec); err != nil {
		return nil, err
	}
	if err := m.ensureImage(ctx, spec.Image); err != nil {
		return nil, err
	}
	c, err := m.createNode(ctx, spec)
	if err != nil {
		return nil, err
	}
	// The first node on the engine lends the host's helper its image: the host is guarded from
	// then on (a no-op once done, until hostGuardResync). A failure here is the cluster
	// network's to report, at its next check.
	if err := m.guardHost(ctx, false); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Engine's host not kept from answering workload networks yet")
	}
	return m.node(spec.Cluster, spec.Machine, c), nil
}

// createNode creates and starts the node container of a machine with its /var volume and, on a
// network Dockyard manages, a fixed address.
func (m *Manager) createNode(ctx context.Context, spec NodeSpec) (*container.Container, error) {
	name := spec.Name()
	for _, cidr := range spec.ServiceCIDRs {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			return nil, errors.Errorf("node %s: the cluster's Service range %q is not a CIDR", name, cidr)
		}
	}
	// Two nodes of a cluster created at once must not pick the same address.
	unlock := m.lockCluster(spec.Cluster)
	defer unlock()
	if !predefinedNetworks.Has(spec.Network) {
		var err error
		if spec.address, err = m.nodeAddress(ctx, spec.Cluster, spec.Network); err != nil {
			return nil, errors.Wrapf(err, "picking an address for node %s", name)
		}
	}
	spec.fronted = m.lbs.fronted()
	volumeLabels := spec.Cluster.MachineLabels(spec.Machine)
	if err := m.runtime.CreateVolume(ctx, container.VolumeSpec{Name: volumeName(name), Labels: volumeLabels}); err != nil {
		return nil, err
	}

	privileged, known := m.privilegeDecision()
	if !known {
		privileged = true
	}
	err := m.createAndStart(ctx, spec.containerSpec(privileged))
	if container.IsPortInUse(err) {
		// Not the engine's privilege: the container stays created and starts once the
		// port is free.
		return nil, err
	}
	if err != nil && !known {
		// The engine refused a privileged container (here: "unable to apply caps: operation
		// not permitted"); try again with the explicit capability set.
		privErr := err
		if rmErr := m.runtime.RemoveContainer(ctx, name); rmErr != nil {
			return nil, kerrors.NewAggregate([]error{privErr, rmErr})
		}
		if err = m.createAndStart(ctx, spec.containerSpec(false)); err == nil {
			m.rememberPrivilege(false)
		} else {
			err = errors.Wrapf(err, "privileged node container failed too (%v)", privErr)
		}
	} else if err == nil && !known {
		m.rememberPrivilege(true)
	}
	if err != nil {
		return nil, err
	}
	return m.runtime.InspectContainer(ctx, name)
}

func (m *Manager) createAndStart(ctx context.Context, spec container.ContainerSpec) error {
	if err := m.runtime.CreateContainer(ctx, spec); err != nil {
		return err
	}
	return m.runtime.StartContainer(ctx, spec.Name)
}

func (m *Manager) privilegeDecision() (privileged, known bool) {
	switch m.privilege {
	case PrivilegeAlways:
		return true, true
	case PrivilegeNever:
		return false, true
	}
	m.privilegedMu.Lock()
	defer m.privilegedMu.Unlock()
	if m.privileged == nil {
		return false, false
	}
	return *m.privileged, true
}

func (m *Manager) rememberPrivilege(privileged bool) {
	m.privilegedMu.Lock()
	defer m.privilegedMu.Unlock()
	m.privileged = &privileged
}

// getNode returns the node container of a machine, or nil when it does not exist. It is found
// by its name or, for nodes made by earlier versions under other names, by its labels.
func (m *Manager) getNode(ctx context.Context, cluster ClusterKey, machine string) (*container.Container, error) {
	return m.findContainer(ctx, NodeName(cluster, machine), cluster.MachineLabels(machine))
}

// findContainer inspects the container of a name when it carries the labels, else the one
// container carrying the labels; nil when there is none.
func (m *Manager) findContainer(ctx context.Context, name string, labels map[string]string) (*container.Container, error) {
	c, err := m.runtime.InspectContainer(ctx, name)
	if err == nil && container.MatchLabels(c.Labels, labels) {
		return c, nil
	}
	if err != nil && !container.IsNotFound(err) {
		return nil, err
	}
	found, err := m.runtime.ListContainers(ctx, labels)
	if err != nil {
		return nil, err
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return m.runtime.InspectContainer(ctx, found[0].Name)
	}
	names := make([]string, 0, len(found))
	for _, f := range found {
		names = append(names, f.Name)
	}
	return nil, errors.Errorf("containers %v all carry the labels %v, which only one may", names, labels)
}

// DeleteNode stops the bootstrap of a machine's running node (so kubeadm does nothing more
// there), then removes its container and volumes. Deleting a node that is already gone is not
// an error; one whose bootstrap cannot be stopped is removed all the same.
func (m *Manager) DeleteNode(ctx context.Context, cluster ClusterKey, machine string) error {
	if c, err := m.getNode(ctx, cluster, machine); err == nil && c != nil && c.Running {
		if _, err := m.run(ctx, c.Name, command{argv: m.bootstrap.StopCommand()}); err != nil {
			ctrl.LoggerFrom(ctx).Info("Could not stop the bootstrap before deleting the node", "container", c.Name, "error", err.Error())
		}
	}
	return m.removeLabelled(ctx, cluster.MachineLabels(machine))
}

// removeLabelled removes the containers carrying the labels, then their volumes (which a
// container still using them would keep).
func (m *Manager) removeLabelled(ctx context.Context, labels map[string]string) error {
	var errs []error
	containers, err := m.runtime.ListContainers(ctx, labels)
	if err != nil {
		return err
	}
	for _, c := range containers {
		if err := m.runtime.RemoveContainer(ctx, c.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return kerrors.NewAggregate(errs)
	}
	volumes, err := m.runtime.ListVolumes(ctx, labels)
	if err != nil {
		return err
	}
	for _, v := range volumes {
		if err := m.runtime.RemoveVolume(ctx, v.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return kerrors.NewAggregate(errs)
}

// NodeState is what a running node container is doing.
type NodeState struct {
	// Ready is true when systemd finished booting and containerd runs with its CRI plugin.
	Ready bool
	// Failed is true when the node cannot run pods and will not recover by waiting: containerd
	// runs but its CRI plugin failed to load.
	Failed bool
	// Detail says what is not ready yet, e.g. "systemd is starting", or why the node failed.
	Detail string
}

// Ready tells whether systemd and containerd (with its CRI plugin) are up in the running node.
func (n *Node) Ready(ctx context.Context) (NodeState, error) {
	// "degraded" (a unit failed, common in containers) is good enough for kubelet.
	m, name := n.m, n.Name
	r, err := m.run(ctx, name, command{argv: nodecmd.Check()})
	if err != nil {
		return NodeState{}, errors.Wrapf(err, "checking systemd in node %s", name)
	}
	lines := append(strings.Fields(r.Output), "unknown", "unknown", "")
	system, containerd, cri := lines[0], lines[1], lines[2]
	switch {
	case system != "running" && system != "degraded":
		return NodeState{Detail: fmt.Sprintf("systemd is %s", system)}, nil
	case containerd != "active":
		return NodeState{Detail: fmt.Sprintf("containerd is %s", containerd)}, nil
	case cri == "error":
		return NodeState{Failed: true, Detail: m.criFailure(ctx, name)}, nil
	}
	return NodeState{Ready: true}, nil
}

// criFailure explains why containerd's CRI plugin failed to load in a node, from containerd's
// journal, with what to do when the cause is one the engine's host can fix.
func (m *Manager) criFailure(ctx context.Context, name string) string {
	r, _ := m.run(ctx, name, command{argv: nodecmd.CRIFailure()})
	cause := strings.TrimSpace(r.Stdout)
	// containerd logs `... msg="failed to load plugin ..." error="<why>"`: keep the why.
	if i := strings.LastIndex(cause, "error="); i >= 0 {
		if why, err := strconv.Unquote(cause[i+len("error="):]); err == nil {
			cause = why
		}
	}
	if cause == "" {
		cause = "see journalctl -u containerd in the node"
	}
	msg := fmt.Sprintf("containerd in node %s cannot run pods: its CRI plugin failed to load (%s)", name, cause)
	if strings.Contains(cause, "too many open files") {
		msg += "; the engine's host ran out of inotify instances, which every node's containerd, kubelet and " +
			"systemd use: raise them on that host (sysctl -w fs.inotify.max_user_instances=512), then replace the node"
	}
	return msg
}

// engineImageLabel marks an image Dockyard copied into a node with the engine's image ID, so a
// node holding an image of that name knows whether it is the engine's current one.
const engineImageLabel = "dockyard.x-k8s.io/engine-image-id"

// ImageLoad reports an image being copied into a node.
type ImageLoad struct {
	Node, Image string
	// Bytes is how much of the stream (the image's layers, uncompressed) was copied so far.
	Bytes int64
	Took  time.Duration
	// Done is false in the reports while a large image streams (every loadProgressBytes).
	Done bool
}

// loadProgressBytes is how often a large image's copy is reported while it streams.
const loadProgressBytes = 100 << 20

// loadImages copies images from the engine into the node's containerd (namespace k8s.io), those
// the policy lets the cluster's namespace load:
// each one the node does not hold with the engine's image ID, so an image rebuilt under the
// same name is copied again and one copied before is not. The stream goes from the engine into
// the node without landing on disk. report, when set, hears of every image copied.
func (m *Manager) loadImages(ctx context.Context, node string, cluster ClusterKey, images []string, report func(ImageLoad)) error {
	for _, img := range images {
		if err := m.allowedLoad(img, cluster); err != nil {
			return err
		}
	}
	for _, img := range images {
		named, err := reference.ParseNormalizedNamed(img)
		if err != nil {
			return errors.Wrapf(err, "loading %s", img)
		}
		info, err := m.images.InspectImage(ctx, img)
		if container.IsNotFound(err) {
			return errors.Errorf("image %s is not on the container engine: build or pull it there first (Dockyard copies images from the engine into nodes)", img)
		}
		if err != nil {
			return errors.Wrapf(err, "inspecting image %s", img)
		}
		r, err := m.run(ctx, node, command{argv: nodecmd.ImagesList(named.String())})
		if err != nil {
			return errors.Wrapf(err, "listing images in node %s", node)
		}
		if r.Code == 0 && strings.Contains(r.Stdout, engineImageLabel+"="+info.ID) {
			continue
		}
		start := time.Now()
		progress := func(n int64, done bool) {
			if report != nil {
				report(ImageLoad{Node: node, Image: img, Bytes: n, Took: time.Since(start), Done: done})
			}
		}
		n, err := m.importImage(ctx, node, img, named.String(), info.ID, func(n int64) { progress(n, false) })
		if err != nil {
			return err
		}
		progress(n, true)
	}
	return nil
}

// importImage streams an image from the engine into the node and labels it with the engine's
// image ID; it returns the bytes streamed, and tells progress every loadProgressBytes.
func (m *Manager) importImage(ctx context.Context, node, img, name, id string, progress func(int64)) (int64, error) {
	stream, err := m.images.SaveImages(ctx, []string{img})
	if err != nil {
		return 0, err
	}
	defer stream.Close()
	counted := &countingReader{r: stream, every: loadProgressBytes, progress: progress}
	if _, err := m.output(ctx, node, command{argv: nodecmd.ImageImport(), stdin: counted, what: "importing " + img}); err != nil {
		return counted.n, errors.Wrapf(err, "importing %s into node %s", img, node)
	}
	_, err = m.output(ctx, node, command{argv: nodecmd.ImageLabel(name, engineImageLabel+"="+id), what: "labelling " + img})
	return counted.n, errors.Wrapf(err, "labelling %s in node %s", img, node)
}

// countingReader counts what is read through it and calls progress every so many bytes.
type countingReader struct {
	r        io.Reader
	n, next  int64
	every    int64
	progress func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && c.n >= c.next+c.every {
		c.next = c.n
		c.progress(c.n)
	}
	return n, err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
