package kubernetes

import (
	"context"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Events streams the start, death and removal of the owner's Pods carrying the labels and the
// creation and removal of every network of the owner's, from watches of the Pods and
// NetworkPolicies (the owner's only: objects of an earlier release not yet adopted are not
// seen until they are, by a read). A Pod
// is seen starting when its container runs, dying when it stops running (or is deleted while
// it ran), destroyed when it is gone.
func (r *Runtime) Events(ctx context.Context, want map[string]string) (<-chan container.Event, <-chan error) {
	events, errs := make(chan container.Event, 64), make(chan error, 1)
	go func() {
		defer close(events)
		defer close(errs)
		errs <- r.watch(ctx, want, events)
	}()
	return events, errs
}

func (r *Runtime) watch(ctx context.Context, want map[string]string, events chan<- container.Event) error {
	pw, running, err := r.watchPods(ctx, want)
	if err != nil {
		return err
	}
	defer pw.Stop()
	nw, err := r.watchNetworks(ctx)
	if err != nil {
		return err
	}
	defer nw.Stop()
	send := func(e container.Event) bool {
		select {
		case events <- e:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-pw.ResultChan():
			if !ok {
				return errors.New("the infrastructure cluster closed the watch of Dockyard's Pods")
			}
			seen, err := r.podEvents(ev, want, running)
			if err != nil {
				return err
			}
			for _, e := range seen {
				if !send(e) {
					return ctx.Err()
				}
			}
		case ev, ok := <-nw.ResultChan():
			if !ok {
				return errors.New("the infrastructure cluster closed the watch of Dockyard's networks")
			}
			if e, ok := r.networkEvent(ev); ok && !send(e) {
				return ctx.Err()
			}
		}
	}
}

// watchPods lists the Pods carrying the labels, to know which run, and watches them from
// there.
func (r *Runtime) watchPods(ctx context.Context, want map[string]string) (watch.Interface, map[string]bool, error) {
	// Lists are calls (bounded); watches last as long as ctx.
	sel := r.ownSelector("container", want)
	list, err := r.client.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, nil, errors.Wrap(err, "listing Dockyard's Pods to watch them")
	}
	running := map[string]bool{}
	for i := range list.Items {
		if r.mine(&list.Items[i]) {
			running[list.Items[i].Name] = isRunning(&list.Items[i])
		}
	}
	pw, err := r.watches.CoreV1().Pods(r.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, nil, errors.Wrap(err, "watching Dockyard's Pods")
	}
	return pw, running, nil
}

// watchNetworks lists the NetworkPolicies of Dockyard's networks and watches them from there.
func (r *Runtime) watchNetworks(ctx context.Context) (watch.Interface, error) {
	sel := r.ownSelector("network", nil)
	nlist, err := r.client.NetworkingV1().NetworkPolicies(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's networks to watch them")
	}
	nw, err := r.watches.NetworkingV1().NetworkPolicies(r.namespace).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: nlist.ResourceVersion})
	if err != nil {
		return nil, errors.Wrap(err, "watching Dockyard's networks")
	}
	return nw, nil
}

// podEvents returns the container events a change of an owner's Pod carrying the labels means,
// in order, and records in running whether it runs; an error event of the watch is an error.
func (r *Runtime) podEvents(ev watch.Event, want map[string]string, running map[string]bool) ([]container.Event, error) {
	if ev.Type == watch.Error {
		return nil, errors.Errorf("watching Dockyard's Pods: %v", ev.Object)
	}
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok || !r.mine(pod) {
		return nil, nil
	}
	labels := labelsOf(pod)
	if !container.MatchLabels(labels, want) {
		return nil, nil
	}
	was, now := running[pod.Name], isRunning(pod) && ev.Type != watch.Deleted
	var actions []string
	switch {
	case now && !was:
		actions = append(actions, "start")
	case was && !now:
		actions = append(actions, "die")
	}
	if ev.Type == watch.Deleted {
		actions = append(actions, "destroy")
		delete(running, pod.Name)
	} else {
		running[pod.Name] = now
	}
	var seen []container.Event
	for _, a := range actions {
		seen = append(seen, container.Event{Type: container.EventContainer, Action: a, Name: pod.Name, Labels: labels})
	}
	return seen, nil
}

// networkEvent returns the network event an owner's NetworkPolicy's creation or removal means;
// false for any other change.
func (r *Runtime) networkEvent(ev watch.Event) (container.Event, bool) {
	np, isNP := ev.Object.(*networkingv1.NetworkPolicy)
	action := map[watch.EventType]string{watch.Added: "create", watch.Deleted: "destroy"}[ev.Type]
	if !isNP || action == "" || !r.mine(np) {
		return container.Event{}, false
	}
	return container.Event{Type: container.EventNetwork, Action: action, Name: np.Name}, true
}

func isRunning(pod *corev1.Pod) bool {
	st := mainStatus(pod)
	return pod.DeletionTimestamp == nil && st != nil && st.State.Running != nil
}
