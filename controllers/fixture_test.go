package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

const (
	testNS         = "ns1"
	testCluster    = "c1"
	testNetwork    = "dockyard-" + testCluster + "." + testNS
	testNodeImage  = "kindest/node:v1.34.4"
	testKubeadmCmd = "kubeadm init --config /run/kubeadm/kubeadm.yaml"
)

// testBootstrapData is shaped like what Cluster API's kubeadm bootstrap provider writes.
const testBootstrapData = `## template: jinja
#cloud-config

write_files:
-   path: /etc/kubernetes/pki/ca.key
    owner: root:root
    permissions: '0600'
    content: |
      -----BEGIN RSA PRIVATE KEY-----
      not-a-real-key
      -----END RSA PRIVATE KEY-----
-   path: /run/kubeadm/kubeadm.yaml
    owner: root:root
    permissions: '0640'
    content: |
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
ntp:
  enabled: true
runcmd:
  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
`

// fixture is a management cluster on a fake API server with a fake container engine.
type fixture struct {
	t        *testing.T
	ctx      context.Context
	c        client.Client
	workload client.Client
	rt       *inmemory.Runtime
	sim      *inmemory.Nodes
	// nodes is the node layer of the host's engine; a test may replace it (another policy,
	// another engine) before it makes a reconciler.
	nodes    *docker.Manager
	engines  *infrastructure.Engines
	recorder *record.FakeRecorder
	cluster  *clusterv1.Cluster
	dc       *infrav1.DockyardCluster
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: ctrl.LoggerInto(context.Background(), ctrl.Log)}
	f.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNS, UID: "cluster-uid"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: testCluster,
		}},
	}
	f.dc = &infrav1.DockyardCluster{
		ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNS,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: testCluster},
			OwnerReferences: []metav1.OwnerReference{clusterOwnerRef()},
		},
		Spec: infrav1.DockyardClusterSpec{LoadBalancer: infrav1.LoadBalancerSpec{Image: docker.DefaultLoadBalancerImage}},
	}
	all := append([]client.Object{f.cluster, f.dc}, objs...)
	s := scheme.New()
	f.c = fakeclient.NewClientBuilder().WithScheme(s).WithObjects(all...).
		WithStatusSubresource(&clusterv1.Cluster{}, &clusterv1.Machine{}, &infrav1.DockyardCluster{}, &infrav1.DockyardMachine{}).
		Build()
	f.workload = fakeclient.NewClientBuilder().WithScheme(s).Build()
	f.rt = inmemory.New(testNodeImage, docker.DefaultLoadBalancerImage)
	f.sim = inmemory.NewNodes(f.rt)
	f.nodes = docker.NewManager(f.rt, docker.ManagerOptions{})
	f.recorder = record.NewFakeRecorder(1000)
	return f
}

func clusterOwnerRef() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: testCluster, UID: "cluster-uid"}
}

func (f *fixture) machineReconciler() *DockyardMachineReconciler {
	return &DockyardMachineReconciler{
		Client:       f.c,
		ClusterCache: clustercache.NewFakeClusterCache(f.workload, client.ObjectKey{Namespace: testNS, Name: testCluster}),
		Engines:      f.enginesOf(),
		Recorder:     f.recorder,
	}
}

func (f *fixture) clusterReconciler() *DockyardClusterReconciler {
	return &DockyardClusterReconciler{Client: f.c, Engines: f.enginesOf(), Recorder: f.recorder}
}

// provisionCluster runs the DockyardCluster reconciler until the load balancer serves, and
// marks the Cluster's infrastructure provisioned as Cluster API would.
func (f *fixture) provisionCluster() {
	f.t.Helper()
	for range 3 {
		if _, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)}); err != nil {
			f.t.Fatalf("reconciling DockyardCluster: %v", err)
		}
	}
	dc := f.getDockyardCluster()
	if !ptr.Deref(dc.Status.Initialization.Provisioned, false) {
		f.t.Fatalf("DockyardCluster not provisioned: %+v", dc.Status.Conditions)
	}
	f.setClusterStatus(func(c *clusterv1.Cluster) {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	})
}

func (f *fixture) setClusterStatus(mutate func(*clusterv1.Cluster)) {
	f.t.Helper()
	c := &clusterv1.Cluster{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
		f.t.Fatal(err)
	}
	mutate(c)
	if err := f.c.Status().Update(f.ctx, c); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pauseCluster() {
	f.t.Helper()
	c := &clusterv1.Cluster{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.cluster), c); err != nil {
		f.t.Fatal(err)
	}
	c.Spec.Paused = ptr.To(true)
	if err := f.c.Update(f.ctx, c); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) getDockyardCluster() *infrav1.DockyardCluster {
	f.t.Helper()
	dc := &infrav1.DockyardCluster{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.dc), dc); err != nil {
		f.t.Fatal(err)
	}
	return dc
}

// machineObjects returns a Machine, its DockyardMachine and its bootstrap data secret.
func machineObjects(name string, controlPlane bool) (*clusterv1.Machine, *infrav1.DockyardMachine, *corev1.Secret) {
	labels := map[string]string{clusterv1.ClusterNameLabel: testCluster}
	if controlPlane {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	secretName := name + "-bootstrap"
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, Labels: labels, UID: types.UID("uid-" + name)},
		Spec: clusterv1.MachineSpec{
			ClusterName: testCluster,
			Version:     "v1.34.4",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(secretName)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardMachine", Name: name,
			},
			FailureDomain: "fd1",
		},
	}
	dm := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: testNS, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: m.UID}},
	}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: testNS, Labels: map[string]string{clusterv1.ClusterNameLabel: testCluster}},
		Data:       map[string][]byte{"value": []byte(testBootstrapData), "format": []byte("cloud-config")},
	}
	return m, dm, secret
}

func (f *fixture) reconcileMachine(name string) ctrl.Result {
	f.t.Helper()
	res, err := f.machineReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: name}})
	if err != nil {
		f.t.Fatalf("reconciling DockyardMachine %s: %v", name, err)
	}
	return res
}

// reconcileMachineErr reconciles and returns the error, for the branches that must fail.
func (f *fixture) reconcileMachineErr(name string) error {
	_, err := f.machineReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: name}})
	return err
}

func (f *fixture) getMachine(name string) *infrav1.DockyardMachine {
	f.t.Helper()
	dm := &infrav1.DockyardMachine{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: name}, dm); err != nil {
		f.t.Fatal(err)
	}
	return dm
}

// expectCondition asserts a condition's status and reason, and that its message contains the
// given fragments.
func expectCondition(t *testing.T, obj conditions.Getter, condType string, status metav1.ConditionStatus, reason string, fragments ...string) {
	t.Helper()
	c := conditions.Get(obj, condType)
	if c == nil {
		t.Fatalf("condition %s is not set; conditions: %+v", condType, obj.GetConditions())
	}
	if c.Status != status || c.Reason != reason {
		t.Fatalf("condition %s = %s/%s (%q), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
	}
	for _, frag := range fragments {
		if !strings.Contains(c.Message, frag) {
			t.Errorf("condition %s message %q does not contain %q", condType, c.Message, frag)
		}
	}
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// registerNode creates the workload cluster's Node a kubelet would register.
func (f *fixture) registerNode(name string) {
	f.t.Helper()
	if err := f.workload.Create(f.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		f.t.Fatal(err)
	}
}

// backdateBootstrap moves the start of a node's bootstrap into the past.
func (f *fixture) backdateBootstrap(node string, d time.Duration) {
	if !f.sim.BackdateBootstrap(node, d) {
		f.t.Fatalf("no node %s", node)
	}
}

// enginesOf resolves clusters to the node layer of f.nodes, the host's, kept while f.nodes is.
func (f *fixture) enginesOf() *infrastructure.Engines {
	if f.engines == nil || f.engines.Host() != f.nodes {
		f.engines = infrastructure.New(f.nodes, infrastructure.Options{Secrets: f.c})
	}
	return f.engines
}
