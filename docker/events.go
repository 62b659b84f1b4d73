package docker

import (
	"context"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// ResyncAction is the Action of the event EngineEvents sends after its stream broke (the engine
// restarted, or could not be reached): events were missed, so everything must be looked at.
const ResyncAction = "resync"

// EngineEvents watches the engine for what happens to Dockyard's containers (any carrying
// ClusterLabel) and to networks, and hands each event to every subscriber, so reconcilers learn
// of a killed load balancer or a stopped node in seconds instead of at their next resync.
// It runs as a manager runnable; after the stream breaks it subscribes again, backing off up to
// maxBackoff, and sends a ResyncAction event once it is back.
type EngineEvents struct {
	rt container.Runtime

	mu          sync.Mutex
	subscribers []chan container.Event
}

const (
	// subscriberBuffer events wait for a slow subscriber; more are dropped (logged), and the
	// reconcilers' periodic checks find what they missed.
	subscriberBuffer = 256
	minBackoff       = time.Second
	maxBackoff       = 30 * time.Second
)

// NewEngineEvents returns a watcher of the engine's events.
func NewEngineEvents(rt container.Runtime) *EngineEvents {
	return &EngineEvents{rt: rt}
}

// Subscribe returns a channel that receives every event from now on.
func (w *EngineEvents) Subscribe() <-chan container.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan container.Event, subscriberBuffer)
	w.subscribers = append(w.subscribers, ch)
	return ch
}

// NeedLeaderElection is true: the events feed the reconcilers, which run on the leader only.
func (w *EngineEvents) NeedLeaderElection() bool { return true }

// Start watches until ctx ends.
func (w *EngineEvents) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("engine-events")
	backoff, broken := minBackoff, false
	for ctx.Err() == nil {
		subscribed := time.Now()
		events, errs := w.rt.Events(ctx, map[string]string{ClusterLabel: ""})
		if broken {
			log.Info("Watching the engine's events again; looking at every cluster and machine")
			w.broadcast(ctx, container.Event{Action: ResyncAction})
		}
		for e := range events {
			w.broadcast(ctx, e)
		}
		err := <-errs
		if ctx.Err() != nil {
			return nil
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
	return nil
}

func (w *EngineEvents) broadcast(ctx context.Context, e container.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.subscribers {
		select {
		case ch <- e:
		default:
			ctrl.LoggerFrom(ctx).Info("A subscriber is behind on the engine's events; dropping one", "event", e.Action, "name", e.Name)
		}
	}
}
