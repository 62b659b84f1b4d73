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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/collections"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// The replicas phase of a DockyardMachinePool: remediation, scaling and rollouts, through
// DockyardMachines and their Machines.

// reconcileReplicas creates and deletes instances until the pool has the MachinePool's number of
// up-to-date ones, replacing outdated ones one at a time. It owns the Scaled and UpToDate
// conditions.
func (r *DockyardMachinePoolReconciler) reconcileReplicas(ctx context.Context, s *poolScope) (ctrl.Result, error) {
	rs := countReplicas(s)
	if err := r.scaleUp(ctx, s, rs); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.scaleDown(ctx, s, rs); err != nil {
		return ctrl.Result{}, err
	}
	rs.report(s.pool)
	if len(rs.waitingForMachine) > 0 {
		return ctrl.Result{RequeueAfter: poolWait}, nil
	}
	return ctrl.Result{}, nil
}

// replicaSet is the pool's instances as reconcileReplicas counts them; scaling updates it.
type replicaSet struct {
	desired int
	// active instances are not being deleted; current ones are made from the pool's template
	// (hash label), outdated ones from another.
	active, current, outdated []poolInstance
	// deleting counts the instances on their way out, ready the Ready active ones,
	// currentNotReady the current ones not Ready yet.
	deleting, ready, currentNotReady int
	// deleted names the instances this reconcile deleted, waitingForMachine the surplus ones
	// whose Machine Cluster API has not made yet.
	deleted, waitingForMachine []string
}

func countReplicas(s *poolScope) *replicaSet {
	rs := &replicaSet{desired: int(ptr.Deref(s.mp.Spec.Replicas, 1))}
	for _, i := range s.instances {
		if i.deleting() {
			rs.deleting++
			continue
		}
		rs.active = append(rs.active, i)
		if i.ready() {
			rs.ready++
		}
		if i.dm.Labels[infrav1.MachinePoolTemplateHashLabel] == s.hash {
			rs.current = append(rs.current, i)
			if !i.ready() {
				rs.currentNotReady++
			}
		} else {
			rs.outdated = append(rs.outdated, i)
		}
	}
	return rs
}

// scaleUp creates instances up to the desired number of current ones. While outdated ones are
// replaced, at most one more than desired exists, counting those still being deleted (drained).
func (r *DockyardMachinePoolReconciler) scaleUp(ctx context.Context, s *poolScope, rs *replicaSet) error {
	toCreate := rs.desired - len(rs.active)
	if len(rs.outdated) > 0 {
		toCreate = min(rs.desired-len(rs.current), rs.desired+1-len(s.instances))
	}
	for range max(toCreate, 0) {
		dm, err := r.createInstance(ctx, s)
		if err != nil {
			setPoolCondition(s.pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.InstanceCreateFailedReason, "%v", err)
			return err
		}
		// The next reconcile must count it, or it would create another.
		if err := r.waitForCache(ctx, dm, func(err error) bool { return err == nil }); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Created a DockyardMachine for the MachinePool", "DockyardMachine", klog.KObj(dm))
		r.Recorder.Eventf(s.pool, corev1.EventTypeNormal, "InstanceCreated", "Created DockyardMachine %s", dm.Name)
		rs.active = append(rs.active, poolInstance{dm: dm})
		rs.current = append(rs.current, poolInstance{dm: dm})
		rs.currentNotReady++
	}
	return nil
}

// scaleDown deletes the surplus through its Machines, in the documented order. While outdated
// instances are replaced, only outdated ones go, and a Ready one only when the new ones are
// Ready and the pool stays at the desired number of Ready instances without it.
func (r *DockyardMachinePoolReconciler) scaleDown(ctx context.Context, s *poolScope, rs *replicaSet) error {
	surplus := len(rs.active) - rs.desired
	if surplus <= 0 {
		return nil
	}
	candidates := rs.current
	if len(rs.outdated) > 0 {
		candidates = rs.outdated
	}
	sortForDeletion(candidates)
	for _, i := range candidates {
		if surplus == 0 {
			break
		}
		if len(rs.outdated) > 0 && i.ready() && !i.markedForDeletion() && (rs.currentNotReady > 0 || rs.ready-1 < rs.desired) {
			break // wait for the new instances
		}
		if i.machine == nil {
			// Cluster API has not made its Machine yet; deleting the DockyardMachine now would
			// race with it. The Machine's creation wakes the pool up.
			rs.waitingForMachine = append(rs.waitingForMachine, i.dm.Name)
			continue
		}
		if err := r.deleteInstanceMachine(ctx, i); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Deleted the Machine of a surplus instance", "Machine", klog.KObj(i.machine), "DockyardMachine", klog.KObj(i.dm), "ready", i.ready())
		r.Recorder.Eventf(s.pool, corev1.EventTypeNormal, "InstanceDeleted", "Deleted Machine %s of DockyardMachine %s", i.machine.Name, i.dm.Name)
		rs.deleted = append(rs.deleted, i.dm.Name)
		surplus--
		rs.deleting++
		if i.ready() {
			rs.ready--
		}
	}
	return nil
}

// report sets Scaled and UpToDate.
func (rs *replicaSet) report(pool *infrav1.DockyardMachinePool) {
	remaining := len(rs.active) - len(rs.deleted)
	switch {
	case remaining < rs.desired:
		setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.ScalingUpReason,
			"%d of %d instances; Cluster API makes a Machine for each new DockyardMachine", remaining, rs.desired)
	case remaining > rs.desired || rs.deleting > 0:
		msg := fmt.Sprintf("%d instances, %d wanted; %d being deleted through their Machines (drained first)", remaining, rs.desired, rs.deleting)
		if len(rs.deleted) > 0 {
			msg += ": " + strings.Join(rs.deleted, ", ")
		}
		if len(rs.waitingForMachine) > 0 {
			msg += "; waiting for Cluster API to make the Machines of " + strings.Join(rs.waitingForMachine, ", ")
		}
		setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionFalse, infrav1.ScalingDownReason, "%s", msg)
	default:
		setPoolCondition(pool, infrav1.ScaledCondition, metav1.ConditionTrue, infrav1.ScaledReason, "")
	}
	if outdatedLeft := len(rs.outdated) - countIn(rs.outdated, rs.deleted); outdatedLeft > 0 {
		setPoolCondition(pool, infrav1.UpToDateCondition, metav1.ConditionFalse, infrav1.RollingOutReason,
			"%d outdated instances are replaced one at a time; %d new ones not Ready yet", outdatedLeft, rs.currentNotReady)
	} else {
		setPoolCondition(pool, infrav1.UpToDateCondition, metav1.ConditionTrue, infrav1.UpToDateReason, "")
	}
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
