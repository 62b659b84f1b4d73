package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

var machineDeploymentsGVR = schema.GroupVersionResource{Group: clusterv1.GroupVersion.Group, Version: "v1beta2", Resource: "machinedeployments"}

// autoscalerProblems lists what keeps the autoscaler from building an honest template node of
// a node group at zero: capacity it cannot find or parse, and the node's architecture and
// operating system labels (empty without status.nodeInfo).
func autoscalerProblems(ng *autoscalerNodeGroup) []string {
	var problems []string
	for _, d := range ng.Dropped {
		problems = append(problems, "the autoscaler drops "+d)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		q, ok := ng.Template.Status.Capacity[name]
		if !ok || q.Sign() <= 0 {
			problems = append(problems, fmt.Sprintf("the template node has no positive %s capacity (status.capacity.%s of the infrastructure template)", name, name))
		}
	}
	if ng.Template.Status.NodeInfo.Architecture == "" || ng.Template.Labels[corev1.LabelArchStable] == "" {
		problems = append(problems, "the template node has no architecture (status.nodeInfo.architecture): its kubernetes.io/arch label is empty")
	}
	if ng.Template.Status.NodeInfo.OperatingSystem == "" || ng.Template.Labels[corev1.LabelOSStable] == "" {
		problems = append(problems, "the template node has no operating system (status.nodeInfo.operatingSystem): its kubernetes.io/os label is empty")
	}
	return problems
}

// contractEnv reads node groups from the envtest API server the way the autoscaler does.
type contractEnv struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	reader *autoscalerReader
}

func newContractEnv(t *testing.T) *contractEnv {
	t.Helper()
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "autoscaler")
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &contractEnv{t: t, ctx: ctx, ns: ns.Name, reader: &autoscalerReader{dynamic: dyn, discovery: disc}}
}

func (e *contractEnv) createTemplate(name string, res infrav1.NodeResources, annotations map[string]string) {
	e.t.Helper()
	mt := machineTemplate(name, res)
	mt.Namespace, mt.Annotations = e.ns, annotations
	if err := env.Client.Create(e.ctx, mt); err != nil {
		e.t.Fatal(err)
	}
}

// createMachineDeployment creates a MachineDeployment of zero replicas with the autoscaler's
// annotations, its machines made from the DockyardMachineTemplate named template. No Cluster
// API controller runs here: the MachineDeployment stays at zero, as a node group at zero does.
func (e *contractEnv) createMachineDeployment(name, template string, annotations map[string]string) {
	e.t.Helper()
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: annotations},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: testCluster,
			Replicas:    ptr.To[int32](0),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: name}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{
					clusterv1.MachineDeploymentNameLabel: name,
					"node-role.kubernetes.io/burst":      "",
					"team":                               "not-propagated-to-nodes",
				}},
				Spec: clusterv1.MachineSpec{
					ClusterName: testCluster,
					Version:     "v1.34.4",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardMachineTemplate", Name: template,
					},
					Taints: []clusterv1.MachineTaint{{Key: "dockyard.dev/burst", Value: "true", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways}},
				},
			},
		},
	}
	if err := env.Client.Create(e.ctx, md); err != nil {
		e.t.Fatal(err)
	}
}

// nodeGroup reads the MachineDeployment as the autoscaler does (unstructured, from the API
// server) and returns its node group.
func (e *contractEnv) nodeGroup(name string) (*autoscalerNodeGroup, error) {
	u, err := e.reader.dynamic.Resource(machineDeploymentsGVR).Namespace(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return e.reader.nodeGroup(e.ctx, u)
}

// expectNodeGroup waits until the autoscaler would see a node group at zero whose template node
// has the given cpu and memory and no problem, and returns it.
func (e *contractEnv) expectNodeGroup(md, cpu, memory string) *autoscalerNodeGroup {
	e.t.Helper()
	var ng *autoscalerNodeGroup
	eventually(e.t, 20*time.Second, fmt.Sprintf("the autoscaler's node group of MachineDeployment %s with cpu %s and memory %s", md, cpu, memory), func() error {
		var err error
		if ng, err = e.nodeGroup(md); err != nil {
			return err
		}
		if problems := autoscalerProblems(ng); len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		c, m := ng.Template.Status.Capacity[corev1.ResourceCPU], ng.Template.Status.Capacity[corev1.ResourceMemory]
		if c.Cmp(resource.MustParse(cpu)) != 0 || m.Cmp(resource.MustParse(memory)) != 0 {
			return errors.Errorf("the template node has cpu %s and memory %s", c.String(), m.String())
		}
		return nil
	})
	return ng
}

// TestAutoscalerContract creates a MachineDeployment at zero replicas with the autoscaler's
// min/max annotations, lets the real DockyardMachineTemplate reconciler (in envtest's manager,
// on the fake engine) publish the template's status, and reads everything along the paths the
// cluster autoscaler's clusterapi provider reads.
func TestAutoscalerContract(t *testing.T) {
	e := newContractEnv(t)
	// A host the node group's size can only have come from.
	envRuntime.SetHost(inmemory.Host{CPUs: 3, MemoryBytes: 5 << 30, Architecture: "aarch64"})
	t.Cleanup(func() { envRuntime.SetHost(inmemory.DefaultHost) })

	e.createTemplate("burst-host", infrav1.NodeResources{}, nil)
	e.createMachineDeployment("burst", "burst-host", map[string]string{
		caMinSizeKey: "0",
		caMaxSizeKey: "5",
		caLabelsKey:  "dockyard.dev/pool=burst",
		caTaintsKey:  "dedicated=burst:NoSchedule",
	})

	// The engine host case: no limits, the node is the host.
	ng := e.expectNodeGroup("burst", "3", "5Gi")
	if ng.MinSize != 0 || ng.MaxSize != 5 || ng.Replicas != 0 {
		t.Errorf("node group min/max/replicas = %d/%d/%d, want 0/5/0", ng.MinSize, ng.MaxSize, ng.Replicas)
	}
	if pods := ng.Template.Status.Capacity[corev1.ResourcePods]; pods.Value() != DefaultMaxPods {
		t.Errorf("template node pods = %s, want %d", pods.String(), DefaultMaxPods)
	}
	if _, ok := ng.Template.Status.Capacity[corev1.ResourceEphemeralStorage]; ok {
		t.Errorf("template node has ephemeral-storage %v, which Dockyard does not publish", ng.Template.Status.Capacity)
	}
	wantLabels := map[string]string{
		corev1.LabelArchStable:          "arm64",
		corev1.LabelOSStable:            "linux",
		corev1.LabelHostname:            "burst-asg-0",
		"node-role.kubernetes.io/burst": "",
		"dockyard.dev/pool":             "burst",
	}
	for k, v := range wantLabels {
		if got, ok := ng.Template.Labels[k]; !ok || got != v {
			t.Errorf("template node label %s = %q (set %t), want %q; labels: %v", k, got, ok, v, ng.Template.Labels)
		}
	}
	if _, ok := ng.Template.Labels["team"]; ok {
		t.Errorf("template node has label team, which Cluster API does not propagate to nodes: %v", ng.Template.Labels)
	}
	wantTaints := []corev1.Taint{
		{Key: "dockyard.dev/burst", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "burst", Effect: corev1.TaintEffectNoSchedule},
	}
	if !slices.EqualFunc(ng.Template.Spec.Taints, wantTaints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) {
		t.Errorf("template node taints = %v, want %v", ng.Template.Spec.Taints, wantTaints)
	}

	// Template specs are immutable (the webhook), so a "template change" never edits one in
	// place: the API server refuses it, and the status stays true to the spec.
	mt := &infrav1.DockyardMachineTemplate{}
	if err := env.Client.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "burst-host"}, mt); err != nil {
		t.Fatal(err)
	}
	mt.Spec.Template.Spec.Resources.CPU = ptr.To(resource.MustParse("1"))
	if err := env.Client.Update(e.ctx, mt); err == nil || !apierrors.IsInvalid(err) {
		t.Fatalf("changing a DockyardMachineTemplate's spec: %v, want it refused as invalid", err)
	}

	// The engine's host changes (another engine, more memory): the template's status follows
	// on its next reconcile (here woken by an annotation; the resync does it otherwise).
	envRuntime.SetHost(inmemory.Host{CPUs: 6, MemoryBytes: 12 << 30, Architecture: "x86_64"})
	if err := env.Client.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "burst-host"}, mt); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(mt.DeepCopy())
	mt.Annotations = map[string]string{"dockyard.dev/touched": "1"}
	if err := env.Client.Patch(e.ctx, mt, patch); err != nil {
		t.Fatal(err)
	}
	ng = e.expectNodeGroup("burst", "6", "12Gi")
	if got := ng.Template.Labels[corev1.LabelArchStable]; got != "amd64" {
		t.Errorf("template node kubernetes.io/arch = %q after the host changed, want amd64", got)
	}

	// The resources case, and the way a template changes: a new template, the
	// MachineDeployment pointed at it (what clusterctl users and ClusterClass do).
	e.createTemplate("burst-sized", infrav1.NodeResources{CPU: ptr.To(resource.MustParse("1500m")), Memory: ptr.To(resource.MustParse("2Gi"))}, nil)
	md := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "burst"}, md); err != nil {
		t.Fatal(err)
	}
	mdPatch := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.InfrastructureRef.Name = "burst-sized"
	if err := env.Client.Patch(e.ctx, md, mdPatch); err != nil {
		t.Fatal(err)
	}
	ng = e.expectNodeGroup("burst", "1500m", "2Gi")
	if got := ng.Template.Labels[corev1.LabelArchStable]; got != "amd64" {
		t.Errorf("template node kubernetes.io/arch = %q with limits, want the host's amd64", got)
	}
}

// TestAutoscalerReaderFindsGaps proves the reader fails, naming the path, when a template does
// not publish what the autoscaler needs: templates paused before the reconciler wrote their
// status, with a status written by hand.
func TestAutoscalerReaderFindsGaps(t *testing.T) {
	e := newContractEnv(t)
	paused := map[string]string{clusterv1.PausedAnnotation: ""}
	for _, c := range []struct {
		name   string
		status infrav1.DockyardMachineTemplateStatus
		want   []string
	}{
		{name: "empty", want: []string{"cannot scale from zero"}},
		{
			name:   "cpu-only",
			status: infrav1.DockyardMachineTemplateStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, NodeInfo: infrav1.NodeInfo{OperatingSystem: "linux", Architecture: "amd64"}},
			want:   []string{"cannot scale from zero", "status.capacity of DockyardMachineTemplate cpu-only: map[cpu:2]"},
		},
		{
			name:   "no-node-info",
			status: infrav1.DockyardMachineTemplateStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
			want:   []string{"status.nodeInfo.architecture", "status.nodeInfo.operatingSystem"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.createTemplate(c.name, infrav1.NodeResources{}, paused)
			mt := &infrav1.DockyardMachineTemplate{}
			if err := env.Client.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: c.name}, mt); err != nil {
				t.Fatal(err)
			}
			mt.Status = c.status
			if err := env.Client.Status().Update(e.ctx, mt); err != nil {
				t.Fatal(err)
			}
			e.createMachineDeployment(c.name, c.name, map[string]string{caMinSizeKey: "0", caMaxSizeKey: "2"})
			// The reconciler leaves paused templates alone: what was written stays.
			time.Sleep(500 * time.Millisecond)
			var msg string
			ng, err := e.nodeGroup(c.name)
			switch {
			case err != nil:
				msg = err.Error()
			default:
				msg = strings.Join(autoscalerProblems(ng), "; ")
			}
			if msg == "" {
				t.Fatalf("the reader finds nothing missing in %+v", c.status)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the reader says %q, want it to name %q", msg, w)
				}
			}
		})
	}

	// A MachineDeployment without the max-size annotation is no node group at all.
	e.createTemplate("unbounded", infrav1.NodeResources{}, nil)
	e.createMachineDeployment("unbounded", "unbounded", nil)
	if _, err := e.nodeGroup("unbounded"); err == nil || !strings.Contains(err.Error(), caMaxSizeKey) {
		t.Errorf("reading a MachineDeployment without %s: %v, want an error naming it", caMaxSizeKey, err)
	}
}

// TestAutoscalerTaintAnnotation checks the reader parses the taints annotation like the
// autoscaler's parseTaint, skipping (and reporting) what it cannot parse.
func TestAutoscalerTaintAnnotation(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAnnotations(map[string]string{caTaintsKey: "a=b:NoSchedule,c:NoExecute,d,e=f=g:NoSchedule"})
	taints, dropped := caTaints(u)
	want := []corev1.Taint{
		{Key: "a", Value: "b", Effect: corev1.TaintEffectNoSchedule},
		{Key: "c", Effect: corev1.TaintEffectNoExecute},
		{Key: "d"},
	}
	if !slices.Equal(taints, want) {
		t.Errorf("taints = %v, want %v", taints, want)
	}
	if len(dropped) != 1 || !strings.Contains(dropped[0], "e=f=g") {
		t.Errorf("dropped = %v, want the invalid e=f=g", dropped)
	}
}
