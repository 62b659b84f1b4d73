// Package runtimes is the one place engines are built: by name (Docker, the default, Podman or
// containerd, each reached at an endpoint or at the engine's default one) for the manager's
// host, the command-line tools and the tests, so a choice made with a flag or an environment
// variable reaches every one of them the same way; and, chosen per cluster from its
// DockyardCluster, a Kubernetes cluster (nodes as Pods) or the manager's memory (in-memory
// clusters). Every engine it builds has the same deadlines (container.WithTimeouts).
package runtimes

import (
	"cmp"
	"os"
	"slices"
	"strings"

	"github.com/pkg/errors"
	"k8s.io/client-go/rest"

	"github.com/dockyard-dev/dockyard/pkg/container"
	containerdruntime "github.com/dockyard-dev/dockyard/pkg/container/containerd"
	"github.com/dockyard-dev/dockyard/pkg/container/dockerengine"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/container/kubernetes"
	podmanruntime "github.com/dockyard-dev/dockyard/pkg/container/podman"
)

// The engines Dockyard drives.
const (
	Docker     = "docker"
	Podman     = "podman"
	Containerd = "containerd"
)

// Names lists the engines, the default first.
func Names() []string { return []string{Docker, Podman, Containerd} }

// Environment variables naming the engine and its endpoint for the command-line tools and the
// tests (the manager takes flags of the same names).
const (
	RuntimeEnv  = "DOCKYARD_CONTAINER_RUNTIME"
	EndpointEnv = "DOCKYARD_CONTAINER_RUNTIME_ENDPOINT"
)

// Config names an engine and where it answers.
type Config struct {
	// Name is docker, podman or containerd; empty means docker. It is ignored with Kubernetes.
	Name string
	// Endpoint is the engine's address, e.g. unix:///run/podman/podman.sock; empty means the
	// engine's default (for Docker: DOCKER_HOST, or the local socket).
	Endpoint string
	// Kubernetes, when set, is the engine instead: a namespace of a Kubernetes cluster whose
	// Pods are the containers.
	Kubernetes *KubernetesCluster
	// InMemory, when set, is the engine instead: containers that exist only in the manager's
	// memory (in-memory clusters).
	InMemory *InMemory
	// Timeouts bound the engine's calls; zero means container.DefaultTimeouts. The image
	// builder gives images of gigabytes more time to move.
	Timeouts container.Timeouts
}

// KubernetesCluster is a namespace of a Kubernetes cluster as an engine.
type KubernetesCluster struct {
	// REST reaches the cluster; Namespace holds the Pods.
	REST      *rest.Config
	Namespace string
	// External says the engine's clients (the manager) are outside the cluster's network:
	// fronts are Services of type LoadBalancer (kubernetes.ExternalFronts).
	External bool
	// Owner is whom the engine acts for (kubernetes.WithOwner: only its objects are the
	// engine's, and the namespace is claimed for it), at most MaxOwnerLength characters; empty:
	// kubernetes.DefaultOwner.
	Owner string
	// SpecCheck is the owner's check of a container spec an engine makes again by itself
	// (kubernetes.WithSpecCheck); nil: none.
	SpecCheck func(container.ContainerSpec) error
}

// InMemory is the in-memory engine (inmemory.Engine).
type InMemory struct {
	// Address is where its clusters' API servers listen: an address of the manager its
	// clients reach; empty: 127.0.0.1. Host is the name or address their endpoints carry;
	// empty: Address.
	Address, Host string
	// State, when set, keeps each cluster (the containers whose GroupLabel has one value)
	// outside the manager's memory; OnSyncError hears what a sync could not do
	// (inmemory.EngineOptions).
	State       inmemory.StateStore
	GroupLabel  string
	OnSyncError func(error)
}

// MaxOwnerLength bounds KubernetesCluster.Owner.
const MaxOwnerLength = kubernetes.MaxOwnerLength

// FromEnv reads the engine's name and endpoint from DOCKYARD_CONTAINER_RUNTIME (Docker when
// unset) and DOCKYARD_CONTAINER_RUNTIME_ENDPOINT.
func FromEnv() Config {
	c := Config{Name: os.Getenv(RuntimeEnv), Endpoint: os.Getenv(EndpointEnv)}
	if name, err := Parse(c.Name); err == nil {
		c.Name = name
	}
	return c
}

// String is how the engine is named in messages.
func (c Config) String() string {
	if c.InMemory != nil {
		return "in-memory engine at " + cmp.Or(c.InMemory.Host, c.InMemory.Address, "127.0.0.1")
	}
	if k := c.Kubernetes; k != nil {
		host := ""
		if k.REST != nil {
			host = " at " + k.REST.Host
		}
		return "kubernetes namespace " + k.Namespace + host
	}
	name := c.Name
	if name == "" {
		name = Docker
	}
	if c.Endpoint == "" {
		return name
	}
	return name + " at " + c.Endpoint
}

// Runtime is a connected engine; Close releases its connections.
type Runtime interface {
	container.Runtime
	Close() error
}

// Parse returns the engine a name means: one of Names, whatever its case; empty means Docker.
func Parse(name string) (string, error) {
	name = strings.ToLower(name)
	if name == "" {
		return Docker, nil
	}
	if !slices.Contains(Names(), name) {
		return "", errors.Errorf("unknown container runtime %q: want one of %s", name, strings.Join(Names(), ", "))
	}
	return name, nil
}

// New connects to the engine the configuration names, every call bounded by its Timeouts
// (container.DefaultTimeouts unless set), so a hung engine fails one call instead of holding its
// caller. Connecting does not talk to the engine: call Info to learn whether it answers.
func New(c Config) (Runtime, error) {
	rt, err := connect(c)
	if err != nil {
		return nil, err
	}
	t := c.Timeouts
	if t.Call <= 0 {
		t.Call = container.DefaultTimeouts.Call
	}
	if t.Transfer <= 0 {
		t.Transfer = container.DefaultTimeouts.Transfer
	}
	return bounded{Runtime: container.WithTimeouts(rt, t), closer: rt}, nil
}

// bounded is an engine with deadlines that still closes the connection underneath.
type bounded struct {
	container.Runtime
	closer interface{ Close() error }
}

func (b bounded) Close() error { return b.closer.Close() }

func connect(c Config) (Runtime, error) {
	if c.InMemory != nil {
		m := c.InMemory
		return inmemory.NewEngine(inmemory.EngineOptions{Address: m.Address, Host: m.Host, State: m.State, GroupLabel: m.GroupLabel, OnSyncError: m.OnSyncError}), nil
	}
	if k := c.Kubernetes; k != nil {
		if k.REST == nil {
			return nil, errors.New("a Kubernetes engine needs the cluster's REST configuration")
		}
		opts := []kubernetes.Option{kubernetes.WithOwner(k.Owner), kubernetes.WithSpecCheck(k.SpecCheck)}
		if k.External {
			opts = append(opts, kubernetes.ExternalFronts())
		}
		return kubernetes.New(k.REST, k.Namespace, opts...)
	}
	name, err := Parse(c.Name)
	if err != nil {
		return nil, err
	}
	switch name {
	case Podman:
		return podmanruntime.New(c.Endpoint)
	case Containerd:
		return containerdruntime.New(strings.TrimPrefix(c.Endpoint, "unix://"), containerdruntime.Options{})
	}
	if c.Endpoint == "" {
		return dockerengine.New()
	}
	return dockerengine.NewWithHost(c.Endpoint)
}

// DefaultSocket is the unix socket an engine answers on when no endpoint is given, on the
// engine's own host.
func DefaultSocket(name string) string {
	switch name {
	case Podman:
		return strings.TrimPrefix(podmanruntime.DefaultEndpoint, "unix://")
	case Containerd:
		return strings.TrimPrefix(containerdruntime.DefaultEndpoint, "unix://")
	}
	return "/var/run/docker.sock"
}
