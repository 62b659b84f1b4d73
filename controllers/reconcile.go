package controllers

import (
	"context"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
)

// Every Dockyard reconciler starts the same way, in the order of Cluster API's provider
// contracts: read the object (gone: nothing to do), find its owner and Cluster (either may be
// missing: not yet, or gone while the object is deleted), then begin: stop while it is paused
// (recording the Paused condition), add the finalizer once owner and Cluster are known (written
// before anything is created, so nothing can outlive a deletion), and take a patch helper whose
// one deferred patch writes whatever the reconcile changes, the Paused=False condition
// included. A new object's first reconcile therefore writes twice (finalizer, then status) and
// goes straight on to its work, rather than spending a reconcile on each.

// target is what a Dockyard reconciler works on: an API object with conditions.
type target interface {
	client.Object
	conditions.Setter
}

// getTarget reads the object a request names; found is false when it is gone.
func getTarget(ctx context.Context, c client.Client, key client.ObjectKey, obj target) (found bool, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, errors.Wrapf(err, "getting %T %s", obj, key)
	}
	return true, nil
}

// begin stops a paused object's reconcile (stop is true) after recording Paused=True, adds
// the finalizer when owned (owner and Cluster known) and returns the patch helper, with
// Paused=False set on the object for the deferred patch to write.
func begin(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, obj target, finalizer string, owned bool) (helper *patch.Helper, stop bool, err error) {
	if annotations.HasPaused(obj) || (cluster != nil && ptr.Deref(cluster.Spec.Paused, false)) {
		_, _, err := paused.EnsurePausedCondition(ctx, c, cluster, obj)
		return nil, true, errors.Wrapf(err, "recording that %s is paused", obj.GetName())
	}
	if owned {
		if _, err := finalizers.EnsureFinalizer(ctx, c, obj, finalizer); err != nil {
			return nil, true, errors.Wrapf(err, "adding finalizer %s to %s", finalizer, obj.GetName())
		}
	}
	helper, err = patch.NewHelper(obj, c)
	if err != nil {
		return nil, true, errors.Wrapf(err, "patch helper for %s", obj.GetName())
	}
	// What paused.EnsurePausedCondition records for an object that is not paused, left to the
	// one deferred patch instead of a write and a reconcile of its own.
	conditions.Set(obj, metav1.Condition{
		Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason,
		ObservedGeneration: obj.GetGeneration(),
	})
	return helper, false, nil
}

// patchTimeout bounds the one deferred patch of a reconcile.
const patchTimeout = 30 * time.Second

// patchContext is the context of a reconcile's deferred patch: its own deadline, not the
// reconcile's, so a reconcile that ran into the manager's --reconcile-timeout (a node or the
// engine hung) still records what it found.
func patchContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), patchTimeout)
}
