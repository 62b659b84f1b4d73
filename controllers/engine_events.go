package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

// Engine events (docker.EngineEvents) wake the reconcilers up in seconds when something happens
// to a cluster's containers outside Dockyard: a killed load balancer is started again, a
// stopped node is reported for its MachineHealthCheck. Each reconciler maps an event to the
// objects it concerns, read from its cache (so only namespaces it watches) and filtered by its
// watch-filter label like its other watches; after the engine's stream broke, every object.

// engineEventSource is a source of reconcile requests from the engine's events.
func engineEventSource(events *docker.EngineEvents, toRequests func(context.Context, docker.Event) []reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		ch := events.Subscribe()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-ch:
					for _, req := range toRequests(ctx, e) {
						q.Add(req)
					}
				}
			}
		}()
		return nil
	})
}

// requestsFor lists objects and returns requests for those the watch filter selects.
func requestsFor(ctx context.Context, c client.Client, watchFilter string, list client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing objects for an engine event")
		return nil
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, o := range objs {
		obj, ok := o.(client.Object)
		if ok && (watchFilter == "" || labels.HasWatchLabel(obj, watchFilter)) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return out
}

// machineRequests maps an event to the DockyardMachine of a node container.
func (r *DockyardMachineReconciler) machineRequests(ctx context.Context, e docker.Event) []reconcile.Request {
	switch {
	case e.Kind == docker.ResyncEvent:
		return requestsFor(ctx, r.Client, r.WatchFilterValue, &infrav1.DockyardMachineList{})
	case e.Kind != docker.NodeEvent || e.Cluster.Namespace == "":
		return nil // not a workload cluster's node (a management cluster's has no namespace)
	}
	key := client.ObjectKey{Namespace: e.Cluster.Namespace, Name: e.Machine}
	dm := &infrav1.DockyardMachine{}
	if err := r.Client.Get(ctx, key, dm); err != nil {
		return nil // gone, or in a namespace this manager does not watch
	}
	if r.WatchFilterValue != "" && !labels.HasWatchLabel(dm, r.WatchFilterValue) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// clusterRequests maps an event to the DockyardClusters it concerns: a cluster's load balancer
// or control plane node (which the load balancer forwards to), or any cluster when a network
// went away.
func (r *DockyardClusterReconciler) clusterRequests(ctx context.Context, e docker.Event) []reconcile.Request {
	switch {
	case e.Kind == docker.ResyncEvent, e.Kind == docker.NetworkEvent:
		return requestsFor(ctx, r.Client, r.WatchFilterValue, &infrav1.DockyardClusterList{})
	case e.Cluster.Namespace == "", e.Kind == docker.NodeEvent && e.Role != docker.RoleControlPlane:
		return nil // a management cluster's, or a worker: the load balancer does not forward to it
	}
	return requestsFor(ctx, r.Client, r.WatchFilterValue, &infrav1.DockyardClusterList{},
		client.InNamespace(e.Cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: e.Cluster.Name})
}
