package controllers

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
)

// Faults a user injects into a machine's node through its annotations (docs/api.md#faults):
// services kept stopped (infrav1.StopAnnotation), a slow boot (infrav1.BootDelayAnnotation) and
// added latency (infrav1.NetworkDelayAnnotation). They are
// the node's own commands, so every engine plays them; the in-memory engine plays them on its
// simulated cluster.

// reconcileFaults stops the services the stop annotation lists and starts again those it no
// longer lists, once the machine is provisioned and its Node known; status.stopped records
// what it stopped, so each change costs one command. A command that fails is an event and is
// tried again.
func (r *DockyardMachineReconciler) reconcileFaults(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	dm, node := s.dm, s.node
	want, err := stoppedServices(dm.Annotations[infrav1.StopAnnotation])
	if err != nil {
		// The webhook refuses it; an annotation written with it off changes nothing.
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, "InvalidFault", "%v", err)
		return ctrl.Result{}, true, nil
	}
	for _, service := range infrav1.StoppableServices {
		stop, stopped := slices.Contains(want, service), slices.Contains(dm.Status.Stopped, service)
		if stop == stopped {
			continue
		}
		cmd, verb := nodecmd.StartService(service), "started"
		if stop {
			cmd, verb = nodecmd.StopService(service), "stopped"
		}
		if out, err := node.Run(ctx, nil, cmd...); err != nil {
			r.Recorder.Eventf(dm, corev1.EventTypeWarning, "FaultFailed", "%s of node %s could not be %s: %v %s", service, node.Name, verb, err, out)
			return ctrl.Result{}, false, errors.Wrapf(err, "%s of node %s could not be %s", service, node.Name, verb)
		}
		if stop {
			dm.Status.Stopped = append(dm.Status.Stopped, service)
		} else {
			dm.Status.Stopped = slices.DeleteFunc(dm.Status.Stopped, func(s string) bool { return s == service })
		}
		ctrl.LoggerFrom(ctx).Info("Fault injected: service "+verb, "service", service, "node", node.Name)
		r.Recorder.Eventf(dm, corev1.EventTypeNormal, "Service"+strings.ToUpper(verb[:1])+verb[1:], "%s of node %s %s (%s)", service, node.Name, verb, infrav1.StopAnnotation)
	}
	if len(dm.Status.Stopped) == 0 {
		dm.Status.Stopped = nil
	}
	return r.reconcileNetworkDelay(ctx, s)
}

// reconcileNetworkDelay sets the node's network delay the annotation asks for, or takes it away,
// when it differs from status.networkDelay.
func (r *DockyardMachineReconciler) reconcileNetworkDelay(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	dm, node := s.dm, s.node
	want, err := durationAnnotation(dm.Annotations, infrav1.NetworkDelayAnnotation)
	if err != nil {
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, "InvalidFault", "%v", err)
		return ctrl.Result{}, true, nil
	}
	var set time.Duration
	if dm.Status.NetworkDelay != nil {
		set = dm.Status.NetworkDelay.Duration
	}
	if want == set {
		return ctrl.Result{}, true, nil
	}
	if out, err := node.Run(ctx, nil, nodecmd.SetNetworkDelay(want)...); err != nil {
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, "FaultFailed", "The network delay of node %s could not be set to %s: %v %s", node.Name, want, err, out)
		return ctrl.Result{}, false, errors.Wrapf(err, "setting the network delay of node %s to %s", node.Name, want)
	}
	dm.Status.NetworkDelay = nil
	if want > 0 {
		dm.Status.NetworkDelay = &metav1.Duration{Duration: want}
	}
	ctrl.LoggerFrom(ctx).Info("Fault injected: network delay", "delay", want.String(), "node", node.Name)
	delay := "without delay"
	if want > 0 {
		delay = "with a delay of " + want.String()
	}
	r.Recorder.Eventf(dm, corev1.EventTypeNormal, "NetworkDelaySet", "Node %s sends %s (%s)", node.Name, delay, infrav1.NetworkDelayAnnotation)
	return ctrl.Result{}, true, nil
}

// stoppedServices reads the stop annotation: services among infrav1.StoppableServices,
// comma-separated.
func stoppedServices(annotation string) ([]string, error) {
	var services []string
	for _, s := range strings.Split(annotation, ",") {
		s = strings.TrimSpace(s)
		if s == "" || slices.Contains(services, s) {
			continue
		}
		if !slices.Contains(infrav1.StoppableServices, s) {
			return nil, errors.Errorf("annotation %s names %q, which is none of %s", infrav1.StopAnnotation, s, strings.Join(infrav1.StoppableServices, ", "))
		}
		services = append(services, s)
	}
	return services, nil
}

// durationAnnotation reads an annotation holding a duration: zero when there is none.
func durationAnnotation(annotations map[string]string, key string) (time.Duration, error) {
	v, ok := annotations[key]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return 0, errors.Errorf("annotation %s is %q, not a duration such as 45s", key, v)
	}
	return d, nil
}

// holdBoot reports whether the boot-delay annotation still holds the bootstrap of a node that
// started at started, with the condition saying until when and the time left.
func holdBoot(dm *infrav1.DockyardMachine, node string, started time.Time) (time.Duration, bool) {
	delay, err := durationAnnotation(dm.Annotations, infrav1.BootDelayAnnotation)
	if err != nil || delay == 0 || started.IsZero() {
		return 0, false
	}
	until := started.Add(delay)
	left := time.Until(until)
	if left <= 0 {
		return 0, false
	}
	setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootDelayedReason, "Node %s holds its bootstrap until %s (%s)",
		node, until.UTC().Format(time.TimeOnly+" MST"), infrav1.BootDelayAnnotation)
	return left, true
}
