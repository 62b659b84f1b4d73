package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// The bootstrap phase of a DockyardMachine: its bootstrap data, translated once per reconcile,
// runs once in the node, in the background, and is followed until it ends.

// reconcileBootstrap starts the bootstrap data in the node and follows it; the next phase runs
// once it succeeded.
func (r *DockyardMachineReconciler) reconcileBootstrap(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	dm, node := s.dm, s.node
	if s.bootstrapData == nil {
		// The node is up and waits; the Machine's update wakes the reconciler when the data lands.
		if !util.IsControlPlaneMachine(s.machine) && !ptr.Deref(s.cluster.Status.Initialization.ControlPlaneInitialized, false) {
			setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForControlPlaneInitializedReason,
				"Node %s is up; waiting for the control plane to be initialized before the worker's bootstrap data can exist", node.Name)
		} else {
			setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForBootstrapDataReason,
				"Node %s is up; waiting for the bootstrap provider to write the Machine's bootstrap data", node.Name)
		}
		return ctrl.Result{}, false, nil
	}
	// The outcome, once known, is final: kubeadm never runs twice in a node, so the node is not
	// asked again.
	if conditions.IsTrue(dm, infrav1.BootstrapSucceededCondition) {
		return ctrl.Result{}, true, nil
	}
	if bootstrapFailedForGood(dm) {
		return ctrl.Result{}, false, nil
	}
	timeout := defaultBootstrapTimeout
	if dm.Spec.BootstrapTimeout != nil {
		timeout = dm.Spec.BootstrapTimeout.Duration
	}
	status, err := node.BootstrapStatus(ctx, timeout)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	switch status.Phase {
	case bootstrap.NotStarted:
		if left, held := holdBoot(dm, node.Name, node.StartedAt); held {
			return ctrl.Result{RequeueAfter: left}, false, nil
		}
		return r.startBootstrap(ctx, s, timeout)
	case bootstrap.Running:
		// The message names the step and when the run began, not the seconds since: a poll
		// that finds the same step then writes nothing (each write wakes Cluster API's Machine
		// controller; with the seconds in it, every node was written every bootstrapPoll).
		since := ""
		if !status.StartedAt.IsZero() {
			since = " since " + status.StartedAt.UTC().Format(time.TimeOnly+" MST")
		}
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootstrapRunningReason, "Running bootstrap step %d in node %s%s",
			status.Step, node.Name, since)
		return ctrl.Result{RequeueAfter: bootstrapPoll}, false, nil
	case bootstrap.Succeeded:
		if !conditions.IsTrue(dm, infrav1.BootstrapSucceededCondition) {
			note := ""
			if plan, err := r.bootstrapPlan(ctx, s); err == nil {
				note = ignoredNote(plan)
			}
			setBootstrapCondition(dm, metav1.ConditionTrue, infrav1.BootstrapSucceededReason, "")
			r.Recorder.Eventf(dm, corev1.EventTypeNormal, "BootstrapSucceeded", "Bootstrap data ran in node %s%s", node.Name, note)
		}
		return ctrl.Result{}, true, nil
	}
	r.reportBootstrapEnded(ctx, s, status, timeout)
	return ctrl.Result{}, false, nil
}

// startBootstrap translates the bootstrap data and starts it in the node; data that cannot be
// translated is reported and waits for a change.
func (r *DockyardMachineReconciler) startBootstrap(ctx context.Context, s *machineScope, timeout time.Duration) (ctrl.Result, bool, error) {
	dm, node := s.dm, s.node
	plan, err := r.bootstrapPlan(ctx, s)
	if err != nil {
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootstrapDataInvalidReason, "%v", err)
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, "BootstrapDataInvalid", "%v", err)
		// Nothing to retry until the data changes, which updates the Machine.
		return ctrl.Result{}, false, nil
	}
	if err := node.StartBootstrap(ctx, plan, timeout); err != nil {
		return ctrl.Result{}, false, err
	}
	setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootstrapRunningReason, "Running %d bootstrap steps in node %s%s",
		len(plan.Steps), node.Name, ignoredNote(plan))
	r.Recorder.Eventf(dm, corev1.EventTypeNormal, "BootstrapStarted", "Started the bootstrap data in node %s", node.Name)
	return ctrl.Result{RequeueAfter: bootstrapPoll}, false, nil
}

// reportBootstrapEnded reports a bootstrap that failed, timed out or was interrupted: kubeadm
// must not run twice in one node, so this is final for the node. A MachineHealthCheck (or the
// user) replaces the Machine.
func (r *DockyardMachineReconciler) reportBootstrapEnded(ctx context.Context, s *machineScope, status bootstrap.Status, timeout time.Duration) {
	dm := s.dm
	step := fmt.Sprintf("step %d", status.Step)
	if plan, err := r.bootstrapPlan(ctx, s); err == nil && status.Step >= 1 && status.Step <= len(plan.Steps) {
		step = fmt.Sprintf("step %d/%d (%s)", status.Step, len(plan.Steps), describeStep(plan.Steps[status.Step-1]))
	}
	var reason, msg string
	switch status.Phase {
	case bootstrap.TimedOut:
		reason = infrav1.BootstrapTimedOutReason
		msg = fmt.Sprintf("Bootstrap did not finish within %s; it was at %s", timeout, step)
	case bootstrap.Interrupted:
		reason = infrav1.BootstrapInterruptedReason
		msg = fmt.Sprintf("Bootstrap stopped at %s when the node restarted; it is not run again. Delete the Machine to replace it", step)
	default:
		reason = infrav1.BootstrapFailedReason
		msg = fmt.Sprintf("Bootstrap %s exited %d", step, status.ExitCode)
		if status.MissingSentinel != "" {
			msg = fmt.Sprintf("Bootstrap finished at %s without writing %s, Cluster API's sign that kubeadm succeeded", step, status.MissingSentinel)
		}
	}
	if status.Output != "" {
		msg += "; output:\n" + status.Output
	}
	if conditions.GetReason(dm, infrav1.BootstrapSucceededCondition) != reason {
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, reason, "%s", msg)
	}
	setBootstrapCondition(dm, metav1.ConditionFalse, reason, "%s", msg)
}

// finalBootstrapReasons end a node's bootstrap for good; a MachineHealthCheck (or the user)
// replaces the Machine.
var finalBootstrapReasons = sets.New(infrav1.BootstrapFailedReason, infrav1.BootstrapTimedOutReason, infrav1.BootstrapInterruptedReason)

// bootstrapFailedForGood reports whether the machine's bootstrap failed, timed out or was
// interrupted, which is final for its node.
func bootstrapFailedForGood(dm *infrav1.DockyardMachine) bool {
	return finalBootstrapReasons.Has(conditions.GetReason(dm, infrav1.BootstrapSucceededCondition))
}

// bootstrapPlan reads the Machine's bootstrap data secret and translates it for the node, once
// per reconcile.
func (r *DockyardMachineReconciler) bootstrapPlan(ctx context.Context, s *machineScope) (*bootstrap.Plan, error) {
	if s.plan == nil && s.planErr == nil {
		s.plan, s.planErr = r.readBootstrapPlan(ctx, s)
	}
	return s.plan, s.planErr
}

func (r *DockyardMachineReconciler) readBootstrapPlan(ctx context.Context, s *machineScope) (*bootstrap.Plan, error) {
	name, hostname := ptr.Deref(s.bootstrapData, ""), s.node.Hostname
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.dm.Namespace, Name: name}, secret); err != nil {
		return nil, errors.Wrapf(err, "reading bootstrap data secret %s", name)
	}
	value, ok := secret.Data["value"]
	if !ok {
		return nil, errors.Errorf("bootstrap data secret %s has no \"value\" key", name)
	}
	format := bootstrap.Format(secret.Data["format"])
	if format == "" {
		format = bootstrap.FormatCloudConfig
	}
	plan, err := bootstrap.Parse(format, value, bootstrap.Options{Hostname: hostname})
	if err != nil {
		return nil, errors.Wrapf(err, "translating the %s bootstrap data of secret %s", format, name)
	}
	return plan, nil
}

func describeStep(step bootstrap.Step) string {
	if step.File != nil {
		return "writing " + step.File.Path
	}
	cmd := bootstrap.Redact(step.Command.String())
	if len(cmd) > 200 {
		cmd = cmd[:200] + "..."
	}
	return cmd
}

func ignoredNote(plan *bootstrap.Plan) string {
	if len(plan.Ignored) == 0 {
		return ""
	}
	return "; ignored what a container cannot honour: " + strings.Join(plan.Ignored, ", ")
}
