package controllers

import (
	"context"
	"testing"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// templateFixture is a DockyardMachineTemplate reconciler on a fake API server and engine.
type templateFixture struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	rt  *inmemory.Runtime
}

func newTemplateFixture(t *testing.T, objs ...client.Object) *templateFixture {
	t.Helper()
	return &templateFixture{
		t:   t,
		ctx: ctrl.LoggerInto(context.Background(), ctrl.Log),
		c: fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
			WithStatusSubresource(&infrav1.DockyardMachineTemplate{}).Build(),
		rt: inmemory.New(),
	}
}

func (f *templateFixture) reconcile(name string) (ctrl.Result, error) {
	r := &DockyardMachineTemplateReconciler{Client: f.c, Engines: infrastructure.New(docker.NewManager(f.rt, docker.ManagerOptions{}), infrastructure.Options{Secrets: f.c})}
	return r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: name}})
}

func (f *templateFixture) get(name string) *infrav1.DockyardMachineTemplate {
	f.t.Helper()
	t := &infrav1.DockyardMachineTemplate{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: name}, t); err != nil {
		f.t.Fatal(err)
	}
	return t
}

func machineTemplate(name string, res infrav1.NodeResources) *infrav1.DockyardMachineTemplate {
	return &infrav1.DockyardMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{
			Spec: infrav1.DockyardMachineSpec{Image: testNodeImage, Resources: res},
		}},
	}
}

// expectCapacity asserts the template's status.capacity and status.nodeInfo.
func expectCapacity(t *testing.T, mt *infrav1.DockyardMachineTemplate, cpu, memory string, arch infrav1.Architecture) {
	t.Helper()
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourcePods: "110"}
	for name, w := range want {
		got, ok := mt.Status.Capacity[name]
		if !ok {
			t.Errorf("status.capacity has no %s: %v", name, mt.Status.Capacity)
			continue
		}
		if got.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("status.capacity.%s = %s, want %s", name, got.String(), w)
		}
	}
	if len(mt.Status.Capacity) != len(want) {
		t.Errorf("status.capacity = %v, want exactly %v", mt.Status.Capacity, want)
	}
	if mt.Status.NodeInfo.OperatingSystem != "linux" || mt.Status.NodeInfo.Architecture != arch {
		t.Errorf("status.nodeInfo = %+v, want linux/%q", mt.Status.NodeInfo, arch)
	}
}

func TestTemplateCapacityFromEngineHost(t *testing.T) {
	f := newTemplateFixture(t, machineTemplate("host", infrav1.NodeResources{}))
	f.rt.SetHost(inmemory.Host{CPUs: 6, MemoryBytes: 16 << 30, Architecture: "aarch64"})
	res, err := f.reconcile("host")
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != templateResync {
		t.Errorf("RequeueAfter = %s, want the resync %s (the host may change)", res.RequeueAfter, templateResync)
	}
	expectCapacity(t, f.get("host"), "6", "16Gi", infrav1.ArchitectureArm64)

	// The engine's host changes: the next reconcile follows it.
	f.rt.SetHost(inmemory.Host{CPUs: 2, MemoryBytes: 4 << 30, Architecture: "x86_64"})
	if _, err := f.reconcile("host"); err != nil {
		t.Fatal(err)
	}
	expectCapacity(t, f.get("host"), "2", "4Gi", infrav1.ArchitectureAmd64)
}

func TestTemplateCapacityFromResources(t *testing.T) {
	f := newTemplateFixture(t,
		machineTemplate("both", infrav1.NodeResources{CPU: ptr.To(resource.MustParse("1500m")), Memory: ptr.To(resource.MustParse("2Gi"))}),
		machineTemplate("cpu-only", infrav1.NodeResources{CPU: ptr.To(resource.MustParse("2"))}),
		machineTemplate("memory-only", infrav1.NodeResources{Memory: ptr.To(resource.MustParse("3Gi"))}),
	)
	for _, name := range []string{"both", "cpu-only", "memory-only"} {
		if _, err := f.reconcile(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	expectCapacity(t, f.get("both"), "1500m", "2Gi", infrav1.ArchitectureAmd64)
	// A limit the template does not set is the host's (inmemory.DefaultHost: 4 CPUs, 8 GiB).
	expectCapacity(t, f.get("cpu-only"), "2", "8Gi", infrav1.ArchitectureAmd64)
	expectCapacity(t, f.get("memory-only"), "4", "3Gi", infrav1.ArchitectureAmd64)

	// The spec changes (the webhook forbids it outside topology dry-runs, the reconciler must
	// follow anyway): the status follows.
	mt := f.get("both")
	mt.Spec.Template.Spec.Resources.Memory = ptr.To(resource.MustParse("1Gi"))
	if err := f.c.Update(f.ctx, mt); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reconcile("both"); err != nil {
		t.Fatal(err)
	}
	expectCapacity(t, f.get("both"), "1500m", "1Gi", infrav1.ArchitectureAmd64)
}

func TestTemplateEngineErrorsLeaveStatus(t *testing.T) {
	f := newTemplateFixture(t, machineTemplate("t", infrav1.NodeResources{}))
	if _, err := f.reconcile("t"); err != nil {
		t.Fatal(err)
	}
	expectCapacity(t, f.get("t"), "4", "8Gi", infrav1.ArchitectureAmd64)
	before := f.get("t").ResourceVersion

	// The engine does not answer: an error (controller-runtime requeues with backoff), no
	// panic, and the published status stays.
	f.rt.SetInfoError(errors.New("dial unix /var/run/docker.sock: connect: connection refused"))
	f.rt.SetHost(inmemory.Host{CPUs: 1, MemoryBytes: 1 << 30, Architecture: "amd64"})
	if _, err := f.reconcile("t"); err == nil {
		t.Fatal("reconcile succeeded although the engine does not answer")
	}
	mt := f.get("t")
	expectCapacity(t, mt, "4", "8Gi", infrav1.ArchitectureAmd64)
	if mt.ResourceVersion != before {
		t.Errorf("the template was written while the engine did not answer (resourceVersion %s -> %s)", before, mt.ResourceVersion)
	}

	// The engine answers with nonsense: an error, the status stays.
	f.rt.SetInfoError(nil)
	f.rt.SetHost(inmemory.Host{CPUs: 0, MemoryBytes: 0, Architecture: "amd64"})
	if _, err := f.reconcile("t"); err == nil {
		t.Fatal("reconcile succeeded although the engine reports a host without CPUs")
	}
	expectCapacity(t, f.get("t"), "4", "8Gi", infrav1.ArchitectureAmd64)

	// The engine answers again.
	f.rt.SetHost(inmemory.Host{CPUs: 8, MemoryBytes: 32 << 30, Architecture: "amd64"})
	if _, err := f.reconcile("t"); err != nil {
		t.Fatal(err)
	}
	expectCapacity(t, f.get("t"), "8", "32Gi", infrav1.ArchitectureAmd64)
}

func TestTemplateArchitectureOutsideTheContract(t *testing.T) {
	f := newTemplateFixture(t, machineTemplate("t", infrav1.NodeResources{}))
	f.rt.SetHost(inmemory.Host{CPUs: 4, MemoryBytes: 8 << 30, Architecture: "riscv64"})
	if _, err := f.reconcile("t"); err != nil {
		t.Fatal(err)
	}
	// The CRD only admits the architectures Cluster API names: another one is left out.
	expectCapacity(t, f.get("t"), "4", "8Gi", "")
}

func TestTemplatePausedOrGone(t *testing.T) {
	paused := machineTemplate("paused", infrav1.NodeResources{})
	paused.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	ofPausedCluster := machineTemplate("of-paused-cluster", infrav1.NodeResources{})
	ofPausedCluster.Labels = map[string]string{clusterv1.ClusterNameLabel: testCluster}
	ofMissingCluster := machineTemplate("of-missing-cluster", infrav1.NodeResources{})
	ofMissingCluster.Labels = map[string]string{clusterv1.ClusterNameLabel: "gone"}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: testCluster, Namespace: testNS},
		Spec:       clusterv1.ClusterSpec{Paused: ptr.To(true)},
	}
	f := newTemplateFixture(t, paused, ofPausedCluster, ofMissingCluster, cluster)
	for _, name := range []string{"paused", "of-paused-cluster"} {
		if _, err := f.reconcile(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if st := f.get(name).Status; st.Capacity != nil || st.NodeInfo != (infrav1.NodeInfo{}) {
			t.Errorf("%s: paused, yet its status was written: %+v", name, st)
		}
		if f.rt.Calls["Info"] != 0 {
			t.Errorf("%s: paused, yet the engine was asked", name)
		}
	}
	// A template whose Cluster does not exist (yet) is not paused by it.
	if _, err := f.reconcile("of-missing-cluster"); err != nil {
		t.Fatal(err)
	}
	expectCapacity(t, f.get("of-missing-cluster"), "4", "8Gi", infrav1.ArchitectureAmd64)
	// A template that does not exist is nothing to do.
	if res, err := f.reconcile("missing"); err != nil || res.RequeueAfter != 0 {
		t.Errorf("reconciling a missing template: %+v, %v", res, err)
	}
}
