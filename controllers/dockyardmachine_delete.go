package controllers

import (
	"context"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

// reconcileDelete stops the bootstrap, takes a control plane node out of the load balancer,
// then removes the container and its volumes. It works without the Machine, the Cluster or the
// container.
func (r *DockyardMachineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
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

	node, err := r.Nodes.FindNode(ctx, s.key, dm.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if node != nil && node.Running() {
		if err := node.StopBootstrap(ctx); err != nil {
			log.Info("Could not stop the bootstrap before deleting the node", "error", err.Error())
		}
		if node.Role == docker.RoleControlPlane {
			if s.cluster != nil {
				if s.dc, err = r.dockyardCluster(ctx, s.cluster); err != nil {
					return ctrl.Result{}, err
				}
			}
			if s.network, err = clusterNetwork(ctx, r.Nodes, s.dc, s.key); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.updateLoadBalancer(ctx, s); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.Nodes.DeleteNode(ctx, s.key, dm.Name); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, "deleting the node container of DockyardMachine %s", dm.Name)
	}
	if node != nil {
		log.Info("Deleted node container", "container", node.Name)
		r.Recorder.Eventf(dm, corev1.EventTypeNormal, "NodeDeleted", "Deleted node container %s and its volumes", node.Name)
	}
	controllerutil.RemoveFinalizer(dm, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}
