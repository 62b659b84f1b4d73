package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels/format"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

// poolEnv is a Cluster with a MachinePool and its DockyardMachinePool on envtest. Cluster API's
// controllers do not run there: simulateCAPI plays the MachinePool controller (a Machine per
// DockyardMachine of the pool) and the Machine controller (adopting the DockyardMachine,
// deleting it with its Machine).
type poolEnv struct {
	t       *testing.T
	ctx     context.Context
	cluster *clusterv1.Cluster
	mp      *clusterv1.MachinePool
	pool    *infrav1.DockyardMachinePool
}

func newPoolEnv(t *testing.T, name string, replicas int32) *poolEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cluster, dc := envCluster(ctx, t, name, false)
	ns := cluster.Namespace
	eventually(t, 30*time.Second, "DockyardCluster provisioned", func() error {
		got := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), got); err != nil {
			return err
		}
		if !ptr.Deref(got.Status.Initialization.Provisioned, false) {
			return errors.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
	patchClusterStatus(ctx, t, cluster, func(c *clusterv1.Cluster) {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-mp-0-bootstrap", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Data:       map[string][]byte{"value": []byte(testBootstrapData), "format": []byte("cloud-config")},
	}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-mp-0", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: name,
			Replicas:    ptr.To(replicas),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: name,
				Version:     "v1.34.4",
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(secret.Name)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardMachinePool", Name: name + "-mp-0",
				},
			}},
		},
	}
	for _, o := range []client.Object{secret, mp} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pool := &infrav1.DockyardMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-mp-0", Namespace: ns,
			Labels: map[string]string{clusterv1.ClusterNameLabel: name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool",
				Name: mp.Name, UID: mp.UID, Controller: ptr.To(true)}},
		},
		// No image: the node image follows the MachinePool's version.
		Spec: infrav1.DockyardMachinePoolSpec{Template: infrav1.DockyardMachineSpec{PreLoadImages: []string{testNodeImage}}},
	}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	p := &poolEnv{t: t, ctx: ctx, cluster: cluster, mp: mp, pool: pool}
	go p.simulateCAPI()
	return p
}

// simulateCAPI does for the pool's DockyardMachines what Cluster API's controllers would: a
// Machine for each new one (owned by the MachinePool, named like it, with an empty bootstrap
// data secret name as Cluster API sets, and the Machine controller's finalizer), the Machine as
// the DockyardMachine's controller, and once a Machine is deleted, its DockyardMachine deleted
// and then its finalizer removed.
func (p *poolEnv) simulateCAPI() {
	ctx, ns := p.ctx, p.cluster.Namespace
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		machines := &clusterv1.MachineList{}
		if err := env.Client.List(ctx, machines, client.InNamespace(ns)); err != nil {
			continue
		}
		for i := range machines.Items {
			m := &machines.Items[i]
			if m.DeletionTimestamp.IsZero() {
				continue
			}
			dm := &infrav1.DockyardMachine{}
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, dm)
			switch {
			case err == nil && dm.DeletionTimestamp.IsZero():
				_ = env.Client.Delete(ctx, dm)
			case apierrors.IsNotFound(err):
				patch := client.MergeFrom(m.DeepCopy())
				m.Finalizers = nil
				_ = env.Client.Patch(ctx, m, patch)
			}
		}
		list := &infrav1.DockyardMachineList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns), client.HasLabels{clusterv1.MachinePoolNameLabel}); err != nil {
			continue
		}
		for i := range list.Items {
			dm := &list.Items[i]
			owned := false
			for _, ref := range dm.OwnerReferences {
				owned = owned || ref.Kind == "Machine"
			}
			if owned || !dm.DeletionTimestamp.IsZero() {
				continue
			}
			m := &clusterv1.Machine{
				ObjectMeta: metav1.ObjectMeta{Name: dm.Name, Namespace: ns,
					Labels: map[string]string{clusterv1.ClusterNameLabel: p.cluster.Name, clusterv1.MachinePoolNameLabel: format.MustFormatValue(p.mp.Name)},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool",
						Name: p.mp.Name, UID: p.mp.UID, Controller: ptr.To(true)}},
					Finalizers: []string{clusterv1.MachineFinalizer},
				},
				Spec: clusterv1.MachineSpec{
					ClusterName: p.cluster.Name,
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardMachine", Name: dm.Name,
					},
				},
			}
			if err := env.Client.Create(ctx, m); err != nil && !apierrors.IsAlreadyExists(err) {
				continue
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				continue
			}
			patch := client.MergeFrom(dm.DeepCopy())
			dm.OwnerReferences = append(dm.OwnerReferences, metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine",
				Name: m.Name, UID: m.UID, Controller: ptr.To(true)})
			_ = env.Client.Patch(ctx, dm, patch)
		}
	}
}

func (p *poolEnv) getPool() (*infrav1.DockyardMachinePool, error) {
	pool := &infrav1.DockyardMachinePool{}
	return pool, env.Client.Get(p.ctx, client.ObjectKeyFromObject(p.pool), pool)
}

// instances returns the pool's DockyardMachines that are not being deleted, by name.
func (p *poolEnv) instances() (map[string]*infrav1.DockyardMachine, error) {
	list := &infrav1.DockyardMachineList{}
	if err := env.Client.List(p.ctx, list, client.InNamespace(p.cluster.Namespace), client.MatchingLabels{
		clusterv1.MachinePoolNameLabel: format.MustFormatValue(p.mp.Name),
	}); err != nil {
		return nil, err
	}
	out := map[string]*infrav1.DockyardMachine{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out, nil
}

func (p *poolEnv) scale(replicas int32) {
	p.t.Helper()
	mp := &clusterv1.MachinePool{}
	if err := env.Client.Get(p.ctx, client.ObjectKeyFromObject(p.mp), mp); err != nil {
		p.t.Fatal(err)
	}
	patch := client.MergeFrom(mp.DeepCopy())
	mp.Spec.Replicas = ptr.To(replicas)
	if err := env.Client.Patch(p.ctx, mp, patch); err != nil {
		p.t.Fatal(err)
	}
}

// waitReady waits until the pool has exactly n instances, all Ready, and reports them Ready
// with a providerIDList of n.
func (p *poolEnv) waitReady(n int) map[string]*infrav1.DockyardMachine {
	p.t.Helper()
	var dms map[string]*infrav1.DockyardMachine
	eventually(p.t, 60*time.Second, fmt.Sprintf("%d Ready instances", n), func() error {
		var err error
		if dms, err = p.instances(); err != nil {
			return err
		}
		if len(dms) != n {
			return errors.Errorf("%d instances", len(dms))
		}
		for _, dm := range dms {
			if !conditions.IsTrue(dm, clusterv1.ReadyCondition) {
				return errors.Errorf("%s: %+v", dm.Name, dm.Status.Conditions)
			}
		}
		pool, err := p.getPool()
		if err != nil {
			return err
		}
		// The patch helper writes spec (providerIDList) and status in two requests: a read in
		// between sees the new list beside the old status, so wait for the status too.
		if len(pool.Spec.ProviderIDList) != n || ptr.Deref(pool.Status.Replicas, -1) != int32(n) || !conditions.IsTrue(pool, clusterv1.ReadyCondition) ||
			ptr.Deref(pool.Status.ReadyReplicas, -1) != int32(n) || !ptr.Deref(pool.Status.Initialization.Provisioned, false) {
			return errors.Errorf("pool providerIDList %v, replicas %v, ready %v, provisioned %v, conditions %+v", pool.Spec.ProviderIDList,
				pool.Status.Replicas, pool.Status.ReadyReplicas, pool.Status.Initialization.Provisioned, pool.Status.Conditions)
		}
		return nil
	})
	return dms
}

func (p *poolEnv) machine(name string) *clusterv1.Machine {
	p.t.Helper()
	m := &clusterv1.Machine{}
	if err := env.Client.Get(p.ctx, client.ObjectKey{Namespace: p.cluster.Namespace, Name: name}, m); err != nil {
		p.t.Fatal(err)
	}
	return m
}

func keys(m map[string]*infrav1.DockyardMachine) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestMachinePoolScaleUpCreatesLabelledInstancesAndPublishesProviderIDs(t *testing.T) {
	p := newPoolEnv(t, "pool-up", 3)
	dms := p.waitReady(3)

	pool, err := p.getPool()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, dm := range dms {
		if dm.Labels[clusterv1.ClusterNameLabel] != "pool-up" || dm.Labels[clusterv1.MachinePoolNameLabel] != "pool-up-mp-0" ||
			dm.Labels[infrav1.MachinePoolTemplateHashLabel] == "" {
			t.Errorf("DockyardMachine %s labels %v", dm.Name, dm.Labels)
		}
		var poolOwner *metav1.OwnerReference
		for i, ref := range dm.OwnerReferences {
			if ref.Kind == "DockyardMachinePool" {
				poolOwner = &dm.OwnerReferences[i]
			}
		}
		if poolOwner == nil || poolOwner.UID != pool.UID || ptr.Deref(poolOwner.Controller, false) {
			t.Errorf("DockyardMachine %s owners %+v: want the pool, not as controller", dm.Name, dm.OwnerReferences)
		}
		if !slices.Equal(dm.Spec.PreLoadImages, []string{testNodeImage}) {
			t.Errorf("DockyardMachine %s spec %+v, want the pool's template", dm.Name, dm.Spec)
		}
		// The node runs the image of the MachinePool's version and its bootstrap data (the
		// Machine Cluster API makes has neither).
		node, err := envRuntime.InspectContainer(p.ctx, docker.NodeName(docker.ClusterKey{Namespace: p.cluster.Namespace, Name: "pool-up"}, dm.Name))
		if err != nil || !node.Running || node.Image != testNodeImage {
			t.Errorf("node container of %s: %v %+v, want %s running", dm.Name, err, node, testNodeImage)
		}
		expectCondition(t, dm, infrav1.BootstrapSucceededCondition, metav1.ConditionTrue, infrav1.BootstrapSucceededReason)
		want = append(want, dm.Spec.ProviderID)
	}
	sort.Strings(want)
	if !slices.Equal(pool.Spec.ProviderIDList, want) {
		t.Errorf("providerIDList %v, want the instances' providerIDs sorted %v", pool.Spec.ProviderIDList, want)
	}
	if ptr.Deref(pool.Status.ReadyReplicas, -1) != 3 || !ptr.Deref(pool.Status.Initialization.Provisioned, false) ||
		!ptr.Deref(pool.Status.Ready, false) || pool.Status.InfrastructureMachineKind != "DockyardMachine" {
		t.Errorf("status %+v", pool.Status)
	}
	for _, c := range []string{infrav1.ScaledCondition, infrav1.UpToDateCondition, infrav1.MachinesReadyCondition} {
		if !conditions.IsTrue(pool, c) {
			t.Errorf("condition %s: %+v", c, conditions.Get(pool, c))
		}
	}
	expectNoMessageOnTrueConditions(t, pool)
	for _, dm := range dms {
		expectNoMessageOnTrueConditions(t, dm)
	}
}

// Scale down deletes the Machines of (1) instances marked with the delete-machine annotation,
// (2) instances that are not Ready, (3) the newest.
func TestMachinePoolScaleDownDeletesMarkedThenNotReadyThenNewest(t *testing.T) {
	p := newPoolEnv(t, "pool-down", 1)
	// One at a time, so creation times differ (they have a resolution of a second).
	first := keys(p.waitReady(1))[0]
	time.Sleep(1100 * time.Millisecond)
	p.scale(2)
	second := ""
	for _, n := range keys(p.waitReady(2)) {
		if n != first {
			second = n
		}
	}
	time.Sleep(1100 * time.Millisecond)
	p.scale(3)
	third := ""
	for _, n := range keys(p.waitReady(3)) {
		if n != first && n != second {
			third = n
		}
	}

	// The oldest is marked for deletion, the middle one stops (not Ready): 3 → 2 deletes the
	// marked one first although it is Ready and the oldest.
	m := p.machine(first)
	patch := client.MergeFrom(m.DeepCopy())
	m.Annotations = map[string]string{clusterv1.DeleteMachineAnnotation: ""}
	if err := env.Client.Patch(p.ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	envRuntime.StopContainer(docker.NodeName(docker.ClusterKey{Namespace: p.cluster.Namespace, Name: "pool-down"}, second), 137)
	eventually(t, 30*time.Second, "stopped instance not Ready", func() error {
		dms, err := p.instances()
		if err != nil {
			return err
		}
		if conditions.IsTrue(dms[second], clusterv1.ReadyCondition) {
			return errors.Errorf("%s still Ready", second)
		}
		return nil
	})
	p.scale(2)
	eventually(t, 30*time.Second, "the marked instance deleted", func() error {
		dms, err := p.instances()
		if err != nil {
			return err
		}
		if got := keys(dms); !slices.Equal(got, keys(map[string]*infrav1.DockyardMachine{second: nil, third: nil})) {
			return errors.Errorf("instances %v, want %s and %s", got, second, third)
		}
		return nil
	})
	// 2 → 1: the not Ready one goes, though the other is newer.
	p.scale(1)
	eventually(t, 30*time.Second, "the not Ready instance deleted", func() error {
		dms, err := p.instances()
		if err != nil {
			return err
		}
		if got := keys(dms); len(got) != 1 || got[0] != third {
			return errors.Errorf("instances %v, want %s", got, third)
		}
		return nil
	})
	p.waitReady(1)

	// 1 → 2 → 1 with both Ready: the newest goes.
	time.Sleep(1100 * time.Millisecond)
	p.scale(2)
	p.waitReady(2)
	p.scale(1)
	eventually(t, 30*time.Second, "the newest instance deleted", func() error {
		dms, err := p.instances()
		if err != nil {
			return err
		}
		if got := keys(dms); len(got) != 1 || got[0] != third {
			return errors.Errorf("instances %v, want the older %s", got, third)
		}
		return nil
	})
	p.waitReady(1)
	// The deleted instances' containers are gone from the engine.
	key := docker.ClusterKey{Namespace: p.cluster.Namespace, Name: "pool-down"}
	cs, err := envRuntime.ListContainers(p.ctx, key.ClusterLabels())
	if err != nil {
		t.Fatal(err)
	}
	nodes := 0
	for _, c := range cs {
		if c.Name != docker.LoadBalancerName(key) {
			nodes++
			if c.Name != docker.NodeName(key, third) {
				t.Errorf("container %s left on the engine", c.Name)
			}
		}
	}
	if nodes != 1 {
		t.Errorf("%d node containers, want 1", nodes)
	}
}

// A template change replaces the instances one at a time: one new instance beyond the replicas,
// an old one deleted only once the new one is Ready; never fewer Ready instances than wanted.
func TestMachinePoolTemplateChangeRollsOneAtATime(t *testing.T) {
	p := newPoolEnv(t, "pool-roll", 2)
	old := p.waitReady(2)
	pool, err := p.getPool()
	if err != nil {
		t.Fatal(err)
	}
	oldHash := old[keys(old)[0]].Labels[infrav1.MachinePoolTemplateHashLabel]

	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Template.BootstrapTimeout = &metav1.Duration{Duration: 7 * time.Minute}
	if err := env.Client.Patch(p.ctx, pool, patch); err != nil {
		t.Fatal(err)
	}
	maxInstances, minReady := 0, 2
	eventually(t, 90*time.Second, "every instance replaced", func() error {
		dms, err := p.instances()
		if err != nil {
			return err
		}
		ready := 0
		for _, dm := range dms {
			if conditions.IsTrue(dm, clusterv1.ReadyCondition) {
				ready++
			}
		}
		maxInstances, minReady = max(maxInstances, len(dms)), min(minReady, ready)
		if len(dms) != 2 || ready != 2 {
			return errors.Errorf("%d instances, %d Ready", len(dms), ready)
		}
		for _, dm := range dms {
			if old[dm.Name] != nil || dm.Labels[infrav1.MachinePoolTemplateHashLabel] == oldHash ||
				dm.Spec.BootstrapTimeout == nil || dm.Spec.BootstrapTimeout.Duration != 7*time.Minute {
				return errors.Errorf("%s not replaced yet (hash %s)", dm.Name, dm.Labels[infrav1.MachinePoolTemplateHashLabel])
			}
		}
		return nil
	})
	if maxInstances > 3 {
		t.Errorf("up to %d instances during the rollout, want at most replicas+1 = 3", maxInstances)
	}
	if minReady < 2 {
		t.Errorf("only %d Ready instances at one point of the rollout, want never fewer than 2", minReady)
	}
	p.waitReady(2)
	pool, err = p.getPool()
	if err != nil {
		t.Fatal(err)
	}
	expectCondition(t, pool, infrav1.UpToDateCondition, metav1.ConditionTrue, infrav1.UpToDateReason)
}

// Deleting the pool (Cluster API does when its MachinePool goes) deletes its instances through
// their Machines; nothing of them is left on the engine, then the pool goes.
func TestMachinePoolDeletionRemovesInstancesAndContainers(t *testing.T) {
	p := newPoolEnv(t, "pool-del", 2)
	dms := p.waitReady(2)
	pool, err := p.getPool()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(p.ctx, pool); err != nil {
		t.Fatal(err)
	}
	key := docker.ClusterKey{Namespace: p.cluster.Namespace, Name: "pool-del"}
	eventually(t, 30*time.Second, "pool, Machines and DockyardMachines gone, with their containers", func() error {
		if _, err := p.getPool(); !apierrors.IsNotFound(err) {
			return errors.Errorf("pool still there (%v)", err)
		}
		for name := range dms {
			if err := env.Client.Get(p.ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, &clusterv1.Machine{}); !apierrors.IsNotFound(err) {
				return errors.Errorf("Machine %s still there (%v)", name, err)
			}
			if err := env.Client.Get(p.ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, &infrav1.DockyardMachine{}); !apierrors.IsNotFound(err) {
				return errors.Errorf("DockyardMachine %s still there (%v)", name, err)
			}
			if _, err := envRuntime.InspectContainer(p.ctx, docker.NodeName(key, name)); err == nil {
				return errors.Errorf("container of %s still on the engine", name)
			}
		}
		return nil
	})
}

// A template the DockyardMachine webhook would refuse is refused on the pool itself, with the
// field named, and the pool keeps making instances of the template it had.
func TestMachinePoolRefusedTemplateIsReported(t *testing.T) {
	p := newPoolEnv(t, "pool-bad", 0)
	p.waitReady(0)
	pool, err := p.getPool()
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Spec.Template.ExtraMounts = []infrav1.Mount{{HostPath: "/tmp/pool-bad", ContainerPath: "/var"}}
	err = env.Client.Patch(p.ctx, pool, patch)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.extraMounts[0].containerPath") ||
		!strings.Contains(err.Error(), "--allowed-host-paths") {
		t.Fatalf("the pool's refused template: %v, want it refused naming the fields", err)
	}
	if dms, err := p.instances(); err != nil || len(dms) != 0 {
		t.Errorf("instances %v (%v), want none", keys(dms), err)
	}
}

// clusterctl move deletes the pool from the old management cluster with its delete-for-move
// annotation: the instances (which move too) and their containers stay.
func TestMachinePoolDeletedForMoveKeepsInstances(t *testing.T) {
	p := newPoolEnv(t, "pool-move", 1)
	dms := p.waitReady(1)
	pool, err := p.getPool()
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(pool.DeepCopy())
	pool.Annotations = map[string]string{clusterctlv1.DeleteForMoveAnnotation: ""}
	if err := env.Client.Patch(p.ctx, pool, patch); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(p.ctx, pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "pool gone", func() error {
		if _, err := p.getPool(); !apierrors.IsNotFound(err) {
			return errors.Errorf("pool still there (%v)", err)
		}
		return nil
	})
	name := keys(dms)[0]
	if m := p.machine(name); !m.DeletionTimestamp.IsZero() {
		t.Errorf("Machine %s is being deleted", name)
	}
	if node, err := envRuntime.InspectContainer(p.ctx, docker.NodeName(docker.ClusterKey{Namespace: p.cluster.Namespace, Name: "pool-move"}, name)); err != nil || !node.Running {
		t.Errorf("container of %s: %v %+v", name, err, node)
	}
}

// A Machine a MachineHealthCheck found unhealthy and left to its owner (HealthCheckSucceeded and
// OwnerRemediated False, as Cluster API's MachineHealthCheck controller sets them) is deleted by
// the pool and replaced; an unhealthy Machine not left to the owner, and a healthy one, stay.
func TestMachinePoolRemediatesMachinesAMachineHealthCheckMarked(t *testing.T) {
	p := newPoolEnv(t, "pool-mhc", 3)
	ready := keys(p.waitReady(3))
	remediate, onlyUnhealthy, healthy := ready[0], ready[1], ready[2]

	mark := func(name string, ownerRemediated bool) {
		m := p.machine(name)
		patch := client.MergeFrom(m.DeepCopy())
		conditions.Set(m, metav1.Condition{Type: clusterv1.MachineHealthCheckSucceededCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.MachineHealthCheckUnhealthyNodeReason, Message: "Node is not Ready"})
		if ownerRemediated {
			conditions.Set(m, metav1.Condition{Type: clusterv1.MachineOwnerRemediatedCondition, Status: metav1.ConditionFalse,
				Reason: clusterv1.MachineOwnerRemediatedWaitingForRemediationReason})
		}
		if err := env.Client.Status().Patch(p.ctx, m, patch); err != nil {
			t.Fatal(err)
		}
	}
	mark(onlyUnhealthy, false)
	mark(remediate, true)

	eventually(t, 60*time.Second, "the marked instance replaced", func() error {
		dms, err := p.instances()
		if err != nil {
			return err
		}
		if _, ok := dms[remediate]; ok {
			return errors.Errorf("instance %s still there: %v", remediate, keys(dms))
		}
		if len(dms) != 3 {
			return errors.Errorf("instances %v, want 3", keys(dms))
		}
		return nil
	})
	after := p.waitReady(3)
	for _, name := range []string{onlyUnhealthy, healthy} {
		if _, ok := after[name]; !ok {
			t.Errorf("instance %s was deleted; only the one left to its owner may be", name)
		}
	}
}
