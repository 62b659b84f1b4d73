package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/labels/format"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
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
			handler.EnqueueRequestsFromMapFunc(r.clusterToPools),
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
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, errors.Wrapf(err, "getting DockyardMachinePool %s", req.NamespacedName)
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

	// Paused: by the Cluster or by the object's own annotation.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, pool); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}

	// The finalizer, once the owner and the cluster are known.
	if mp != nil && cluster != nil {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, pool, infrav1.MachinePoolFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(pool, r.Client)
	if err != nil {
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

// reconcileReplicas creates and deletes instances until the pool has the MachinePool's number of
// up-to-date ones, replacing outdated ones one at a time. It owns the Scaled and UpToDate
// conditions.
func (r *DockyardMachinePoolReconciler) reconcileReplicas(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	pool := s.pool
	desired := int(ptr.Deref(s.mp.Spec.Replicas, 1))

	var active, current, outdated []poolInstance
	deleting, readyCount, currentNotReady := 0, 0, 0
	for _, i := range s.instances {
		if i.deleting() {
			deleting++
			continue
		}
		active = append(active, i)
		if i.ready() {
			readyCount++
		}
		if i.dm.Labels[infrav1.MachinePoolTemplateHashLabel] == s.hash {
			current = append(current, i)
			if !i.ready() {
				currentNotReady++
			}
		} else {
			outdated = append(outdated, i)
		}
	}

	// Create: up to the desired number of current instances. While outdated ones are replaced,
	// at most one more than desired exists, counting those still being deleted (drained).
	toCreate := desired - len(active)
	if len(outdated) > 0 {
		toCreate = min(desired-len(current), desired+1-len(s.instances))
	}
	for range max(toCreate, 0) {
		dm, err := r.createInstance(ctx, s)
		if err != nil {
			setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.InstanceCreateFailedReason, "%v", err)
			return ctrl.Result{}, err
		}
		// The next reconcile must count it, or it would create another.
		if err := r.waitForCache(ctx, dm, func(err error) bool { return err == nil }); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Created a DockyardMachine for the MachinePool", "DockyardMachine", klog.KObj(dm))
		r.Recorder.Eventf(pool, corev1.EventTypeNormal, "InstanceCreated", "Created DockyardMachine %s", dm.Name)
		active = append(active, poolInstance{dm: dm})
		current = append(current, poolInstance{dm: dm})
		currentNotReady++
	}

	// Delete the surplus through its Machines, in the documented order. While outdated
	// instances are replaced, only outdated ones go, and a Ready one only when the new ones
	// are Ready and the pool stays at the desired number of Ready instances without it.
	var deleted, waitingForMachine []string
	if surplus := len(active) - desired; surplus > 0 {
		candidates := current
		if len(outdated) > 0 {
			candidates = outdated
		}
		sortForDeletion(candidates)
		for _, i := range candidates {
			if surplus == 0 {
				break
			}
			if len(outdated) > 0 && i.ready() && !i.markedForDeletion() && (currentNotReady > 0 || readyCount-1 < desired) {
				break // wait for the new instances
			}
			if i.machine == nil {
				// Cluster API has not made its Machine yet; deleting the DockyardMachine now
				// would race with it. The Machine's creation wakes the pool up.
				waitingForMachine = append(waitingForMachine, i.dm.Name)
				continue
			}
			if err := r.deleteInstanceMachine(ctx, i); err != nil {
				return ctrl.Result{}, err
			}
			log.Info("Deleted the Machine of a surplus instance", "Machine", klog.KObj(i.machine), "DockyardMachine", klog.KObj(i.dm), "ready", i.ready())
			r.Recorder.Eventf(pool, corev1.EventTypeNormal, "InstanceDeleted", "Deleted Machine %s of DockyardMachine %s", i.machine.Name, i.dm.Name)
			deleted = append(deleted, i.dm.Name)
			surplus--
			deleting++
			if i.ready() {
				readyCount--
			}
		}
	}
	remaining := len(active) - len(deleted)

	switch {
	case remaining < desired:
		setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.ScalingUpReason,
			"%d of %d instances; Cluster API makes a Machine for each new DockyardMachine", remaining, desired)
	case remaining > desired || deleting > 0:
		msg := fmt.Sprintf("%d instances, %d wanted; %d being deleted through their Machines (drained first)", remaining, desired, deleting)
		if len(deleted) > 0 {
			msg += ": " + strings.Join(deleted, ", ")
		}
		if len(waitingForMachine) > 0 {
			msg += "; waiting for Cluster API to make the Machines of " + strings.Join(waitingForMachine, ", ")
		}
		setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.ScalingDownReason, "%s", msg)
	default:
		setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionTrue, infrav1.ScaledReason, "")
	}
	outdatedLeft := len(outdated) - countIn(outdated, deleted)
	if outdatedLeft > 0 {
		setPoolCondition(pool, infrav1.UpToDateCondition, metav1.ConditionFalse, infrav1.RollingOutReason,
			"%d outdated instances are replaced one at a time; %d new ones not Ready yet", outdatedLeft, currentNotReady)
	} else {
		setPoolCondition(pool, infrav1.UpToDateCondition, metav1.ConditionTrue, infrav1.UpToDateReason, "")
	}

	if len(waitingForMachine) > 0 {
		return ctrl.Result{RequeueAfter: poolWait}, nil
	}
	return ctrl.Result{}, nil
}

// deleteInstanceMachine deletes an instance's Machine (Cluster API drains its Node, then deletes
// the DockyardMachine and with it the container) and waits until the cache shows it going, so
// the next reconcile does not delete another.
func (r *DockyardMachinePoolReconciler) deleteInstanceMachine(ctx context.Context, i poolInstance) error {
	if err := r.Client.Delete(ctx, i.machine); err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "deleting Machine %s of DockyardMachine %s", i.machine.Name, i.dm.Name)
	}
	return r.waitForCache(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: i.machine.Namespace, Name: i.machine.Name}}, func(err error) bool {
		return apierrors.IsNotFound(err)
	})
}

// remediateUnhealthy deletes the Machines a MachineHealthCheck left to their owner to remediate
// (HealthCheckSucceeded and OwnerRemediated False). A MachinePool Machine's owner is the
// MachinePool, and Cluster API leaves remediating it to the infrastructure pool. The instance
// then counts as being deleted, and reconcileReplicas makes its replacement.
func (r *DockyardMachinePoolReconciler) remediateUnhealthy(ctx context.Context, s *poolScope) error {
	log := ctrl.LoggerFrom(ctx)
	for idx := range s.instances {
		i := &s.instances[idx]
		if i.machine == nil || i.deleting() || !collections.IsUnhealthyAndOwnerRemediated(i.machine) {
			continue
		}
		if err := r.deleteInstanceMachine(ctx, *i); err != nil {
			return errors.Wrap(err, "remediating an unhealthy instance")
		}
		log.Info("Deleted the Machine of an instance a MachineHealthCheck found unhealthy", "Machine", klog.KObj(i.machine), "DockyardMachine", klog.KObj(i.dm))
		r.Recorder.Eventf(s.pool, corev1.EventTypeNormal, "InstanceRemediated",
			"Deleted Machine %s of DockyardMachine %s: its MachineHealthCheck found it unhealthy", i.machine.Name, i.dm.Name)
		i.remediated = true
	}
	return nil
}

// waitForCache polls the manager's cache (a few seconds at most) until done says that a Get of
// obj shows what this reconcile just wrote: a Machine created or deleted, as Cluster API's
// MachineSet controller does. A deleted object may still be there with a deletion timestamp.
func (r *DockyardMachinePoolReconciler) waitForCache(ctx context.Context, obj client.Object, done func(error) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return done(err) || (err == nil && !obj.GetDeletionTimestamp().IsZero()), nil
	})
	return errors.Wrapf(err, "waiting for the cache to show the change to %s", obj.GetName())
}

// createInstance creates a DockyardMachine of the pool, named after the MachinePool, from the
// pool's template. The pool owns it (not as controller: the Machine Cluster API makes for it
// becomes its controller).
func (r *DockyardMachinePoolReconciler) createInstance(ctx context.Context, s *poolScope) (*infrav1.DockyardMachine, error) {
	dm := &infrav1.DockyardMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.pool.Namespace,
			Name:      names.SimpleNameGenerator.GenerateName(s.mp.Name + "-"),
			Labels: map[string]string{
				clusterv1.ClusterNameLabel:           s.cluster.Name,
				clusterv1.MachinePoolNameLabel:       format.MustFormatValue(s.mp.Name),
				infrav1.MachinePoolTemplateHashLabel: s.hash,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: infrav1.GroupVersion.String(),
				Kind:       "DockyardMachinePool",
				Name:       s.pool.Name,
				UID:        s.pool.UID,
			}},
		},
		Spec: *s.pool.Spec.Template.DeepCopy(),
	}
	dm.Spec.ProviderID = ""
	if err := r.Client.Create(ctx, dm); err != nil {
		return nil, errors.Wrapf(err, "creating a DockyardMachine for DockyardMachinePool %s", s.pool.Name)
	}
	return dm, nil
}

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

// templateHash is a short hash of what an instance is made from: the pool's template and the
// MachinePool's Kubernetes version (which picks the default node image).
func templateHash(pool *infrav1.DockyardMachinePool, mp *clusterv1.MachinePool) (string, error) {
	data, err := json.Marshal(struct {
		Spec    infrav1.DockyardMachineSpec `json:"spec"`
		Version string                      `json:"version"`
	}{pool.Spec.Template, mp.Spec.Template.Spec.Version})
	if err != nil {
		return "", errors.Wrap(err, "hashing the pool's template")
	}
	h := fnv.New32a()
	_, _ = h.Write(data)
	return strconv.FormatUint(uint64(h.Sum32()), 36), nil
}

// sortForDeletion orders instances the way they are deleted: marked with the delete-machine
// annotation, then not Ready, then newest first.
func sortForDeletion(instances []poolInstance) {
	rank := func(i poolInstance) int {
		switch {
		case i.markedForDeletion():
			return 0
		case !i.ready():
			return 1
		}
		return 2
	}
	sort.SliceStable(instances, func(a, b int) bool {
		ia, ib := instances[a], instances[b]
		if ra, rb := rank(ia), rank(ib); ra != rb {
			return ra < rb
		}
		ta, tb := ia.dm.CreationTimestamp, ib.dm.CreationTimestamp
		if !ta.Equal(&tb) {
			return tb.Before(&ta)
		}
		return ia.dm.Name > ib.dm.Name
	})
}

func countIn(instances []poolInstance, names []string) int {
	n := 0
	for _, i := range instances {
		for _, name := range names {
			if i.dm.Name == name {
				n++
			}
		}
	}
	return n
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

// clusterToPools maps a Cluster to its DockyardMachinePools.
func (r *DockyardMachinePoolReconciler) clusterToPools(ctx context.Context, o client.Object) []ctrl.Request {
	list := &infrav1.DockyardMachinePoolList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the DockyardMachinePools of a Cluster")
		return nil
	}
	requests := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
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
	return helper.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.ReadyCondition, infrav1.ScaledCondition, infrav1.UpToDateCondition, infrav1.MachinesReadyCondition, clusterv1.PausedCondition,
	}})
}
