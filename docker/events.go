package docker

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// EventKind says what an Event is about.
type EventKind string

// Event kinds.
const (
	// NodeEvent: a node container started, stopped, died or was removed.
	NodeEvent EventKind = "node"
	// LoadBalancerEvent: a load balancer container did.
	LoadBalancerEvent EventKind = "load-balancer"
	// NetworkEvent: a network changed (a container was connected or disconnected, or it went).
	NetworkEvent EventKind = "network"
	// ResyncEvent: the engine's event stream broke and is back; events were missed, so
	// everything must be looked at.
	ResyncEvent EventKind = "resync"
)

// Event is something that happened on the engine, in the node layer's words.
type Event struct {
	Kind EventKind
	// Cluster the node or load balancer belongs to; a management cluster's has no namespace.
	Cluster ClusterKey
	// Machine is a node's DockyardMachine.
	Machine string
	// Role of a node: control plane or worker.
	Role Role
	// Action is what the engine did, in Docker's words: "start", "die" (stopped, killed or
	// crashed), "destroy" (removed), "connect", "disconnect".
	Action string
}

// eventOf translates an engine event about Dockyard's containers or a network; ok is false for
// one the node layer does not know.
func eventOf(e container.Event) (Event, bool) {
	if e.Type == container.EventNetwork {
		return Event{Kind: NetworkEvent, Action: e.Action}, true
	}
	cluster, ok := parseKey(e.Labels[clusterLabel])
	if e.Type != container.EventContainer || !ok {
		return Event{}, false
	}
	role := Role(e.Labels[kindRoleLabel])
	if role == roleLoadBalancer {
		return Event{Kind: LoadBalancerEvent, Cluster: cluster, Role: role, Action: e.Action}, true
	}
	machine, ok := parseKey(e.Labels[machineLabel])
	if !ok {
		return Event{}, false
	}
	return Event{Kind: NodeEvent, Cluster: cluster, Machine: machine.Name, Role: role, Action: e.Action}, true
}

// parseKey splits a "<namespace>/<name>" label value; a management cluster's namespace is empty.
func parseKey(value string) (ClusterKey, bool) {
	ns, name, ok := strings.Cut(value, "/")
	return ClusterKey{Namespace: ns, Name: name}, ok && name != ""
}

// EngineEvents watches the engine for what happens to Dockyard's containers and to networks,
// and hands each event to every subscriber, so reconcilers learn of a killed load balancer or a
// stopped node in seconds instead of at their next resync. It runs as a manager runnable; after
// the stream breaks it subscribes again, backing off up to maxBackoff, and sends a ResyncEvent
// once it is back.
type EngineEvents struct {
	host *Manager
	// ctx is Start's, which engines added later are watched under; pending were added before.
	// stops ends the watch of an added engine (Remove).
	ctx     context.Context
	pending []*Manager
	stops   map[*Manager]context.CancelFunc

	mu          sync.Mutex
	subscribers []chan Event
}

const (
	// subscriberBuffer events wait for a slow subscriber; more are dropped (logged), and the
	// reconcilers' periodic checks find what they missed.
	subscriberBuffer = 256
	minBackoff       = time.Second
	maxBackoff       = 30 * time.Second
)

// NewEngineEvents returns a watcher of the events of a node layer's engine.
func NewEngineEvents(host *Manager) *EngineEvents {
	return &EngineEvents{host: host}
}

// Subscribe returns a channel that receives every event from now on.
func (w *EngineEvents) Subscribe() <-chan Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan Event, subscriberBuffer)
	w.subscribers = append(w.subscribers, ch)
	return ch
}

// NeedLeaderElection is true: the events feed the reconcilers, which run on the leader only.
func (w *EngineEvents) NeedLeaderElection() bool { return true }

// Start watches the engine, and every engine added (Add), until ctx ends.
func (w *EngineEvents) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	pending := w.pending
	w.pending = nil
	w.mu.Unlock()
	for _, m := range pending {
		w.Add(m)
	}
	w.watch(ctx, w.host.runtime)
	return nil
}

// Add watches the engine of one more node layer (a Kubernetes infrastructure a cluster runs
// on), from Start on, until Remove.
func (w *EngineEvents) Add(m *Manager) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil {
		w.pending = append(w.pending, m)
		return
	}
	if _, ok := w.stops[m]; ok {
		return
	}
	ctx, stop := context.WithCancel(w.ctx)
	if w.stops == nil {
		w.stops = map[*Manager]context.CancelFunc{}
	}
	w.stops[m] = stop
	go w.watch(ctx, m.runtime)
}

// Remove stops watching an engine Add added (no cluster runs on it any more); one that is not
// watched is not an error.
func (w *EngineEvents) Remove(m *Manager) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending = slices.DeleteFunc(w.pending, func(p *Manager) bool { return p == m })
	if stop, ok := w.stops[m]; ok {
		stop()
		delete(w.stops, m)
	}
}

// watch follows one engine's events until ctx ends, subscribing again after the stream breaks.
func (w *EngineEvents) watch(ctx context.Context, rt container.Runtime) {
	log := ctrl.LoggerFrom(ctx).WithName("engine-events")
	backoff, broken := minBackoff, false
	for ctx.Err() == nil {
		subscribed := time.Now()
		events, errs := rt.Events(ctx, map[string]string{clusterLabel: ""})
		if broken {
			log.Info("Watching the engine's events again; looking at every cluster and machine")
			w.broadcast(ctx, Event{Kind: ResyncEvent})
		}
		for e := range events {
			if ctx.Err() != nil {
				continue // removed (or stopping): what is left of the stream is not heard
			}
			if ev, ok := eventOf(e); ok {
				w.broadcast(ctx, ev)
			}
		}
		err := <-errs
		if ctx.Err() != nil {
			return
		}
		// A stream that lasted was a working engine that went away: try again soon. One that
		// broke at once is an engine still away: wait longer each time.
		if time.Since(subscribed) > maxBackoff {
			backoff = minBackoff
		} else {
			backoff = min(backoff*2, maxBackoff)
		}
		broken = true
		log.Info("The engine's event stream broke; subscribing again", "error", err.Error(), "after", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
}

func (w *EngineEvents) broadcast(ctx context.Context, e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.subscribers {
		select {
		case ch <- e:
		default:
			ctrl.LoggerFrom(ctx).Info("A subscriber is behind on the engine's events; dropping one", "kind", e.Kind, "action", e.Action, "cluster", e.Cluster.String(), "machine", e.Machine)
		}
	}
}
