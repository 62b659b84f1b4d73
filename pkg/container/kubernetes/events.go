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

// Events streams the start, death and removal of the Pods carrying the labels and the
// creation and removal of every network, from watches of the Pods and NetworkPolicies. A Pod
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
	pods := r.client.CoreV1().Pods(r.namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector("container", want)})
	if err != nil {
		return errors.Wrap(err, "listing Dockyard's Pods to watch them")
	}
	running := map[string]bool{}
	for i := range list.Items {
		running[list.Items[i].Name] = isRunning(&list.Items[i])
	}
	pw, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector("container", want), ResourceVersion: list.ResourceVersion})
	if err != nil {
		return errors.Wrap(err, "watching Dockyard's Pods")
	}
	defer pw.Stop()
	nps := r.client.NetworkingV1().NetworkPolicies(r.namespace)
	nlist, err := nps.List(ctx, metav1.ListOptions{LabelSelector: selector("network", nil)})
	if err != nil {
		return errors.Wrap(err, "listing Dockyard's networks to watch them")
	}
	nw, err := nps.Watch(ctx, metav1.ListOptions{LabelSelector: selector("network", nil), ResourceVersion: nlist.ResourceVersion})
	if err != nil {
		return errors.Wrap(err, "watching Dockyard's networks")
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
			if ev.Type == watch.Error {
				return errors.Errorf("watching Dockyard's Pods: %v", ev.Object)
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			labels := exactLabels(pod.Annotations)
			if !container.MatchLabels(labels, want) {
				continue
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
			for _, a := range actions {
				if !send(container.Event{Type: container.EventContainer, Action: a, Name: pod.Name, Labels: labels}) {
					return ctx.Err()
				}
			}
		case ev, ok := <-nw.ResultChan():
			if !ok {
				return errors.New("the infrastructure cluster closed the watch of Dockyard's networks")
			}
			np, isNP := ev.Object.(*networkingv1.NetworkPolicy)
			action := map[watch.EventType]string{watch.Added: "create", watch.Deleted: "destroy"}[ev.Type]
			if !isNP || action == "" {
				continue
			}
			if !send(container.Event{Type: container.EventNetwork, Action: action, Name: np.Name}) {
				return ctx.Err()
			}
		}
	}
}

func isRunning(pod *corev1.Pod) bool {
	st := mainStatus(pod)
	return pod.DeletionTimestamp == nil && st != nil && st.State.Running != nil
}
