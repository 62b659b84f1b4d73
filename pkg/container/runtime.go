// Package container is the small interface Dockyard needs from a container engine, with
// engine-neutral types. Implementations live in sub-packages: dockerengine (the Docker Go SDK),
// podman (Docker's, with Podman's differences), containerd (containerd's Go client, CNI) and
// fake (unit tests); conformance proves each against the contract stated here, and runtimes
// picks one. Only the node layer (package docker at the repository's top) uses this package.
package container

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/pkg/errors"
)

// ErrNotFound is wrapped by every implementation when a container, network, volume or image
// does not exist. Test with IsNotFound.
var ErrNotFound = errors.New("not found")

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// ErrPortInUse is wrapped by every implementation when StartContainer cannot publish a host
// port that another container or process holds. Test with IsPortInUse.
var ErrPortInUse = errors.New("host port in use")

// IsPortInUse reports whether err says a host port is taken.
func IsPortInUse(err error) bool { return errors.Is(err, ErrPortInUse) }

// MatchLabels is true when have carries every label of want, where an empty value in want
// matches any value of its key: the label selectors of Runtime's lists. Runtimes whose engine
// filters differently (Podman: any label, not all) check again with it.
func MatchLabels(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

// Runtime is what Dockyard needs from a container engine. Names identify containers, networks
// and volumes; labels find everything Dockyard created. In label selectors, an empty value
// matches any value of the key.
type Runtime interface {
	// Info describes the engine.
	Info(ctx context.Context) (EngineInfo, error)

	// CreateContainer creates (but does not start) a container.
	CreateContainer(ctx context.Context, spec ContainerSpec) error
	// StartContainer starts a created or stopped container. A published host port that another
	// container or process holds fails it with ErrPortInUse; the container stays created.
	StartContainer(ctx context.Context, name string) error
	// InspectContainer returns the container's state; ErrNotFound when it does not exist.
	InspectContainer(ctx context.Context, name string) (*Container, error)
	// ListContainers returns every container, running or not, carrying all the given labels.
	ListContainers(ctx context.Context, labels map[string]string) ([]Container, error)
	// SignalContainer sends a signal such as "SIGHUP" to the container's main process.
	SignalContainer(ctx context.Context, name, signal string) error
	// RemoveContainer stops and removes a container with its anonymous volumes. Removing a
	// container that does not exist is not an error.
	RemoveContainer(ctx context.Context, name string) error
	// Exec runs a command in a running container and returns its exit code; a non-zero exit
	// code is not an error. Stdin, when set, is streamed to the command and closed at EOF, so
	// secrets never appear in the command line. A command that exits non-zero before reading
	// all of its stdin returns its exit code, not the broken stream, with its stderr as far as
	// the engine delivered it (Podman's service may cut it short); one that exits 0 without
	// reading it all is an error.
	Exec(ctx context.Context, name string, opts ExecOptions) (int, error)
	// CopyToContainer extracts a tar stream into a directory of the container.
	CopyToContainer(ctx context.Context, name, dir string, tarStream io.Reader) error
	// CopyFromContainer returns a tar stream of a path in the container.
	CopyFromContainer(ctx context.Context, name, path string) (io.ReadCloser, error)
	// ContainerLogs returns the last lines of the container's output.
	ContainerLogs(ctx context.Context, name string, tailLines int) (string, error)
	// Events streams what happens to containers carrying the labels (and to every network)
	// from now on, until ctx ends or the stream breaks; the error channel then gets the reason
	// and both channels close. Callers subscribe again after an error.
	Events(ctx context.Context, labels map[string]string) (<-chan Event, <-chan error)

	// CreateNetwork creates a bridge network.
	CreateNetwork(ctx context.Context, spec NetworkSpec) error
	// InspectNetwork returns a network; ErrNotFound when it does not exist.
	InspectNetwork(ctx context.Context, name string) (*Network, error)
	// ListNetworks returns the networks carrying all the given labels.
	ListNetworks(ctx context.Context, labels map[string]string) ([]Network, error)
	// RemoveNetwork removes a network; removing one that does not exist is not an error.
	RemoveNetwork(ctx context.Context, name string) error
	// ConnectNetwork attaches an existing container to one more network; a container already
	// attached is left as it is. ErrNotFound when the container or the network does not exist.
	ConnectNetwork(ctx context.Context, network, name string) error
	// DisconnectNetwork detaches a container from a network; a container (or network) that is
	// not there, or not attached, is not an error.
	DisconnectNetwork(ctx context.Context, network, name string) error

	// CreateVolume creates a named volume.
	CreateVolume(ctx context.Context, spec VolumeSpec) error
	// ListVolumes returns the volumes carrying all the given labels.
	ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error)
	// RemoveVolume removes a volume; removing one that does not exist is not an error.
	RemoveVolume(ctx context.Context, name string) error

	// ImageExists reports whether the engine has the image locally.
	ImageExists(ctx context.Context, ref string) (bool, error)
	// PullImage pulls an image from its registry.
	PullImage(ctx context.Context, ref string) error
	// SaveImages returns a tar stream (docker save / OCI layout) of images.
	SaveImages(ctx context.Context, refs []string) (io.ReadCloser, error)
	// LoadImages loads a tar stream produced by SaveImages (or docker save).
	LoadImages(ctx context.Context, tarStream io.Reader) error
	// InspectImage returns an image's ID and labels; ErrNotFound when the engine does not
	// have it.
	InspectImage(ctx context.Context, ref string) (*Image, error)
	// RemoveImage removes an image name, or an image by ID, and the image itself when no
	// other name and no container uses it. Removing an image that does not exist is not an
	// error; one a container uses is.
	RemoveImage(ctx context.Context, ref string) error

	// Zones returns the failure domains that have a host containers can be scheduled on,
	// sorted (Kubernetes: its nodes' topology.kubernetes.io/zone). An engine of one host has
	// none: nil, which is not an error.
	Zones(ctx context.Context) ([]string, error)
	// Balancer returns the engine's own balancing of traffic over its containers (Kubernetes:
	// Services), which the node layer uses in place of a load balancer container; nil for an
	// engine without one, which is not an error. It never talks to the engine, and the same
	// engine always gives the same answer.
	Balancer() Balancer
}

// Event is something that happened to a container or a network on the engine.
type Event struct {
	// Type is EventContainer or EventNetwork.
	Type string
	// Action is what happened, in Docker's words: "start", "die" (stopped, killed or crashed),
	// "destroy" (removed), "connect", "disconnect".
	Action string
	// Name of the container or network.
	Name string
	// Labels of the container (networks' events carry none).
	Labels map[string]string
}

// Event types.
const (
	EventContainer = "container"
	EventNetwork   = "network"
)

// EngineInfo describes a container engine.
type EngineInfo struct {
	// Name of the engine implementation, e.g. "docker".
	Name string
	// Version of the engine.
	Version string
	// CgroupVersion is "1" or "2".
	CgroupVersion string
	// CgroupDriver is "cgroupfs" or "systemd".
	CgroupDriver string
	// OperatingSystem of the engine's host.
	OperatingSystem string
	// CPUs the engine's host has: what a node container without a CPU limit (and its kubelet)
	// sees.
	CPUs int
	// MemoryBytes is the engine host's total memory (MemTotal of /proc/meminfo): what a node
	// container without a memory limit (and its kubelet) sees.
	MemoryBytes int64
	// Architecture of the engine's host in Go's words (GOARCH: amd64, arm64, ...), which is the
	// architecture of the node images it runs.
	Architecture string
}

// GoArch names a machine architecture the way Go (and Kubernetes' kubernetes.io/arch label)
// does: engines report uname's machine ("x86_64", "aarch64") or already Go's name ("amd64").
// A name it does not know is returned as it is.
func GoArch(machine string) string {
	switch m := strings.ToLower(machine); m {
	case "x86_64", "x86-64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "armv8", "armv8l":
		return "arm64"
	case "i386", "i686", "386":
		return "386"
	case "armv7l", "armv7", "armv6l", "arm":
		return "arm"
	case "ppc64le", "s390x", "riscv64", "mips64le", "loong64":
		return m
	default:
		return machine
	}
}

// ContainerSpec describes a container to create.
type ContainerSpec struct {
	Name     string
	Hostname string
	Image    string
	// Entrypoint and Cmd override the image's when set.
	Entrypoint []string
	Cmd        []string
	Env        []string
	Labels     map[string]string
	// Network is the network the container is attached to, reachable by its name and Aliases;
	// HostNetwork puts it in the engine host's own network namespace (engines of many hosts,
	// whose containers are not on the manager's host, refuse it).
	Network        string
	NetworkAliases []string
	// IPv4Address is the container's fixed address on Network, kept across restarts of the
	// container and of the engine; empty lets the engine choose one. The network must have been
	// created with a Subnet holding it (outside its IPRange).
	IPv4Address string
	// IPv6Address is the same for the network's IPv6 subnet (IPv6Subnet).
	IPv6Address string
	Ports       []PortMapping
	Mounts      []Mount
	// DNSSearch, when not nil, is the search list of the container's /etc/resolv.conf, in place
	// of the engine host's (empty: no search domain); nil keeps the host's.
	DNSSearch *[]string
	// Tty allocates a terminal (systemd logs its boot to it).
	Tty        bool
	StopSignal string
	// RestartPolicy is "no", "on-failure", "always" or "unless-stopped"; empty means "no".
	RestartPolicy string
	Security      SecuritySpec
	Resources     Resources
	// Zone is the failure domain the container must run in (Kubernetes: the nodes labelled
	// topology.kubernetes.io/zone with it); empty: anywhere. Engines of one host have one zone
	// and ignore it.
	Zone string
	// SpreadFrom are the labels of the containers this one is spread away from, over zones
	// and hosts, where the engine's hosts are many (Kubernetes: topology spread, a preference);
	// engines of one host ignore it.
	SpreadFrom map[string]string
	// ReadyPort is a TCP port that accepts connections once the container serves: engines that
	// balance traffic themselves (Balancer) send it traffic only then. Others ignore it.
	ReadyPort int
}

// Balancer is what an engine that balances traffic over its containers itself (Kubernetes: a
// Service) offers through Runtime.Balancer: a front whose address stays while the containers
// behind it come and go.
type Balancer interface {
	// EnsureFront makes the front of a spec, or returns the one of that name as it is.
	EnsureFront(ctx context.Context, spec FrontSpec) (*Front, error)
	// InspectFront returns a front; ErrNotFound when it does not exist.
	InspectFront(ctx context.Context, name string) (*Front, error)
	// RemoveFront removes a front; removing one that does not exist is not an error.
	RemoveFront(ctx context.Context, name string) error
	// FrontHosts returns the addresses of the engine's hosts where fronts' node ports answer
	// now, for clients outside the engine's network.
	FrontHosts(ctx context.Context) ([]string, error)
}

// FrontSpec describes a stable address in front of the ready containers carrying Select.
type FrontSpec struct {
	Name   string
	Labels map[string]string
	// Select are the labels of the containers traffic goes to (exact values).
	Select map[string]string
	// Port the front serves, sent to TargetPort of the containers (Port when 0).
	Port       int
	TargetPort int
}

// Front is the observed state of a front.
type Front struct {
	Name   string
	Labels map[string]string
	// Address is where the front answers, on Port: from the engine's own network, or from
	// outside it where the engine makes fronts for clients elsewhere (Kubernetes:
	// ExternalFronts). Empty while the engine has not given the front one yet; Pending then
	// says why.
	Address string
	Pending string
	Port    int
	// NodePort, when not zero, is where the front also answers on every host of the engine
	// (FrontHosts), for clients outside its network (Kubernetes: the Service's node port).
	NodePort int
}

// SecuritySpec is the privilege of a container.
type SecuritySpec struct {
	// Privileged grants every capability and device.
	Privileged bool
	// CapAdd and CapDrop adjust capabilities when not privileged; "ALL" is allowed in CapAdd.
	CapAdd  []string
	CapDrop []string
	// DeviceCgroupRules allow device access, e.g. "a *:* rwm".
	DeviceCgroupRules []string
	// Unconfined disables seccomp and AppArmor confinement and the masked /proc and /sys paths.
	Unconfined bool
	// PrivateCgroupNamespace gives the container its own cgroup namespace.
	PrivateCgroupNamespace bool
}

// Resources limit a container. Zero means no limit.
type Resources struct {
	NanoCPUs    int64
	MemoryBytes int64
	// CPUShares weighs the container's CPU time against the engine's other containers when
	// they compete for it (cgroup v1 cpu.shares, converted to cpu.weight on cgroup v2 as runc
	// does); it limits nothing on an idle host. Zero is the engine's default, 1024.
	CPUShares int64
}

// MountType is the kind of a mount.
type MountType string

// Mount types.
const (
	MountBind   MountType = "bind"
	MountVolume MountType = "volume"
	MountTmpfs  MountType = "tmpfs"
)

// Mount is a filesystem mounted into a container.
type Mount struct {
	Type MountType
	// Source is the host path (bind) or volume name (volume); unused for tmpfs.
	Source   string
	Target   string
	ReadOnly bool
	// Optional leaves a bind mount out when its source does not exist on the engine's host
	// (which may not be the host the controller runs on), e.g. /lib/modules on a kernel
	// without loadable modules. A missing source of a mount that is not optional is an error.
	Optional bool
}

// PortMapping publishes a container port on the host.
type PortMapping struct {
	ContainerPort int
	// Protocol is "tcp" (default) or "udp".
	Protocol string
	// HostIP to bind, e.g. "127.0.0.1"; empty binds every address.
	HostIP string
	// HostPort on the host; 0 lets the engine choose.
	HostPort int
}

// Container is the observed state of a container.
type Container struct {
	ID   string
	Name string
	// Hostname is the container's hostname (InspectContainer only).
	Hostname string
	Image    string
	Labels   map[string]string
	// State is the engine's state word: "created", "running", "exited", ...
	State     string
	Running   bool
	ExitCode  int
	StartedAt time.Time
	// Networks maps network name to the container's endpoint on it.
	Networks map[string]Endpoint
	// Ports are the published ports with the host ports the engine chose.
	Ports []PortMapping
}

// Endpoint is a container's attachment to a network.
type Endpoint struct {
	IPv4 string
	IPv6 string
}

// ExecOptions describes a command run in a container.
type ExecOptions struct {
	Cmd    []string
	Env    []string
	User   string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// NetworkSpec describes a bridge network to create.
type NetworkSpec struct {
	Name   string
	Labels map[string]string
	// Subnet (IPv4, CIDR) and Gateway configure the network's addresses; empty lets the engine
	// choose. Only a configured subnet lets containers have fixed addresses.
	Subnet  string
	Gateway string
	// IPRange (CIDR, within Subnet) is where the engine picks the addresses of containers
	// without a fixed one, so fixed addresses outside it never collide with them.
	IPRange string
	// EnableIPv6 asks for a dual-stack network; the engine picks its IPv6 subnet unless
	// IPv6Subnet is set.
	EnableIPv6 bool
	// IPv6Subnet, IPv6Gateway and IPv6Range are Subnet, Gateway and IPRange for the network's
	// IPv6 addresses (IPv6Subnet implies EnableIPv6); Subnet must be set with them. Engines
	// without IPv6 networks refuse them.
	IPv6Subnet  string
	IPv6Gateway string
	IPv6Range   string
	// OpenPorts are TCP ports the network's containers accept from anywhere, on engines that
	// isolate networks by policy rather than by bridge (Kubernetes: a NetworkPolicy admits
	// only the network's own Pods, and these ports from any source). Engines of one host
	// ignore it: their containers are reached from outside through published ports.
	OpenPorts []int
}

// WantsIPv6 reports whether the spec asks for a dual-stack network.
func (s NetworkSpec) WantsIPv6() bool { return s.EnableIPv6 || s.IPv6Subnet != "" }

// HostNetwork, as ContainerSpec.Network, is the engine host's own network namespace.
const HostNetwork = "host"

// Network is the observed state of a network.
type Network struct {
	ID     string
	Name   string
	Labels map[string]string
	// Interface is the network's interface on the engine's host (its bridge), through which its
	// containers reach the host; empty on engines whose networks have none there.
	Interface string
	// Gateways are the gateway addresses of the network's subnets.
	Gateways []string
	// Subnets in CIDR notation.
	Subnets []string
	// Containers attached, by name.
	Containers []string
}

// Image is an image in the engine.
type Image struct {
	// ID is the engine's image ID (the digest of its configuration, "sha256:...").
	ID     string
	Labels map[string]string
}

// VolumeSpec describes a named volume to create.
type VolumeSpec struct {
	Name   string
	Labels map[string]string
}

// Volume is the observed state of a volume.
type Volume struct {
	Name   string
	Labels map[string]string
}
