package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// The conditions of a DockyardMachine, what is reported of a node that stopped or vanished
// outside Dockyard, and the one patch that writes them.

// reportVanished reports a provisioned machine whose container was removed outside Dockyard.
func (r *DockyardMachineReconciler) reportVanished(ctx context.Context, s *machineScope) {
	name := strings.TrimPrefix(s.dm.Spec.ProviderID, infrav1.ProviderIDPrefix) // the container it was
	msg := fmt.Sprintf("Node container %s was removed outside Dockyard; it is not recreated. Delete the Machine (or let a MachineHealthCheck remediate it) to replace it", name)
	if conditions.GetReason(s.dm, infrav1.ContainerProvisionedCondition) != infrav1.ContainerNotFoundReason {
		ctrl.LoggerFrom(ctx).Info("Node container vanished", "container", name)
		r.Recorder.Event(s.dm, corev1.EventTypeWarning, infrav1.ContainerNotFoundReason, msg)
	}
	setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.ContainerNotFoundReason, "%s", msg)
}

// reportStopped reports a node container that stopped outside Dockyard.
func (r *DockyardMachineReconciler) reportStopped(ctx context.Context, s *machineScope) {
	node := s.node
	msg := fmt.Sprintf("Node container %s is %s (exit code %d); it is not restarted. Delete the Machine (or let a MachineHealthCheck remediate it) to replace it",
		node.Name, node.State, node.ExitCode)
	if conditions.GetReason(s.dm, infrav1.ContainerProvisionedCondition) != infrav1.ContainerStoppedReason {
		// Its console (systemd's shutdown output) is for the log, not for the condition.
		logs, err := node.Console(ctx, stoppedOutputTail)
		if err != nil {
			logs = fmt.Sprintf("(unavailable: %v)", err)
		}
		ctrl.LoggerFrom(ctx).Info("Node container stopped", "container", node.Name, "exitCode", node.ExitCode,
			"lastOutput", conditionMessage(bootstrap.Redact(logs)))
		r.Recorder.Eventf(s.dm, corev1.EventTypeWarning, infrav1.ContainerStoppedReason, "Node container %s is %s (exit code %d)", node.Name, node.State, node.ExitCode)
	}
	setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.ContainerStoppedReason, "%s", msg)
}

// setWaiting reports that the machine waits for something outside Dockyard. A bootstrap
// outcome already known stays: it is a fact about the node that no wait changes, and what keeps
// the node from being asked for it again.
func setWaiting(dm *infrav1.DockyardMachine, reason, msg string) {
	setContainerCondition(dm, metav1.ConditionFalse, reason, "%s", msg)
	if !conditions.IsTrue(dm, infrav1.BootstrapSucceededCondition) && !bootstrapFailedForGood(dm) {
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForContainerReason, "Waiting for the node container")
	}
}

func setContainerCondition(dm *infrav1.DockyardMachine, status metav1.ConditionStatus, reason, format string, args ...any) {
	setCondition(dm, infrav1.ContainerProvisionedCondition, status, reason, fmt.Sprintf(format, args...))
}

func setBootstrapCondition(dm *infrav1.DockyardMachine, status metav1.ConditionStatus, reason, format string, args ...any) {
	setCondition(dm, infrav1.BootstrapSucceededCondition, status, reason, fmt.Sprintf(format, args...))
}

// patchDockyardMachine summarizes the conditions into Ready and patches the object once.
func patchDockyardMachine(ctx context.Context, helper *patch.Helper, dm *infrav1.DockyardMachine) error {
	if dm.DeletionTimestamp.IsZero() {
		if err := setReadySummary(dm, infrav1.ContainerProvisionedCondition, infrav1.BootstrapSucceededCondition); err != nil {
			return err
		}
	} else if conditions.GetReason(dm, clusterv1.ReadyCondition) != infrav1.InfrastructureUnavailableReason {
		setCondition(dm, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "Deleting the node container")
	}
	ctx, cancel := patchContext(ctx)
	defer cancel()
	return helper.Patch(ctx, dm, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.ReadyCondition, infrav1.ContainerProvisionedCondition, infrav1.BootstrapSucceededCondition, clusterv1.PausedCondition,
	}})
}
