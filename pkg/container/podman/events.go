package podman

import (
	"context"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

const (
	// networkPoll is how often an event stream lists the networks to notice removals made
	// outside this Runtime (Podman emits no network events).
	networkPoll = 5 * time.Second
	// networkGrace delays a network's destroy event, so the container events the engine
	// recorded before the removal (and streams with a lag) come out first.
	networkGrace = time.Second
)

// Events streams container starts, stops and removals (of containers carrying the labels)
// and network removals.
//
// Podman's compatible event stream reports a container's removal as "remove" (Docker:
// "destroy"); its "died" is already "die" there. It reports nothing about networks, so a
// network's removal is synthesized: at once (after networkGrace) when this Runtime removed
// it, and within networkPoll when it vanished otherwise (a network created and removed by
// someone else between two polls is not seen). Engine-side filters are not used: labels,
// types and actions are matched here.
func (r *Runtime) Events(ctx context.Context, labels map[string]string) (<-chan container.Event, <-chan error) {
	out, errs := make(chan container.Event), make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	removed, unsubscribe := r.removals.subscribe()
	res := r.compat.Events(ctx, client.EventsListOptions{})
	s := &eventStream{rt: r, labels: labels, out: out, pending: map[string]time.Time{}, lastAction: map[string]string{}}
	go func() {
		defer close(errs)
		defer close(out)
		defer unsubscribe()
		defer cancel()
		if err := s.run(ctx, res, removed); err != nil {
			errs <- err
		}
	}()
	return out, errs
}

// eventStream is one subscriber's state: the networks it knows, the network destroys it
// holds back, and each container's last action (Podman may report a death twice).
type eventStream struct {
	rt         *Runtime
	labels     map[string]string
	out        chan<- container.Event
	known      map[string]bool
	pending    map[string]time.Time
	lastAction map[string]string
}

func (s *eventStream) run(ctx context.Context, res client.EventsResult, removed <-chan string) error {
	known, err := s.rt.networkNames(ctx)
	if err != nil {
		return err
	}
	s.known = known
	poll := time.NewTicker(networkPoll)
	defer poll.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-res.Messages:
			err = s.container(ctx, m)
		case e := <-res.Err:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.Wrap(e, "watching the Podman engine's events")
		case name := <-removed:
			s.hold(name)
		case <-poll.C:
			s.pollNetworks(ctx)
		case <-due.C:
			err = s.flush(ctx)
		}
		if err != nil {
			return err
		}
		due.Reset(s.nextDue())
	}
}

// container forwards a container start, death or removal of a container with the labels.
func (s *eventStream) container(ctx context.Context, m events.Message) error {
	if m.Type != events.ContainerEventType {
		return nil
	}
	action := string(m.Action)
	switch action {
	case "start", "die":
	case "died": // older Podman's compatible stream passes libpod's word through
		action = "die"
	case "remove", "destroy":
		action = "destroy"
	default:
		return nil
	}
	name := m.Actor.Attributes["name"]
	if !container.MatchLabels(m.Actor.Attributes, s.labels) || s.lastAction[name] == action {
		return nil
	}
	s.lastAction[name] = action
	if action == "destroy" {
		delete(s.lastAction, name)
	}
	return s.send(ctx, container.Event{Type: container.EventContainer, Action: action, Name: name, Labels: m.Actor.Attributes})
}

// hold schedules a network's destroy event networkGrace from now.
func (s *eventStream) hold(name string) {
	delete(s.known, name)
	if _, ok := s.pending[name]; !ok {
		s.pending[name] = time.Now().Add(networkGrace)
	}
}

// pollNetworks holds a destroy event for each known network that is gone. A failed listing
// is skipped: the container stream reports a broken engine.
func (s *eventStream) pollNetworks(ctx context.Context) {
	now, err := s.rt.networkNames(ctx)
	if err != nil {
		return
	}
	for name := range s.known {
		if !now[name] {
			s.hold(name)
		}
	}
	s.known = now
}

// flush sends the held network events that are due.
func (s *eventStream) flush(ctx context.Context) error {
	for name, at := range s.pending {
		if time.Now().Before(at) {
			continue
		}
		delete(s.pending, name)
		if err := s.send(ctx, container.Event{Type: container.EventNetwork, Action: "destroy", Name: name}); err != nil {
			return err
		}
	}
	return nil
}

func (s *eventStream) nextDue() time.Duration {
	next := time.Hour
	for _, at := range s.pending {
		next = min(next, max(time.Until(at), time.Millisecond))
	}
	return next
}

func (s *eventStream) send(ctx context.Context, e container.Event) error {
	select {
	case s.out <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// networkNames returns the names of the engine's networks.
func (r *Runtime) networkNames(ctx context.Context) (map[string]bool, error) {
	res, err := r.compat.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, errors.Wrap(err, "listing networks")
	}
	names := make(map[string]bool, len(res.Items))
	for _, n := range res.Items {
		names[n.Name] = true
	}
	return names, nil
}

// broker fans the names of removed networks out to the Runtime's event streams.
type broker struct {
	mu   sync.Mutex
	subs map[chan string]struct{}
}

func newBroker() *broker { return &broker{subs: map[chan string]struct{}{}} }

func (b *broker) subscribe() (<-chan string, func()) {
	ch := make(chan string, 64)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	}
}

// publish never blocks: a stream too far behind misses the event until its next poll.
func (b *broker) publish(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- name:
		default:
		}
	}
}
