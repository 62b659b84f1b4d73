package controllers

import (
	"context"
	"fmt"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"sigs.k8s.io/cluster-api/util"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// reconcileDelete deletes the pool's instances through their Machines (Cluster API drains them
// and deletes the DockyardMachines, whose reconciler removes the containers); an instance
// without a Machine is deleted directly. The finalizer goes when no instance is left. It works
// without the MachinePool and the Cluster.
func (r *DockyardMachinePoolReconciler) reconcileDelete(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	pool := s.pool
	if !controllerutil.ContainsFinalizer(pool, infrav1.MachinePoolFinalizer) {
		return ctrl.Result{}, nil
	}
	if deletedForMove(pool) {
		// Moved to another management cluster by clusterctl move: the instances move too.
		controllerutil.RemoveFinalizer(pool, infrav1.MachinePoolFinalizer)
		return ctrl.Result{}, nil
	}
	list := &infrav1.DockyardMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(pool.Namespace)); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, "listing the DockyardMachines of DockyardMachinePool %s", pool.Name)
	}
	left := 0
	for i := range list.Items {
		dm := &list.Items[i]
		if !util.IsOwnedByObject(dm, pool, infrav1.GroupVersion.WithKind("DockyardMachinePool").GroupKind()) {
			continue
		}
		left++
		if !dm.DeletionTimestamp.IsZero() {
			continue
		}
		machine, err := util.GetOwnerMachine(ctx, r.Client, dm.ObjectMeta)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, errors.Wrapf(err, "getting the Machine of DockyardMachine %s", dm.Name)
		}
		var obj client.Object = dm
		if machine != nil {
			if !machine.DeletionTimestamp.IsZero() {
				continue
			}
			obj = machine
		}
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, errors.Wrapf(err, "deleting %s %s of DockyardMachinePool %s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), pool.Name)
		}
		log.Info("Deleting an instance of the pool", "DockyardMachine", klog.KObj(dm), "deleted", fmt.Sprintf("%T %s", obj, obj.GetName()))
	}
	pool.Spec.ProviderIDList = nil
	pool.Status.Replicas = ptr.To(int32(left))
	if left > 0 {
		setCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.DeletingReason, fmt.Sprintf("Deleting %d instances through their Machines", left))
		return ctrl.Result{RequeueAfter: poolWait}, nil
	}
	log.Info("Deleted every instance of the pool")
	controllerutil.RemoveFinalizer(pool, infrav1.MachinePoolFinalizer)
	return ctrl.Result{}, nil
}
