package inmemory

import (
	"cmp"
	"context"
	"maps"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/workloadapi"
)

// EngineOptions configure an in-memory engine.
type EngineOptions struct {
	// Address is where the API servers of its clusters listen: an address of the manager that
	// Cluster API's controllers reach (the manager Pod's IP). Empty: 127.0.0.1.
	Address string
	// Host is the name or address the clusters' endpoints carry, which resolves to Address
	// where Cluster API's controllers run (a headless Service of the manager Pod: it stays
	// when the Pod is replaced, and names the manager a cluster moved to); empty: Address.
	Host string
	// State, when set, keeps each group of containers (those whose GroupLabel has one value: a
	// cluster) with its front and cluster outside the process: the engine takes in every group
	// that has a record when it is made, and every SyncInterval (DefaultSyncInterval when zero)
	// saves the groups that changed and takes in or lets go of those whose records came or
	// went. OnSyncError, when set, hears what a sync could not do.
	State        StateStore
	GroupLabel   string
	SyncInterval time.Duration
	OnSyncError  func(error)
}

// Engine is the engine of in-memory clusters: its containers exist only in the manager's
// memory (Runtime), every image can be pulled (there is no registry to ask), and its node
// containers are simulated (Nodes) down to kubeadm: a node that runs kubeadm init makes its
// cluster's API server and etcd (pkg/workloadapi), one that runs kubeadm join registers its
// Node, one removed leaves the cluster. The engine balances traffic itself (Balancer): a front
// is a listener on Address, on the port the front asks for when it is free there and on one
// the system picks otherwise, that serves the API of the cluster whose kubeadm init named it
// as the control plane endpoint, while a container the front selects runs.
type Engine struct {
	*Runtime
	// Nodes simulates the insides of the engine's containers.
	Nodes *Nodes

	address, host string

	mu     sync.Mutex
	fronts map[string]*front

	// persist is nil without a StateStore; stateMu guards its counts, syncMu runs one Sync at
	// a time.
	persist     *persistence
	stateMu     sync.Mutex
	syncMu      sync.Mutex
	onSyncError func(error)
}

var (
	_ container.Runtime  = &Engine{}
	_ container.Balancer = &Engine{}
)

// NewEngine returns an in-memory engine with no container.
func NewEngine(opts EngineOptions) *Engine {
	rt := New()
	rt.PullAnything = true
	address := cmp.Or(opts.Address, "127.0.0.1")
	e := &Engine{Runtime: rt, address: address, host: cmp.Or(opts.Host, address), fronts: map[string]*front{}, onSyncError: opts.OnSyncError}
	e.Nodes = NewNodes(rt)
	e.Nodes.Kubeadm = e.kubeadm
	e.Nodes.Service = e.service
	e.Nodes.NetworkDelay = e.networkDelay
	rt.OnRemove = func(c *Container) {
		e.leave(c)
		e.Nodes.forget(c.Spec.Name)
	}
	if opts.State != nil && opts.GroupLabel != "" {
		e.persist = &persistence{store: opts.State, label: opts.GroupLabel, interval: cmp.Or(opts.SyncInterval, DefaultSyncInterval),
			changes: map[string]uint64{}, saved: map[string]savedAt{}, over: map[string]bool{}, settled: map[string]bool{}, stop: make(chan struct{})}
		rt.OnChange = e.touch
		ctx, cancel := context.WithTimeout(context.Background(), 3*e.persist.interval)
		if err := e.Sync(ctx); err != nil && e.onSyncError != nil {
			e.onSyncError(err)
		}
		cancel()
		go e.syncLoop()
	}
	return e
}

// CreateContainer creates a container; the first thing made of a cluster moved here takes its
// record in first (takeIn).
func (e *Engine) CreateContainer(ctx context.Context, spec container.ContainerSpec) error {
	if err := e.takeIn(ctx, spec.Labels); err != nil {
		return errors.Wrapf(err, "creating container %s", spec.Name)
	}
	return e.Runtime.CreateContainer(ctx, spec)
}

// CreateNetwork creates a network, as CreateContainer.
func (e *Engine) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	if err := e.takeIn(ctx, spec.Labels); err != nil {
		return errors.Wrapf(err, "creating network %s", spec.Name)
	}
	return e.Runtime.CreateNetwork(ctx, spec)
}

// CreateVolume creates a volume, as CreateContainer.
func (e *Engine) CreateVolume(ctx context.Context, spec container.VolumeSpec) error {
	if err := e.takeIn(ctx, spec.Labels); err != nil {
		return errors.Wrapf(err, "creating volume %s", spec.Name)
	}
	return e.Runtime.CreateVolume(ctx, spec)
}

// Info describes the engine.
func (e *Engine) Info(ctx context.Context) (container.EngineInfo, error) {
	info, err := e.Runtime.Info(ctx)
	info.Name = "inmemory"
	return info, err
}

// Balancer is the engine's fronts.
func (e *Engine) Balancer() container.Balancer { return e }

// front is a listener in front of a cluster's API server.
type front struct {
	spec     container.FrontSpec
	listener net.Listener
	// cluster is the workload cluster whose kubeadm init named the front; nil before.
	cluster *workloadapi.Cluster
	// served hands accepted connections to the cluster's server.
	served *workloadapi.Listener
}

// EnsureFront makes a front listen, or returns the one of that name as it is.
func (e *Engine) EnsureFront(ctx context.Context, spec container.FrontSpec) (*container.Front, error) {
	if err := e.takeIn(ctx, spec.Labels); err != nil {
		return nil, errors.Wrapf(err, "front %s", spec.Name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.fronts[spec.Name]; ok {
		return e.describe(f), nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(e.address, strconv.Itoa(spec.Port)))
	if err != nil {
		// Taken (by another front, or by another process): any free port.
		l, err = net.Listen("tcp", net.JoinHostPort(e.address, "0"))
	}
	if err != nil {
		return nil, errors.Wrapf(err, "listening for front %s on %s", spec.Name, e.address)
	}
	spec.Labels, spec.Select = maps.Clone(spec.Labels), maps.Clone(spec.Select)
	f := &front{spec: spec, listener: l, served: workloadapi.NewListener(l.Addr())}
	e.fronts[spec.Name] = f
	go e.accept(f)
	return e.describe(f), nil
}

func (e *Engine) describe(f *front) *container.Front {
	addr, _ := f.listener.Addr().(*net.TCPAddr)
	return &container.Front{Name: f.spec.Name, Labels: maps.Clone(f.spec.Labels), Address: e.host, Port: addr.Port}
}

// accept hands each connection to the front's cluster while one of the containers it selects
// runs, and closes it otherwise, as a Service without endpoints refuses it.
func (e *Engine) accept(f *front) {
	for {
		conn, err := f.listener.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		cluster := f.cluster
		e.mu.Unlock()
		if cluster == nil || !e.selectsRunning(f.spec.Select) {
			_ = conn.Close()
			continue
		}
		routed, ok := cluster.Route(conn)
		if !ok {
			_ = conn.Close()
			continue
		}
		_ = f.served.Deliver(routed) // closed with the front: the connection too
	}
}

func (e *Engine) selectsRunning(selector map[string]string) bool {
	cs, err := e.ListContainers(context.Background(), selector)
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.Running {
			return true
		}
	}
	return false
}

// InspectFront returns a front; ErrNotFound when there is none of that name.
func (e *Engine) InspectFront(_ context.Context, name string) (*container.Front, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.fronts[name]
	if !ok {
		return nil, notFound("front", name)
	}
	return e.describe(f), nil
}

// RemoveFront stops a front and the cluster it served; one that is not there is not an error.
func (e *Engine) RemoveFront(_ context.Context, name string) error {
	f := e.dropFront(name)
	if f == nil {
		return nil
	}
	// The cluster behind it ends: its record is of an ended cluster from now on.
	e.ended(f.spec.Labels)
	return e.stopFront(f)
}

// dropFront takes a front out of the engine; nil when there is none of that name.
func (e *Engine) dropFront(name string) *front {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.fronts[name]
	delete(e.fronts, name)
	if !ok {
		return nil
	}
	return f
}

// stopFront stops a front's listener and the cluster it served.
func (e *Engine) stopFront(f *front) error {
	name := f.spec.Name
	_ = f.listener.Close()
	_ = f.served.Close()
	if f.cluster != nil {
		return errors.Wrapf(f.cluster.Close(), "stopping the API server of front %s", name)
	}
	return nil
}

// Close stops the engine's syncs, saving what changed since the last one (a manager that
// stops keeps its clusters as they are), then every front and the API servers behind them.
func (e *Engine) Close() error {
	if e.persist != nil {
		e.syncMu.Lock()
		select {
		case <-e.persist.stop:
		default:
			close(e.persist.stop)
			ctx, cancel := context.WithTimeout(context.Background(), 3*e.persist.interval)
			for group := range e.groups() {
				if err := e.save(ctx, group); err != nil && e.onSyncError != nil {
					e.onSyncError(err)
				}
			}
			cancel()
		}
		e.syncMu.Unlock()
	}
	e.mu.Lock()
	names := make([]string, 0, len(e.fronts))
	for name := range e.fronts {
		names = append(names, name)
	}
	e.mu.Unlock()
	for _, name := range names {
		// The clusters do not end with the engine: their records stay as saved.
		if f := e.dropFront(name); f != nil {
			if err := e.stopFront(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// FrontHosts is the engine's one host: fronts answer on Address, from anywhere that reaches it.
func (e *Engine) FrontHosts(context.Context) ([]string, error) { return []string{e.host}, nil }

// frontAt returns the front listening on an endpoint (host:port), nil when none is.
func (e *Engine) frontAt(endpoint string) *front {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || (host != e.address && host != e.host) {
		return nil
	}
	for _, f := range e.fronts {
		if addr, ok := f.listener.Addr().(*net.TCPAddr); ok && strconv.Itoa(addr.Port) == port {
			return f
		}
	}
	return nil
}
