package controllers

import (
	"context"
	"fmt"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

// reconcileDelete takes a control plane node out of the load balancer, then removes the node's
// container and its volumes (the node layer stops its bootstrap first). It works without the
// Machine, the Cluster or the container, and always ends: a machine for which no node was made
// (status.engine empty) goes at once, whatever state its infrastructure is in; one whose
// infrastructure cannot be reached says so and how out of it (restore access, or abandon what
// is there with AbandonAnnotation on it or its DockyardCluster).
func (r *DockyardMachineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	dm := s.dm
	if !controllerutil.ContainsFinalizer(dm, infrav1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	if s.key.Name == "" || deletedForMove(dm) {
		// Never part of a cluster (no container was created), or moved to another management
		// cluster by clusterctl move, whose Dockyard now owns the container.
		controllerutil.RemoveFinalizer(dm, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}
	var err error
	if s.dc, err = r.clusterInfrastructure(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if abandoned(dm, s.dc) {
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, "Abandoned", "Left the node of DockyardMachine %s on %s (%s): remove it by hand", dm.Name, orDefault(dm.Status.Engine, "no engine"), infrav1.AbandonAnnotation)
		controllerutil.RemoveFinalizer(dm, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}
	err = r.deleteNode(ctx, s)
	if err != nil && dm.Status.Engine != "" {
		msg := fmt.Sprintf("Cannot delete the node of the machine on %s: %v. Restore access to it, or annotate the DockyardMachine (or its DockyardCluster) with %s to leave it there and end the deletion",
			dm.Status.Engine, err, infrav1.AbandonAnnotation)
		setCondition(dm, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnavailableReason, msg)
		r.Recorder.Event(dm, corev1.EventTypeWarning, infrav1.InfrastructureUnavailableReason, conditionMessage(msg))
		return ctrl.Result{RequeueAfter: blockedRetry}, nil
	}
	// Deleted, or no node was made for it: the infrastructure it names cannot matter then.
	controllerutil.RemoveFinalizer(dm, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

// deleteNode removes the machine's node from the engine its cluster's nodes run on, a control
// plane node from the load balancer first.
func (r *DockyardMachineReconciler) deleteNode(ctx context.Context, s *machineScope) error {
	dm := s.dm
	var err error
	// The engine the cluster's nodes run on, chosen once for the whole reconcile.
	if s.nodes, err = r.Engines.For(ctx, s.dc); err != nil {
		return err
	}
	node, err := s.nodes.FindNode(ctx, s.key, dm.Name)
	if err != nil {
		return err
	}
	if node != nil && node.Running && node.Role == docker.RoleControlPlane {
		if s.network, err = clusterNetwork(ctx, s.nodes, s.dc, s.key); err != nil {
			return err
		}
		if err := r.updateLoadBalancer(ctx, s); err != nil {
			return err
		}
	}
	if err := s.nodes.DeleteNode(ctx, s.key, dm.Name); err != nil {
		return errors.Wrapf(err, "deleting the node container of DockyardMachine %s", dm.Name)
	}
	if node != nil {
		ctrl.LoggerFrom(ctx).Info("Deleted node container", "container", node.Name)
		r.Recorder.Eventf(dm, corev1.EventTypeNormal, "NodeDeleted", "Deleted node container %s and its volumes", node.Name)
	}
	return nil
}

// clusterInfrastructure returns the DockyardCluster of a machine's cluster, found by the Cluster's
// infrastructureRef, or by the cluster-name label when the Cluster is gone; nil when there is
// none (a cluster whose infrastructure is another kind, or gone: its nodes are then looked for on
// the manager's engine).
func (r *DockyardMachineReconciler) clusterInfrastructure(ctx context.Context, s *machineScope) (*infrav1.DockyardCluster, error) {
	if s.cluster != nil {
		return r.dockyardCluster(ctx, s.cluster)
	}
	list := &infrav1.DockyardClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: s.key.Name}); err != nil {
		return nil, errors.Wrapf(err, "listing the DockyardClusters of cluster %s", s.key)
	}
	if len(list.Items) != 1 {
		return nil, nil
	}
	return &list.Items[0], nil
}
