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
	faults, errs := infrav1.FaultsOf(dm.Annotations)
	if len(errs) > 0 {
		// The webhook refuses them; annotations written with it off change nothing.
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, "InvalidFault", "%v", errs.ToAggregate())
		return ctrl.Result{}, true, nil
	}
	for _, service := range infrav1.StoppableServices {
		stop, stopped := slices.Contains(faults.Stop, service), slices.Contains(dm.Status.Stopped, service)
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
	return r.reconcileNetworkDelay(ctx, s, faults.NetworkDelay)
}

// reconcileNetworkDelay sets the node's network delay the annotation asks for, or takes it away,
// when it differs from status.networkDelay.
func (r *DockyardMachineReconciler) reconcileNetworkDelay(ctx context.Context, s *machineScope, want time.Duration) (ctrl.Result, bool, error) {
	dm, node := s.dm, s.node
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

// holdBoot reports whether the boot-delay annotation still holds the bootstrap of a node that
// started at started, with the condition saying until when and the time left.
func holdBoot(dm *infrav1.DockyardMachine, node string, started time.Time) (time.Duration, bool) {
	faults, _ := infrav1.FaultsOf(dm.Annotations) // a delay that is no duration holds nothing
	delay := faults.BootDelay
	if delay == 0 || started.IsZero() {
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
