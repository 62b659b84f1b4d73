package inmemory

import (
	"context"
	"maps"
	"sync"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Balancing is the fake engine with what an engine of many hosts (Kubernetes) adds: fronts
// (container.Balancer), all answering on FrontAddress, or on none and saying why while Pending
// is set; and networks that report no subnets (NetworkPolicies), whose specs it keeps.
type Balancing struct {
	*Runtime

	mu       sync.Mutex
	fronts   map[string]container.FrontSpec
	networks map[string]container.NetworkSpec
	pending  string
}

var _ container.Balancer = &Balancing{}

// FrontAddress is where the fronts of a Balancing engine answer; FrontNodePort and FrontHost
// where they answer from outside its network.
const (
	FrontAddress  = "10.96.0.10"
	FrontNodePort = 30001
	FrontHost     = "172.18.0.2"
)

// NewBalancing wraps a fake engine.
func NewBalancing(rt *Runtime) *Balancing {
	return &Balancing{Runtime: rt, fronts: map[string]container.FrontSpec{}, networks: map[string]container.NetworkSpec{}}
}

// SetPending makes fronts have no address, for the reason given; "" gives them one again.
func (b *Balancing) SetPending(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = why
}

// Fronts returns the specs of the fronts there are.
func (b *Balancing) Fronts() map[string]container.FrontSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.fronts)
}

// NetworkSpec returns the spec a network was created with.
func (b *Balancing) NetworkSpec(name string) container.NetworkSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.networks[name]
}

// CreateNetwork records the spec, then creates the network.
func (b *Balancing) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	b.mu.Lock()
	b.networks[spec.Name] = spec
	b.mu.Unlock()
	return b.Runtime.CreateNetwork(ctx, spec)
}

// InspectNetwork returns the network without subnets or gateways.
func (b *Balancing) InspectNetwork(ctx context.Context, name string) (*container.Network, error) {
	n, err := b.Runtime.InspectNetwork(ctx, name)
	if n != nil {
		n.Subnets, n.Gateways = nil, nil
	}
	return n, err
}

// EnsureFront records a front, or returns the one of that name as it is.
func (b *Balancing) EnsureFront(_ context.Context, spec container.FrontSpec) (*container.Front, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.fronts[spec.Name]; !ok {
		b.fronts[spec.Name] = spec
	}
	return b.front(spec.Name), nil
}

func (b *Balancing) front(name string) *container.Front {
	s := b.fronts[name]
	f := &container.Front{Name: name, Labels: s.Labels, Address: FrontAddress, Port: s.Port, NodePort: FrontNodePort}
	if b.pending != "" {
		f.Address, f.Pending = "", b.pending
	}
	return f
}

// InspectFront returns a front; ErrNotFound when there is none of that name.
func (b *Balancing) InspectFront(_ context.Context, name string) (*container.Front, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.fronts[name]; !ok {
		return nil, notFound("front", name)
	}
	return b.front(name), nil
}

// FrontHosts returns FrontHost.
func (b *Balancing) FrontHosts(context.Context) ([]string, error) {
	return []string{FrontHost}, nil
}

// RemoveFront forgets a front; one that is not there is not an error.
func (b *Balancing) RemoveFront(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.fronts, name)
	return nil
}

// Balancer is the fake's fronts.
func (b *Balancing) Balancer() container.Balancer { return b }
