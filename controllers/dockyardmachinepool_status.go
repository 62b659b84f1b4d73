package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// reconcileStatus publishes the instances: providerIDList (the provisioned instances' providerIDs,
// sorted, including those being drained, so Cluster API does not remove their Nodes early),
// replicas, readyReplicas, and provisioned. It owns the MachinesReady condition.
func (r *DockyardMachinePoolReconciler) reconcileStatus(s *poolScope) {
	pool := s.pool
	desired := int(ptr.Deref(s.mp.Spec.Replicas, 1))
	providerIDs := []string{}
	ready := 0
	var notReady []string
	for _, i := range s.instances {
		if ptr.Deref(i.dm.Status.Initialization.Provisioned, false) && i.dm.Spec.ProviderID != "" {
			providerIDs = append(providerIDs, i.dm.Spec.ProviderID)
		}
		if i.ready() {
			ready++
		} else if !i.deleting() {
			reason := conditions.GetReason(i.dm, clusterv1.ReadyCondition)
			if reason == "" {
				reason = "not reconciled yet"
			}
			notReady = append(notReady, fmt.Sprintf("%s (%s)", i.dm.Name, reason))
		}
	}
	sort.Strings(providerIDs)
	sort.Strings(notReady)
	pool.Spec.ProviderIDList = providerIDs
	pool.Status.Replicas = ptr.To(int32(len(s.instances)))
	pool.Status.ReadyReplicas = ptr.To(int32(ready))

	if len(notReady) > 0 {
		setPoolCondition(pool, infrav1.MachinesReadyCondition, metav1.ConditionFalse, infrav1.MachinesNotReadyReason,
			"Not Ready: %s", strings.Join(notReady, ", "))
	} else {
		setPoolCondition(pool, infrav1.MachinesReadyCondition, metav1.ConditionTrue, infrav1.MachinesReadyReason, "")
	}
	if !ptr.Deref(pool.Status.Initialization.Provisioned, false) && conditions.IsTrue(pool, infrav1.ScaledCondition) &&
		len(notReady) == 0 && len(providerIDs) == desired {
		pool.Status.Initialization.Provisioned = ptr.To(true)
	}
	pool.Status.Ready = ptr.To(ptr.Deref(pool.Status.Initialization.Provisioned, false))
}

// setPoolWaiting reports that the pool waits for something outside Dockyard.
func setPoolWaiting(pool *infrav1.DockyardMachinePool, reason, msg string) {
	setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, reason, "%s", msg)
}

func setPoolCondition(pool *infrav1.DockyardMachinePool, condType string, status metav1.ConditionStatus, reason, format string, args ...any) {
	setCondition(pool, condType, status, reason, fmt.Sprintf(format, args...))
}

// patchDockyardMachinePool summarizes the conditions into Ready and patches the object once.
func patchDockyardMachinePool(ctx context.Context, helper *patch.Helper, pool *infrav1.DockyardMachinePool) error {
	if pool.DeletionTimestamp.IsZero() {
		if err := setReadySummary(pool, infrav1.ScaledCondition, infrav1.UpToDateCondition, infrav1.MachinesReadyCondition); err != nil {
			return err
		}
	} else {
		setCondition(pool, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "Deleting the pool's instances")
	}
	ctx, cancel := patchContext(ctx)
	defer cancel()
	return helper.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.ReadyCondition, infrav1.ScaledCondition, infrav1.UpToDateCondition, infrav1.MachinesReadyCondition, clusterv1.PausedCondition,
	}})
}
