package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// poolWait is how often a pool looks again while it waits for something that sends no event
// it watches (an instance's Machine to appear).
const poolWait = 5 * time.Second

// DockyardMachinePoolReconciler reconciles DockyardMachinePools: it keeps one DockyardMachine per
// replica of the owner MachinePool. Cluster API's MachinePool controller makes a Machine for each
// (MachinePool Machines), and the DockyardMachine reconciler runs its node container with the
// MachinePool's bootstrap data. Instances are only ever removed by deleting their Machine, so
// Cluster API drains the Node first.
//
// Scale-down order (and the order outdated instances go in during a rollout):
//  1. instances whose Machine has the cluster.x-k8s.io/delete-machine annotation;
//  2. instances that are not Ready (still provisioning, or failed);
//  3. Ready instances, newest first (by creation time, then name).
//
// Outdated instances (made from another template or version) are replaced one at a time: one
// new instance beyond spec.replicas is created, and an outdated one deleted once every new one
// is Ready and the pool keeps spec.replicas Ready instances without it.
type DockyardMachinePoolReconciler struct {
	Client           client.Client
	Recorder         record.EventRecorder
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachinepools;dockyardmachinepools/status;dockyardmachinepools/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachines,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools;machinepools/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;delete

// SetupWithManager registers the reconciler: it watches DockyardMachinePools, their MachinePools
// (replicas, version, bootstrap data), their DockyardMachines and those instances' Machines
// (delete annotation, deletion), and Clusters (pause, infrastructure provisioned).
func (r *DockyardMachinePoolReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "dockyardmachinepool")
	clusterToPools, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.DockyardMachinePoolList{}, mgr.GetScheme())
	if err != nil {
		return errors.Wrap(err, "mapping Clusters to DockyardMachinePools")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.DockyardMachinePool{}).
		Named("dockyardmachinepool").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.MachinePool{},
			handler.EnqueueRequestsFromMapFunc(util.MachinePoolToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("DockyardMachinePool"))),
		).
		Watches(&infrav1.DockyardMachine{}, handler.EnqueueRequestsFromMapFunc(instanceToPool)).
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.machineToPool)).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(clusterToPools),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log)),
		).
		Complete(r)
}

// poolScope is what one reconcile of a DockyardMachinePool works with.
type poolScope struct {
	pool    *infrav1.DockyardMachinePool
	mp      *clusterv1.MachinePool
	cluster *clusterv1.Cluster
	// instances are the pool's DockyardMachines with their Machines (nil until Cluster API
	// made it).
	instances []poolInstance
	hash      string
}

// poolInstance is one DockyardMachine of a pool.
type poolInstance struct {
	dm      *infrav1.DockyardMachine
	machine *clusterv1.Machine
	// machineGone: the DockyardMachine names a Machine that no longer exists.
	machineGone bool
	// remediated: this reconcile deleted its Machine for a MachineHealthCheck.
	remediated bool
}

func (i poolInstance) deleting() bool {
	return !i.dm.DeletionTimestamp.IsZero() || i.machineGone || i.remediated || (i.machine != nil && !i.machine.DeletionTimestamp.IsZero())
}

func (i poolInstance) ready() bool {
	return ptr.Deref(i.dm.Status.Initialization.Provisioned, false) && conditions.IsTrue(i.dm, clusterv1.ReadyCondition)
}

func (i poolInstance) markedForDeletion() bool {
	if i.machine == nil {
		return false
	}
	_, ok := i.machine.Annotations[clusterv1.DeleteMachineAnnotation]
	return ok
}

// Reconcile follows the InfraMachinePool contract: owner MachinePool, Cluster, pause, finalizer,
// infrastructure and bootstrap data, then the named phases (replicas, status); one deferred
// patch writes it all.
func (r *DockyardMachinePoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	log := ctrl.LoggerFrom(ctx)

	pool := &infrav1.DockyardMachinePool{}
	if found, err := getTarget(ctx, r.Client, req.NamespacedName, pool); !found || err != nil {
		return ctrl.Result{}, err
	}

	// The owner MachinePool and the Cluster; either may be missing (not yet, or gone while the
	// pool is deleted).
	mp, err := util.GetOwnerMachinePool(ctx, r.Client, pool.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, errors.Wrapf(err, "getting the owner MachinePool of DockyardMachinePool %s", req.NamespacedName)
	}
	if mp != nil {
		log = log.WithValues("MachinePool", klog.KObj(mp))
	}
	clusterName := pool.Labels[clusterv1.ClusterNameLabel]
	if mp != nil {
		clusterName = mp.Spec.ClusterName
	}
	cluster, err := clusterByName(ctx, r.Client, pool.Namespace, clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if clusterName != "" {
		log = log.WithValues("Cluster", klog.KRef(pool.Namespace, clusterName))
	}
	ctx = ctrl.LoggerInto(ctx, log)

	helper, stop, err := begin(ctx, r.Client, cluster, pool, infrav1.MachinePoolFinalizer, mp != nil && cluster != nil)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := patchDockyardMachinePool(ctx, helper, pool); err != nil {
			rerr = kerrors.NewAggregate([]error{rerr, err})
		}
	}()

	s := &poolScope{pool: pool, mp: mp, cluster: cluster}
	if !pool.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}

	// No owner MachinePool yet: the MachinePool controller sets it.
	if mp == nil {
		setPoolWaiting(pool, infrav1.WaitingForOwnerMachinePoolReason, "Waiting for the MachinePool controller to set an owner reference")
		return ctrl.Result{}, nil
	}
	// The Cluster must exist.
	if cluster == nil {
		setPoolWaiting(pool, infrav1.WaitingForClusterReason, fmt.Sprintf("Waiting for Cluster %s to exist", clusterName))
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

func (r *DockyardMachinePoolReconciler) reconcileNormal(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	pool, mp, cluster := s.pool, s.mp, s.cluster

	// Instances are DockyardMachines: Cluster API makes a Machine for each.
	pool.Status.InfrastructureMachineKind = infrav1.InfrastructureMachineKindDockyardMachine

	// The cluster's infrastructure (network, load balancer) must be ready.
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setPoolWaiting(pool, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("Waiting for the infrastructure of Cluster %s to be provisioned", cluster.Name))
		return ctrl.Result{}, nil
	}
	// The instances join with the MachinePool's bootstrap data: a kubeadm worker pool gets it
	// once the control plane is initialized.
	if mp.Spec.Template.Spec.Bootstrap.DataSecretName == nil {
		setPoolWaiting(pool, infrav1.WaitingForBootstrapDataReason,
			"Waiting for the bootstrap provider to write the MachinePool's bootstrap data")
		return ctrl.Result{}, nil
	}

	hash, err := templateHash(pool, mp)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.hash = hash
	if err := r.listInstances(ctx, s); err != nil {
		return ctrl.Result{}, err
	}

	// Remediation first, so reconcileReplicas replaces what it deleted. Then the phases, each
	// owning one condition: Scaled and UpToDate, then MachinesReady.
	if err := r.remediateUnhealthy(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.reconcileReplicas(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.reconcileStatus(s)
	return result, nil
}

// listInstances fills the scope with the pool's DockyardMachines (labelled with the cluster and
// the MachinePool, owned by the pool) and their Machines.
func (r *DockyardMachinePoolReconciler) listInstances(ctx context.Context, s *poolScope) error {
	list := &infrav1.DockyardMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.pool.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel:     s.cluster.Name,
		clusterv1.MachinePoolNameLabel: format.MustFormatValue(s.mp.Name),
	}); err != nil {
		return errors.Wrapf(err, "listing the DockyardMachines of DockyardMachinePool %s", s.pool.Name)
	}
	s.instances = nil
	for i := range list.Items {
		dm := &list.Items[i]
		if !util.IsOwnedByObject(dm, s.pool, infrav1.GroupVersion.WithKind("DockyardMachinePool").GroupKind()) {
			continue
		}
		machine, err := util.GetOwnerMachine(ctx, r.Client, dm.ObjectMeta)
		gone := apierrors.IsNotFound(err)
		if err != nil && !gone {
			return errors.Wrapf(err, "getting the Machine of DockyardMachine %s", dm.Name)
		}
		s.instances = append(s.instances, poolInstance{dm: dm, machine: machine, machineGone: gone})
	}
	return nil
}

// instanceToPool maps a DockyardMachine to the DockyardMachinePool owning it.
func instanceToPool(_ context.Context, o client.Object) []ctrl.Request {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == "DockyardMachinePool" && strings.HasPrefix(ref.APIVersion, infrav1.GroupVersion.Group+"/") {
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
		}
	}
	return nil
}

// machineToPool maps a MachinePool Machine to the DockyardMachinePool owning its DockyardMachine.
func (r *DockyardMachinePoolReconciler) machineToPool(ctx context.Context, o client.Object) []ctrl.Request {
	m, ok := o.(*clusterv1.Machine)
	if !ok || m.Labels[clusterv1.MachinePoolNameLabel] == "" || m.Spec.InfrastructureRef.Kind != "DockyardMachine" {
		return nil
	}
	dm := &infrav1.DockyardMachine{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}, dm); err != nil {
		return nil
	}
	return instanceToPool(ctx, dm)
}
