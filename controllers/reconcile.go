package controllers

import (
	"context"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
)

// Every Dockyard reconciler starts the same way, in the order of Cluster API's provider
// contracts: read the object (gone: nothing to do), find its owner and Cluster (either may be
// missing: not yet, or gone while the object is deleted), then begin: record whether it is
// paused and stop while it is, add the finalizer once owner and Cluster are known (nothing was
// created before), and take a patch helper whose one deferred patch writes whatever the
// reconcile changes.

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

// begin records the Paused condition, adds the finalizer when owned (owner and Cluster known)
// and returns the patch helper; stop is true when the reconcile ends here (paused, or an
// object update that will trigger the next reconcile).
func begin(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, obj target, finalizer string, owned bool) (helper *patch.Helper, stop bool, err error) {
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, c, cluster, obj); err != nil || isPaused || requeue {
		return nil, true, err
	}
	if owned {
		if added, err := finalizers.EnsureFinalizer(ctx, c, obj, finalizer); err != nil || added {
			return nil, true, err
		}
	}
	helper, err = patch.NewHelper(obj, c)
	return helper, false, errors.Wrapf(err, "patch helper for %s", obj.GetName())
}
