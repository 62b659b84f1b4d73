package capie2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	kcppkg "sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/desiredstate"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// Every test flavor renders with clusterctl's variable processor into objects of the right
// types, and carries what its spec needs.
func TestFlavorsRenderWithClusterctl(t *testing.T) {
	rendered := renderFlavors(t)
	find := func(file, kind string) *unstructured.Unstructured {
		for i, o := range rendered[file] {
			if o.GetKind() == kind {
				return &rendered[file][i]
			}
		}
		t.Fatalf("%s has no %s", file, kind)
		return nil
	}

	md := find("cluster-template-md-remediation.yaml", "MachineDeployment")
	if labels, _, _ := unstructured.NestedStringMap(md.Object, "spec", "template", "metadata", "labels"); labels["e2e.remediation.label"] != "" || len(labels) == 0 {
		t.Errorf("md-remediation: MachineDeployment template labels %v", labels)
	}
	find("cluster-template-md-remediation.yaml", "MachineHealthCheck")

	kcp := find("cluster-template-kcp-remediation.yaml", "KubeadmControlPlane")
	pre, _, _ := unstructured.NestedStringSlice(kcp.Object, "spec", "kubeadmConfigSpec", "preKubeadmCommands")
	if len(pre) == 0 || pre[len(pre)-1] != `./wait-signal.sh "tok" "https://mgmt:6443" "ns"` {
		t.Errorf("kcp-remediation: preKubeadmCommands %q", pre)
	}
	files2, _, _ := unstructured.NestedSlice(kcp.Object, "spec", "kubeadmConfigSpec", "files")
	script := ""
	for _, f := range files2 {
		if f.(map[string]any)["path"] == "/wait-signal.sh" {
			script = f.(map[string]any)["content"].(string)
		}
	}
	if !strings.Contains(script, `curl -k -s --header "Authorization: Bearer $TOKEN"`) || !strings.Contains(script, `jq -r '.data.signal?'`) {
		t.Errorf("kcp-remediation: wait-signal.sh:\n%s", script)
	}

	// kcp-adoption: step 1 makes the first control plane Machine by hand with the
	// KubeadmControlPlane's own kubeadmConfigSpec; step 2 adds the KubeadmControlPlane.
	steps := map[string][]string{}
	kubeadmConfig, adopter := &bootstrapv1.KubeadmConfig{}, &controlplanev1.KubeadmControlPlane{}
	for _, o := range rendered["cluster-template-kcp-adoption.yaml"] {
		for label := range o.GetLabels() {
			steps[label] = append(steps[label], o.GetKind())
		}
		switch o.GetKind() {
		case "KubeadmConfig":
			fromUnstructured(t, o, kubeadmConfig)
		case "KubeadmControlPlane":
			fromUnstructured(t, o, adopter)
		}
	}
	if got := strings.Join(steps["kcp-adoption.step1"], " "); got != "Cluster DockyardCluster DockyardMachine KubeadmConfig Machine" {
		t.Errorf("kcp-adoption step 1: %s", got)
	}
	if got := strings.Join(steps["kcp-adoption.step2"], " "); got != "Cluster DockyardCluster DockyardMachineTemplate KubeadmControlPlane" {
		t.Errorf("kcp-adoption step 2: %s", got)
	}
	// The KubeadmControlPlane adopts the machine without a rollout only if the hand-made
	// KubeadmConfig is what it would make for kubeadm init: asked here of its own code (which
	// also adds the feature gates it defaults for the version).
	desired, err := desiredstate.ComputeDesiredKubeadmConfig(adopter, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}, false, kubeadmConfig.Name, kubeadmConfig)
	if err != nil {
		t.Fatal(err)
	}
	desired, current := kcppkg.PrepareKubeadmConfigsForDiff(desired, kubeadmConfig, false)
	if diff := cmp.Diff(current.Spec, desired.Spec); diff != "" {
		t.Errorf("kcp-adoption: the KubeadmControlPlane would roll out the hand-made control plane machine (-hand-made +wanted):\n%s", diff)
	}

	// The flavors whose clusters host providers: the engine's socket and the providers' images;
	// the clusterctl upgrade spec's management cluster also pulls from the release's registry.
	for _, flavor := range []string{"cluster-template-self-hosted.yaml", "cluster-template-clusterctl-upgrade-management.yaml"} {
		registry := ""
		for _, o := range rendered[flavor] {
			if o.GetKind() == "DockyardCluster" {
				registry, _, _ = unstructured.NestedString(o.Object, "spec", "registry")
			}
			if o.GetKind() != "DockyardMachineTemplate" {
				continue
			}
			images, _, err := unstructured.NestedStringSlice(o.Object, "spec", "template", "spec", "preLoadImages")
			if err != nil || len(images) != 2 {
				t.Errorf("%s: %s preLoadImages %v %v", flavor, o.GetName(), images, err)
			}
			mounts, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "extraMounts")
			if len(mounts) != 1 {
				t.Errorf("%s: %s extraMounts %v", flavor, o.GetName(), mounts)
			}
		}
		if want := map[bool]string{true: "dockyard-e2e-release"}[strings.Contains(flavor, "clusterctl-upgrade")]; registry != want {
			t.Errorf("%s: the DockyardCluster's registry is %q, want %q", flavor, registry, want)
		}
	}

	// The conformance flavors: the cluster on kubetest's network, the tests' images loaded into
	// every node.
	for _, flavor := range []string{"cluster-template-conformance.yaml", "cluster-template-upgrades.yaml"} {
		found := false
		for _, o := range rendered[flavor] {
			if o.GetKind() != "DockyardCluster" {
				continue
			}
			found = true
			network, _, _ := unstructured.NestedString(o.Object, "spec", "network", "existing", "name")
			images, _, err := unstructured.NestedStringSlice(o.Object, "spec", "loadImages")
			if network != ConformanceNetwork || err != nil || len(images) != 2 || images[1] != "localhost/conformance/e2e/pause:3.10.1" {
				t.Errorf("%s: network %q, loadImages %v %v", flavor, network, images, err)
			}
		}
		if !found {
			t.Errorf("%s: no DockyardCluster", flavor)
		}
	}
}

// The in-memory flavors: every cluster's nodes in the manager's memory; the machine pool's
// instances made as the shipped in-memory flavor's workers, and no MachineDeployment beside it;
// the rollout flavor's taints; the remediation flavor's label and MachineHealthCheck.
func TestInMemoryFlavors(t *testing.T) {
	rendered := renderFlavors(t)
	kinds := func(file string) map[string][]unstructured.Unstructured {
		t.Helper()
		out := map[string][]unstructured.Unstructured{}
		for _, o := range rendered[file] {
			out[o.GetKind()] = append(out[o.GetKind()], o)
		}
		if len(out) == 0 {
			t.Fatalf("no flavor %s", file)
		}
		return out
	}
	inMemory := func(file string, objs map[string][]unstructured.Unstructured) {
		t.Helper()
		if !nodesInMemory(objs) {
			t.Errorf("%s: the cluster's nodes are not in memory", file)
		}
	}

	pool := kinds("cluster-template-in-memory-machine-pool.yaml")
	inMemory("in-memory-machine-pool", pool)
	if len(pool["MachineDeployment"]) != 0 || len(pool["KubeadmConfigTemplate"]) != 0 || len(pool["MachinePool"]) != 1 || len(pool["DockyardMachineTemplate"]) != 1 {
		t.Fatalf("in-memory-machine-pool: %d MachineDeployments, %d KubeadmConfigTemplates, %d MachinePools, %d DockyardMachineTemplates; want 0, 0, 1 and the control plane's",
			len(pool["MachineDeployment"]), len(pool["KubeadmConfigTemplate"]), len(pool["MachinePool"]), len(pool["DockyardMachineTemplate"]))
	}
	mp, config, dmp := &clusterv1.MachinePool{}, &bootstrapv1.KubeadmConfig{}, &infrav1.DockyardMachinePool{}
	fromUnstructured(t, pool["MachinePool"][0], mp)
	fromUnstructured(t, pool["KubeadmConfig"][0], config)
	fromUnstructured(t, pool["DockyardMachinePool"][0], dmp)
	if got := ptr.Deref(mp.Spec.Replicas, -1); got != 2 {
		t.Errorf("in-memory-machine-pool: %d replicas, want WORKER_MACHINE_COUNT", got)
	}
	if ref := mp.Spec.Template.Spec.Bootstrap.ConfigRef; ref.Kind != "KubeadmConfig" || ref.Name != config.Name {
		t.Errorf("in-memory-machine-pool: the pool's bootstrap is %s %s, not its KubeadmConfig %s", ref.Kind, ref.Name, config.Name)
	}
	if ref := mp.Spec.Template.Spec.InfrastructureRef; ref.Kind != "DockyardMachinePool" || ref.Name != dmp.Name {
		t.Errorf("in-memory-machine-pool: the pool's infrastructure is %s %s, not its DockyardMachinePool %s", ref.Kind, ref.Name, dmp.Name)
	}
	// What the shipped in-memory flavor's workers are made with: their node name from the
	// simulated node's metadata, the manager's node image of the Machine's version.
	if name := config.Spec.JoinConfiguration.NodeRegistration.Name; name != "{{ ds.meta_data.local_hostname }}" {
		t.Errorf("in-memory-machine-pool: instances join as %q", name)
	}
	if dmp.Spec.Template.Image != "" {
		t.Errorf("in-memory-machine-pool: instances run image %q, not the Machine's version", dmp.Spec.Template.Image)
	}

	remediation := kinds("cluster-template-in-memory-md-remediation.yaml")
	inMemory("in-memory-md-remediation", remediation)
	if len(remediation["MachineHealthCheck"]) != 1 || len(remediation["MachineDeployment"]) != 1 {
		t.Fatalf("in-memory-md-remediation: %d MachineHealthChecks, %d MachineDeployments", len(remediation["MachineHealthCheck"]), len(remediation["MachineDeployment"]))
	}
	mhc := &clusterv1.MachineHealthCheck{}
	fromUnstructured(t, remediation["MachineHealthCheck"][0], mhc)
	labels, _, _ := unstructured.NestedStringMap(remediation["MachineDeployment"][0].Object, "spec", "template", "metadata", "labels")
	if _, ok := labels["e2e.remediation.label"]; !ok || mhc.Spec.Selector.MatchLabels["e2e.remediation.label"] != "" || len(mhc.Spec.Checks.UnhealthyNodeConditions) != 1 ||
		mhc.Spec.Checks.UnhealthyNodeConditions[0].Type != "e2e.remediation.condition" {
		t.Errorf("in-memory-md-remediation: workers labelled %v, MachineHealthCheck selector %v, conditions %v", labels, mhc.Spec.Selector.MatchLabels, mhc.Spec.Checks.UnhealthyNodeConditions)
	}

	taints := kinds("cluster-template-in-memory-topology-taints.yaml")
	inMemory("in-memory-topology-taints", taints)
	cluster := &clusterv1.Cluster{}
	fromUnstructured(t, taints["Cluster"][0], cluster)
	if len(cluster.Spec.Topology.ControlPlane.Taints) != 2 || len(cluster.Spec.Topology.Workers.MachineDeployments) == 0 ||
		len(cluster.Spec.Topology.Workers.MachineDeployments[0].Taints) != 2 {
		t.Errorf("in-memory-topology-taints: control plane taints %v, workers %v", cluster.Spec.Topology.ControlPlane.Taints, cluster.Spec.Topology.Workers.MachineDeployments)
	}
}

// nodesInMemory tells whether a flavor's objects, by kind, make a cluster whose nodes are in
// the manager's memory: its DockyardCluster's spec.infrastructure.inMemory, or its topology's
// inMemory variable.
func nodesInMemory(objs map[string][]unstructured.Unstructured) bool {
	if cluster := objs["DockyardCluster"]; len(cluster) == 1 {
		if _, found, _ := unstructured.NestedMap(cluster[0].Object, "spec", "infrastructure", "inMemory"); found {
			return true
		}
	}
	if cluster := objs["Cluster"]; len(cluster) == 1 {
		variables, _, _ := unstructured.NestedSlice(cluster[0].Object, "spec", "topology", "variables")
		for _, v := range variables {
			if v.(map[string]any)["name"] == "inMemory" && v.(map[string]any)["value"] == true {
				return true
			}
		}
	}
	return false
}

// renderFlavors writes the test flavors from the repository's templates and renders each with
// clusterctl's variable processor into objects, by file name; a KubeadmControlPlane's replicas
// must be a number.
func renderFlavors(t *testing.T) map[string][]unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	files, err := WriteFlavors(filepath.Join("..", "..", "templates"), dir)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"CLUSTER_NAME": "c1", "NAMESPACE": "ns", "KUBERNETES_VERSION": "v1.34.4",
		"CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "2",
		"TOKEN": "tok", "SERVER": "https://mgmt:6443", "DOCKYARD_PRELOAD_IMAGES": "[a:v1, b:v2]",
		"DOCKYARD_CONFORMANCE_IMAGES": "[localhost/conformance/e2e/agnhost:2.56, localhost/conformance/e2e/pause:3.10.1]",
		"DOCKYARD_RELEASE_REGISTRY":   "dockyard-e2e-release",
	}
	rendered := map[string][]unstructured.Unstructured{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
			if v, ok := vars[name]; ok {
				return v, nil
			}
			return "", os.ErrNotExist
		})
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		objs, err := utilyaml.ToUnstructured(out)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		rendered[filepath.Base(f)] = objs
		for _, o := range objs {
			if o.GetKind() == "KubeadmControlPlane" {
				switch r, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); r.(type) {
				case int64, float64:
				default:
					t.Errorf("%s: KubeadmControlPlane replicas is %T %v, not a number", filepath.Base(f), r, r)
				}
			}
		}
	}
	return rendered
}

// fromUnstructured converts a rendered object into its typed form, failing on any field the
// type does not have.
func fromUnstructured(t *testing.T, o unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
