package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
)

// blockedRetry is how often a deletion that cannot reach its infrastructure tries again.
const blockedRetry = 10 * time.Second

// reconcileEngine records where the cluster's network and load balancer are made, before
// anything is: what a deletion then removes, and where. A kubeconfig Secret the nodes run on is
// marked first, so that it outlives them. The record is written at once, not with the
// reconcile's deferred patch: a manager stopped in between must not forget a network it made.
func (r *DockyardClusterReconciler) reconcileEngine(ctx context.Context, s *clusterScope) (ctrl.Result, bool, error) {
	where := r.Engines.Where(s.dc)
	if s.dc.Status.Engine == where {
		return ctrl.Result{}, true, nil
	}
	if err := infrastructure.MarkSecret(ctx, r.Client, s.dc); err != nil {
		setLoadBalancerCondition(s.dc, metav1.ConditionFalse, infrav1.InfrastructureUnavailableReason, "%v", err)
		return ctrl.Result{}, false, err
	}
	err := recordEngine(ctx, r.Client, s.dc, func(o client.Object) { o.(*infrav1.DockyardCluster).Status.Engine = where })
	return ctrl.Result{}, err == nil, err
}

// recordEngine writes where an object's nodes are made (set changes its status.engine) at once,
// on a copy, then on obj: the reconcile's one deferred patch, which compares obj with what it
// read, then writes the same value again and nothing else of it.
func recordEngine(ctx context.Context, c client.Client, obj client.Object, set func(client.Object)) error {
	written, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return errors.Errorf("%T cannot be copied", obj)
	}
	before, _ := written.DeepCopyObject().(client.Object)
	set(written)
	if err := c.Status().Patch(ctx, written, client.MergeFrom(before)); err != nil {
		return errors.Wrapf(err, "recording where %s's nodes run", obj.GetName())
	}
	set(obj)
	return nil
}

// abandoned reports whether a deletion may leave what Dockyard made where it cannot reach it.
func abandoned(objs ...client.Object) bool {
	for _, o := range objs {
		if o == nil || (o.GetNamespace() == "" && o.GetName() == "") {
			continue
		}
		if _, ok := o.GetAnnotations()[infrav1.AbandonAnnotation]; ok {
			return true
		}
	}
	return false
}

// reconcileDelete removes what Dockyard made for the cluster, once its machines removed their
// nodes: its containers, volumes, load balancer and the network it created. It always ends: a
// cluster for which nothing was made (status.engine empty) goes at once, whatever state its
// infrastructure is in; one whose infrastructure cannot be reached says so and how out of it
// (restore access, or abandon what is there with AbandonAnnotation).
func (r *DockyardClusterReconciler) reconcileDelete(ctx context.Context, dc *infrav1.DockyardCluster) (ctrl.Result, error) {
	name := clusterNameOf(dc.ObjectMeta)
	if name == "" || deletedForMove(dc) {
		// Never owned by a Cluster (nothing was created), or moved to another management
		// cluster by clusterctl move, whose Dockyard now owns the load balancer and network.
		controllerutil.RemoveFinalizer(dc, infrav1.ClusterFinalizer)
		return ctrl.Result{}, nil
	}
	key := docker.ClusterKey{Namespace: dc.Namespace, Name: name}
	// Node containers belong to DockyardMachines, which delete them (and leave the load
	// balancer) first; Cluster API deletes the machines before the infrastructure cluster.
	remaining, err := machinesWithNodes(ctx, r.Client, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if remaining > 0 {
		setCondition(dc, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason,
			fmt.Sprintf("Waiting for %d DockyardMachines of the cluster to be deleted", remaining))
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	if abandoned(dc) {
		r.Recorder.Eventf(dc, corev1.EventTypeWarning, "Abandoned", "Left what Dockyard made for cluster %s on %s (%s): remove it by hand", key, orDefault(dc.Status.Engine, "no engine"), infrav1.AbandonAnnotation)
		return r.deleted(ctx, dc)
	}
	nodes, err := r.Engines.For(ctx, dc)
	if err == nil {
		err = r.deleteOnEngine(ctx, nodes, dc, key)
	}
	switch {
	case err == nil:
		log := ctrl.LoggerFrom(ctx)
		log.Info("Deleted the load balancer and network of the cluster")
		r.Recorder.Eventf(dc, corev1.EventTypeNormal, "Deleted", "Deleted the load balancer and network of cluster %s", key)
		return r.deleted(ctx, dc)
	case dc.Status.Engine == "":
		// Nothing was made for it: the infrastructure it names cannot matter.
		return r.deleted(ctx, dc)
	}
	msg := fmt.Sprintf("Cannot delete what Dockyard made for the cluster on %s: %v. Restore access to it, or annotate the DockyardCluster with %s to leave what is there and end the deletion",
		dc.Status.Engine, err, infrav1.AbandonAnnotation)
	setCondition(dc, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnavailableReason, msg)
	r.Recorder.Event(dc, corev1.EventTypeWarning, infrav1.InfrastructureUnavailableReason, conditionMessage(msg))
	return ctrl.Result{RequeueAfter: blockedRetry}, nil
}

// deleteOnEngine removes the cluster's containers, volumes, load balancer and network.
func (r *DockyardClusterReconciler) deleteOnEngine(ctx context.Context, nodes *docker.Manager, dc *infrav1.DockyardCluster, key docker.ClusterKey) error {
	network, err := clusterNetwork(ctx, nodes, dc, key)
	if err != nil {
		return err
	}
	return errors.Wrapf(nodes.DeleteCluster(ctx, key, network), "deleting the containers, volumes and network of cluster %s", key)
}

// deleted lets the DockyardCluster go: its engine is forgotten (no longer watched) once no
// cluster runs there (its kubeconfig Secret goes once no other cluster names it:
// InfrastructureSecretReconciler).
func (r *DockyardClusterReconciler) deleted(_ context.Context, dc *infrav1.DockyardCluster) (ctrl.Result, error) {
	r.Engines.Release(dc)
	controllerutil.RemoveFinalizer(dc, infrav1.ClusterFinalizer)
	return ctrl.Result{}, nil
}
