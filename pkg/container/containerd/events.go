package containerd

import (
	"context"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/typeurl/v2"
	"github.com/pkg/errors"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Events come from containerd's event service: a task's start is "start", the exit of its
// main process "die", a container's deletion "destroy". Networks are the runtime's own, so
// RemoveNetwork publishes "network destroy" on the same service (topic networkDestroyTopic),
// which reaches the subscribers of every process using the daemon.

const networkDestroyTopic = "/dockyard/network/destroy"

func (r *Runtime) publishNetworkDestroy(ctx context.Context, name string) error {
	err := r.client.EventService().Publish(ns(ctx), networkDestroyTopic, wrapperspb.String(name))
	return errors.Wrapf(err, "publishing the removal of network %s", name)
}

// Events streams what happens to containers carrying the labels and to networks. A deleted
// container's labels are no longer in containerd, so the stream remembers the labels of the
// containers it has seen (all of them when it starts, and each as it is created).
func (r *Runtime) Events(ctx context.Context, labels map[string]string) (<-chan container.Event, <-chan error) {
	out, errs := make(chan container.Event), make(chan error, 1)
	ctx = ns(ctx)
	msgs, streamErrs := r.client.EventService().Subscribe(ctx,
		`namespace=="`+Namespace+`",topic=="/tasks/start"`,
		`namespace=="`+Namespace+`",topic=="/tasks/exit"`,
		`namespace=="`+Namespace+`",topic=="/containers/create"`,
		`namespace=="`+Namespace+`",topic=="/containers/delete"`,
		`namespace=="`+Namespace+`",topic=="`+networkDestroyTopic+`"`,
	)
	known := map[string]map[string]string{}
	if cs, err := r.client.Containers(ctx); err == nil {
		for _, c := range cs {
			if l, err := c.Labels(ctx); err == nil {
				known[c.ID()] = l
			}
		}
	}
	go func() {
		defer close(errs)
		defer close(out)
		for {
			select {
			case env := <-msgs:
				e, ok := r.translate(ctx, env, known)
				if !ok || (e.Type == container.EventContainer && !container.MatchLabels(e.Labels, labels)) {
					continue
				}
				select {
				case out <- e:
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			case err := <-streamErrs:
				if err == nil {
					err = ctx.Err()
				}
				errs <- wrap(err, "watching containerd's events")
				return
			case <-ctx.Done():
				errs <- ctx.Err()
				return
			}
		}
	}()
	return out, errs
}

// translate turns a containerd event into Dockyard's words; false for events to skip.
func (r *Runtime) translate(ctx context.Context, env *events.Envelope, known map[string]map[string]string) (container.Event, bool) {
	if env == nil || env.Event == nil {
		return container.Event{}, false
	}
	v, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		return container.Event{}, false
	}
	labelsOf := func(id string) map[string]string {
		if c, err := r.client.LoadContainer(ctx, id); err == nil {
			if l, err := c.Labels(ctx); err == nil {
				known[id] = l
			}
		}
		return known[id]
	}
	switch ev := v.(type) {
	case *apievents.ContainerCreate:
		labelsOf(ev.ID)
		return container.Event{}, false
	case *apievents.TaskStart:
		return container.Event{Type: container.EventContainer, Action: "start", Name: ev.ContainerID, Labels: labelsOf(ev.ContainerID)}, true
	case *apievents.TaskExit:
		if ev.ID != "" && ev.ID != ev.ContainerID {
			return container.Event{}, false // an exec process
		}
		return container.Event{Type: container.EventContainer, Action: "die", Name: ev.ContainerID, Labels: labelsOf(ev.ContainerID)}, true
	case *apievents.ContainerDelete:
		l, ok := known[ev.ID]
		delete(known, ev.ID)
		return container.Event{Type: container.EventContainer, Action: "destroy", Name: ev.ID, Labels: l}, ok
	case *wrapperspb.StringValue:
		return container.Event{Type: container.EventNetwork, Action: "destroy", Name: ev.Value}, true
	}
	return container.Event{}, false
}
