package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// onSecretInfrastructure makes the fixture's cluster run its nodes on the infrastructure
// cluster of kubeconfig Secret "infra" (a fake engine of many hosts, which it returns); with
// secret false the Secret does not exist.
func (f *fixture) onSecretInfrastructure(secret bool) *inmemory.Balancing {
	f.t.Helper()
	if secret {
		infra := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "infra"},
			Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: []byte(testInfraKubeconfig)}}
		if err := f.c.Create(f.ctx, infra); err != nil {
			f.t.Fatal(err)
		}
	}
	dc := f.getDockyardCluster()
	dc.Spec.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		f.t.Fatal(err)
	}
	engine := inmemory.NewBalancing(inmemory.New(testNodeImage))
	inmemory.NewNodes(engine.Runtime)
	f.engines = infrastructure.New(f.nodes, infrastructure.Options{Secrets: f.c,
		Connect: func(runtimes.Config) (runtimes.Runtime, error) { return closable{engine}, nil }})
	return engine
}

func (f *fixture) deleteSecret(name string) {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: name}, s); err != nil {
		f.t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(s, infrastructure.SecretFinalizer)
	if err := f.c.Update(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
	if err := f.c.Delete(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) dockyardClusterGone() bool {
	return f.c.Get(f.ctx, client.ObjectKeyFromObject(f.dc), &infrav1.DockyardCluster{}) != nil
}

// A cluster whose infrastructure could never be used made nothing: deleting it ends at once,
// whatever state that infrastructure is in. Before, it waited for ever, "Deleting the load
// balancer and network" of an infrastructure it could not reach.
func TestAClusterThatMadeNothingIsDeletedWhateverItsInfrastructure(t *testing.T) {
	f := newFixture(t)
	f.onSecretInfrastructure(false) // names a Secret that does not exist
	f.reconcileClusterN(2)
	dc := f.getDockyardCluster()
	expectCondition(t, dc, infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.InfrastructureUnavailableReason, "Secret infra", "does not exist")
	if dc.Status.Engine != "" {
		t.Fatalf("status.engine %q for a cluster that made nothing", dc.Status.Engine)
	}
	if err := f.c.Delete(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	if !f.dockyardClusterGone() {
		t.Errorf("the DockyardCluster is still there: %+v", f.getDockyardCluster().Status.Conditions)
	}
}

// A cluster that made its network and load balancer on an infrastructure that is then gone
// (its kubeconfig Secret deleted) says, while it is deleted, what blocks it and the two ways
// out; the annotation that abandons what is there ends the deletion of its machines and itself.
func TestADeletionBlockedByItsInfrastructureSaysHowOut(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	engine := f.onSecretInfrastructure(true)
	f.provisionCluster()
	f.provisionMachine(cpName)
	dc := f.getDockyardCluster()
	if dc.Status.Engine != "secret/"+testNS+"/infra/pods" || f.getMachine(cpName).Status.Engine != dc.Status.Engine {
		t.Fatalf("status.engine of the cluster %q and of its machine %q, want the Secret's infrastructure", dc.Status.Engine, f.getMachine(cpName).Status.Engine)
	}
	secret := &corev1.Secret{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: "infra"}, secret); err != nil {
		t.Fatal(err)
	}
	if _, ok := secret.Labels[infrastructure.SecretLabel]; !ok || !controllerutil.ContainsFinalizer(secret, infrastructure.SecretFinalizer) {
		t.Errorf("the Secret the nodes run on is not marked: labels %v, finalizers %v", secret.Labels, secret.Finalizers)
	}

	f.deleteSecret("infra")
	if err := f.c.Delete(f.ctx, f.getMachine(cpName)); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(cpName)
	expectCondition(t, f.getMachine(cpName), clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.InfrastructureUnavailableReason,
		"Cannot delete the node", "Restore access", infrav1.AbandonAnnotation)
	if err := f.c.Delete(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	expectCondition(t, f.getDockyardCluster(), clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "1 DockyardMachines")

	dc = f.getDockyardCluster()
	dc.Annotations = map[string]string{infrav1.AbandonAnnotation: ""}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileMachine(cpName)
	f.reconcileClusterN(1)
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: cpName}, &infrav1.DockyardMachine{}); err == nil {
		t.Error("the DockyardMachine is still there after its DockyardCluster abandoned what is left")
	}
	if !f.dockyardClusterGone() {
		t.Error("the DockyardCluster is still there after it abandoned what is left")
	}
	if cs, _ := engine.ListContainers(f.ctx, docker.ClusterKey{Namespace: testNS, Name: testCluster}.ClusterLabels()); len(cs) != 1 {
		t.Errorf("%d containers left on the abandoned infrastructure, want the node that could not be reached", len(cs))
	}
	if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "Abandoned") {
		t.Errorf("no Abandoned event:\n%s", events)
	}
}

// While the infrastructure answers, deleting the cluster removes what is there, and its
// kubeconfig Secret may then go.
func TestDeletingAClusterOnASecretsInfrastructureReleasesTheSecret(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	engine := f.onSecretInfrastructure(true)
	f.provisionCluster()
	f.provisionMachine(cpName)
	f.deleteAndExpectGone(cpName)
	if err := f.c.Delete(f.ctx, f.getDockyardCluster()); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	if !f.dockyardClusterGone() {
		t.Fatal("the DockyardCluster is still there")
	}
	if _, err := (&InfrastructureSecretReconciler{Client: f.c}).Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "infra"}}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: "infra"}, secret); err != nil {
		t.Fatal(err)
	}
	if controllerutil.ContainsFinalizer(secret, infrastructure.SecretFinalizer) {
		t.Error("the Secret keeps its finalizer once no cluster runs there")
	}
	labels := docker.ClusterKey{Namespace: testNS, Name: testCluster}.ClusterLabels()
	if cs, _ := engine.ListContainers(f.ctx, labels); len(cs) != 0 || len(engine.Fronts()) != 0 {
		t.Errorf("left on the infrastructure: containers %v, fronts %v", cs, engine.Fronts())
	}
}

// Of two clusters on one kubeconfig Secret deleted at once (their namespace deleted), neither
// lets the Secret go while the other may still need it; it goes once both are gone.
func TestAKubeconfigSecretGoesWithTheLastClusterNamingIt(t *testing.T) {
	f := newFixture(t)
	f.onSecretInfrastructure(true)
	f.provisionCluster()
	other := f.getDockyardCluster().DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Namespace: testNS, Name: "other", Finalizers: []string{infrav1.ClusterFinalizer}}
	if err := f.c.Create(f.ctx, other); err != nil {
		t.Fatal(err)
	}
	r := &InfrastructureSecretReconciler{Client: f.c}
	release := func() bool {
		t.Helper()
		if _, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "infra"}}); err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{}
		if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: "infra"}, s); err != nil {
			t.Fatal(err)
		}
		return !controllerutil.ContainsFinalizer(s, infrastructure.SecretFinalizer)
	}
	if release() {
		t.Fatal("the Secret went while two clusters name it")
	}
	if err := f.c.Delete(f.ctx, f.getDockyardCluster()); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	if release() {
		t.Fatal("the Secret went while another cluster names it")
	}
	controllerutil.RemoveFinalizer(other, infrav1.ClusterFinalizer)
	if err := f.c.Update(f.ctx, other); err != nil {
		t.Fatal(err)
	}
	if !release() {
		t.Error("the Secret keeps its finalizer once no cluster names it")
	}
}

// A cluster that asks for the management cluster as its infrastructure, in a namespace the
// manager does not allow it to (admitted before the policy changed), is NotAllowed with the
// flag named, not NetworkFailed; nothing is made, and it is deleted at once.
func TestAnInfrastructureThePolicyRefusesIsNotAllowed(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Spec.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.engines = infrastructure.New(f.nodes, infrastructure.Options{Secrets: f.c, Policy: policy.Default(), Management: &rest.Config{Host: "https://mgmt.example:6443"}})
	res, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("reconcile: %v, %+v; want a requeue without an error", err, res)
	}
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.NotAllowedReason,
		"--allowed-management-infrastructure-namespaces")
	if got := f.getDockyardCluster().Status.Engine; got != "" {
		t.Errorf("status.engine %q, want empty: nothing was made", got)
	}
	if names := f.rt.ContainerNames(); len(names) != 0 {
		t.Errorf("containers created: %v", names)
	}
	if err := f.c.Delete(f.ctx, f.getDockyardCluster()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)}); err != nil {
		t.Fatal(err)
	}
	if !f.dockyardClusterGone() {
		t.Error("the DockyardCluster is still there: nothing was made for it, so nothing held its deletion")
	}
}
