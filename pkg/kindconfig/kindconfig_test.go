package kindconfig

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// generated is templates/cluster-template.yaml for cluster dev with its variables' defaults, as
// clusterctl generates it.
func generated(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile("../../templates/cluster-template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CLUSTER_NAME": "dev", "NAMESPACE": "default", "KUBERNETES_VERSION": "v1.34.4",
		"CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1"}
	text := regexp.MustCompile(`\$\{([A-Z_]+)(:=([^}]*))?\}`).ReplaceAllStringFunc(string(raw), func(m string) string {
		parts := regexp.MustCompile(`\$\{([A-Z_]+)(:=([^}]*))?\}`).FindStringSubmatch(m)
		if v, ok := vars[parts[1]]; ok {
			return v
		}
		return parts[3]
	})
	objs, err := capiyaml.ToUnstructured([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*unstructured.Unstructured, len(objs))
	for i := range objs {
		out[i] = &objs[i]
	}
	return out
}

func apply(t *testing.T, config string) []*unstructured.Unstructured {
	t.Helper()
	cfg, err := Load([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Apply(cfg, "dev", generated(t))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// get finds one object by kind and name, typed.
func get[T runtime.Object](t *testing.T, objs []*unstructured.Unstructured, kind, name string, into T) T {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				t.Fatal(err)
			}
			return into
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return into
}

func arg(args []bootstrapv1.Arg, name string) string {
	for _, a := range args {
		if a.Name == name && a.Value != nil {
			return *a.Value
		}
	}
	return ""
}

const header = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"

// kind's configuration guide: "Multi-node clusters" and "Control-plane HA".
func TestNodesBecomeTheControlPlaneAndMachineDeployments(t *testing.T) {
	objs := apply(t, header+`nodes:
- role: control-plane
- role: control-plane
- role: control-plane
- role: worker
- role: worker
- role: worker
`)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	if *kcp.Spec.Replicas != 3 {
		t.Errorf("control plane replicas %d, want 3", *kcp.Spec.Replicas)
	}
	if kcp.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.Taints != nil {
		t.Error("a cluster with workers keeps the control plane's taint")
	}
	md := get(t, objs, "MachineDeployment", "dev-md-0", &clusterv1.MachineDeployment{})
	if *md.Spec.Replicas != 3 {
		t.Errorf("workers %d, want 3", *md.Spec.Replicas)
	}
}

// kind's default, one control plane node, schedules pods on it.
func TestOneNodeIsASchedulableControlPlane(t *testing.T) {
	objs := apply(t, header)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	for _, reg := range []bootstrapv1.NodeRegistrationOptions{kcp.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration, kcp.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration} {
		if reg.Taints == nil || len(*reg.Taints) != 0 {
			t.Errorf("taints %v, want none", reg.Taints)
		}
	}
	md := get(t, objs, "MachineDeployment", "dev-md-0", &clusterv1.MachineDeployment{})
	if *md.Spec.Replicas != 0 {
		t.Errorf("workers %d, want 0", *md.Spec.Replicas)
	}
}

// Workers that differ become a MachineDeployment each, with their own templates.
func TestWorkerGroups(t *testing.T) {
	objs := apply(t, header+`nodes:
- role: control-plane
  labels: {tier: control}
- role: worker
  labels: {tier: frontend}
  extraPortMappings:
  - {containerPort: 30080, hostPort: 8080, protocol: TCP, listenAddress: 127.0.0.1}
- role: worker
  labels: {tier: backend}
  extraMounts:
  - {hostPath: /srv/data, containerPath: /data, readOnly: true}
- role: worker
  labels: {tier: backend}
  extraMounts:
  - {hostPath: /srv/data, containerPath: /data, readOnly: true}
`)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	if got := arg(kcp.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels"); got != "tier=control" {
		t.Errorf("control plane node-labels %q", got)
	}
	front := get(t, objs, "DockyardMachineTemplate", "dev-md-0", &infrav1.DockyardMachineTemplate{})
	if p := front.Spec.Template.Spec.Ports; len(p) != 1 || p[0].ContainerPort != 30080 || p[0].HostPort != 8080 || p[0].ListenAddress != "127.0.0.1" {
		t.Errorf("frontend ports %+v", p)
	}
	back := get(t, objs, "DockyardMachineTemplate", "dev-md-1", &infrav1.DockyardMachineTemplate{})
	if m := back.Spec.Template.Spec.ExtraMounts; len(m) != 1 || m[0].HostPath != "/srv/data" || !m[0].ReadOnly {
		t.Errorf("backend mounts %+v", m)
	}
	md := get(t, objs, "MachineDeployment", "dev-md-1", &clusterv1.MachineDeployment{})
	if *md.Spec.Replicas != 2 || md.Spec.Template.Spec.InfrastructureRef.Name != "dev-md-1" || md.Spec.Template.Spec.Bootstrap.ConfigRef.Name != "dev-md-1" {
		t.Errorf("backend MachineDeployment %d replicas, refs %s %s", *md.Spec.Replicas, md.Spec.Template.Spec.InfrastructureRef.Name, md.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
	}
	ct := get(t, objs, "KubeadmConfigTemplate", "dev-md-1", &bootstrapv1.KubeadmConfigTemplate{})
	if got := arg(ct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels"); got != "tier=backend" {
		t.Errorf("backend node-labels %q", got)
	}
	if got := arg(ct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "eviction-hard"); got == "" {
		t.Error("the flavor's kubelet flags were lost")
	}
}

// kind's configuration guide: "Feature Gates", "Runtime Config", "Networking".
func TestClusterSettings(t *testing.T) {
	objs := apply(t, header+`featureGates:
  "CSIMigration": true
  "InPlacePodVerticalScaling": false
runtimeConfig:
  "api/alpha": "false"
networking:
  apiServerAddress: "127.0.0.1"
  apiServerPort: 6443
  podSubnet: "10.240.0.0/16"
  serviceSubnet: "10.0.0.0/16"
`)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	cc := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration
	const gates = "CSIMigration=true,InPlacePodVerticalScaling=false"
	for what, args := range map[string][]bootstrapv1.Arg{
		"API server": cc.APIServer.ExtraArgs, "controller manager": cc.ControllerManager.ExtraArgs, "scheduler": cc.Scheduler.ExtraArgs,
		"kubelet": kcp.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.KubeletExtraArgs,
	} {
		if got := arg(args, "feature-gates"); got != gates {
			t.Errorf("%s feature-gates %q, want %q", what, got, gates)
		}
	}
	if got := arg(cc.APIServer.ExtraArgs, "runtime-config"); got != "api/alpha=false" {
		t.Errorf("runtime-config %q", got)
	}
	if got := arg(cc.ControllerManager.ExtraArgs, "leader-elect-lease-duration"); got != "60s" {
		t.Errorf("the flavor's controller manager flags were lost: %q", got)
	}
	cluster := get(t, objs, "Cluster", "dev", &clusterv1.Cluster{})
	if p, s := cluster.Spec.ClusterNetwork.Pods.CIDRBlocks, cluster.Spec.ClusterNetwork.Services.CIDRBlocks; len(p) != 1 || p[0] != "10.240.0.0/16" || len(s) != 1 || s[0] != "10.0.0.0/16" {
		t.Errorf("pods %v, services %v", p, s)
	}
	dc := get(t, objs, "DockyardCluster", "dev", &infrav1.DockyardCluster{})
	if dc.Spec.LoadBalancer.HostPort != 6443 {
		t.Errorf("host port %d, want 6443", dc.Spec.LoadBalancer.HostPort)
	}
}

func TestFlavorOfTheIPFamily(t *testing.T) {
	for family, want := range map[string]string{"": "", "ipv4": "", "ipv6": "ipv6", "dual": "dual-stack"} {
		cfg, err := Load([]byte(header + "networking: {ipFamily: \"" + family + "\"}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Flavor(cfg); err != nil || got != want {
			t.Errorf("%q: flavor %q, %v; want %q", family, got, err, want)
		}
	}
}

// What Dockyard cannot honour is refused with its field named, never dropped.
func TestRefusals(t *testing.T) {
	for config, field := range map[string]string{
		"networking: {kubeProxyMode: ipvs}":                                                               "networking.kubeProxyMode",
		"networking: {kubeProxyMode: nftables}":                                                           "networking.kubeProxyMode",
		"networking: {apiServerAddress: 0.0.0.0}":                                                         "networking.apiServerAddress",
		"networking: {podSubnet: 10.244.0.0}":                                                             "networking.podSubnet",
		"networking: {ipFamily: ipv5}":                                                                    "networking.ipFamily",
		"kubeadmConfigPatches: ['kind: KubeProxyConfiguration']":                                          "kubeadmConfigPatches[0].kind",
		"kubeadmConfigPatches: ['{kind: ClusterConfiguration, networking: {dnsDomain: x}}']":              "ClusterConfiguration field networking",
		"kubeadmConfigPatches: ['{kind: ClusterConfiguration, apiServer: {timeoutForControlPlane: 4m}}']": "apiServer.timeoutForControlPlane",
		"kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta3, kind: ClusterConfiguration, patch: '[{op: add, path: /networking, value: {dnsDomain: x}}]'}]":                               "ClusterConfiguration field networking",
		"kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta3, kind: ClusterConfiguration, patch: '[{op: add, path: /etcd/local/dataDir, value: /x}]'}]":                                   "kubeadmConfigPatchesJSON6902[0].patch",
		"kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta2, kind: ClusterConfiguration, patch: '[]'}]":                                                                                  "kubeadmConfigPatchesJSON6902[0].version",
		"kubeadmConfigPatchesJSON6902: [{group: kubeproxy.config.k8s.io, version: v1alpha1, kind: KubeProxyConfiguration, patch: '[]'}]":                                                                      "kubeadmConfigPatchesJSON6902[0].kind",
		"kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta3, kind: ClusterConfiguration, patch: 'op: add'}]":                                                                             "kubeadmConfigPatchesJSON6902[0].patch",
		"nodes: [{role: control-plane, kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta4, kind: InitConfiguration, patch: '[{op: add, path: /nodeRegistration/taints, value: []}]'}]}]": "InitConfiguration field nodeRegistration.taints",
		"nodes: [{role: control-plane}, {role: control-plane, image: other:v1}]":                                                                                                                              "nodes[1]",
		"nodes: [{role: control-plane}, {role: worker, extraMounts: [{hostPath: /a, containerPath: /a, propagation: Bidirectional}]}]":                                                                        "nodes[1].extraMounts[0].propagation",
		"nodes: [{role: control-plane}, {role: worker, extraPortMappings: [{containerPort: 80, hostPort: 80}]}, {role: worker, extraPortMappings: [{containerPort: 80, hostPort: 80}]}]":                      "nodes[1].extraPortMappings[0].hostPort",
		"nodes: [{role: control-plane}, {role: worker, extraPortMappings: [{containerPort: 80, protocol: SCTP}]}]":                                                                                            "nodes[1].extraPortMappings[0].protocol",
		"nodes: [{role: worker}]": "nodes",
		"nodes: [{role: etcd}]":   "nodes[0].role",
	} {
		cfg, err := Load([]byte(header + config + "\n"))
		if err != nil {
			t.Fatalf("%s: %v", config, err)
		}
		_, err = Apply(cfg, "dev", generated(t))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v, want one naming %s", config, err, field)
		}
	}
}

func TestLoadRefusesWhatIsNotKindsV1alpha4(t *testing.T) {
	for _, config := range []string{
		"kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha3\n",
		"kind: Node\napiVersion: kind.x-k8s.io/v1alpha4\n",
		header + "nodes: [{role: worker, cpus: 2}]\n", // no such field: kind would refuse it too
	} {
		if _, err := Load([]byte(config)); err == nil {
			t.Errorf("%q: no error", config)
		}
	}
}

// kind's configuration guide: "Ingress" (a label through InitConfiguration, ports 80 and 443),
// "Kubeadm Config Patches" (the API server's flags, the kubelet's configuration).
func TestKubeadmConfigPatches(t *testing.T) {
	objs := apply(t, header+`kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  apiServer:
    extraArgs:
      enable-admission-plugins: NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook
    certSANs: [dev.example]
nodes:
- role: control-plane
  kubeadmConfigPatches:
  - |
    kind: InitConfiguration
    nodeRegistration:
      kubeletExtraArgs:
        node-labels: "ingress-ready=true"
  extraPortMappings:
  - {containerPort: 80, hostPort: 8080, protocol: TCP}
  - {containerPort: 443, hostPort: 8443, protocol: TCP}
- role: worker
  kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    maxPods: 150
  - |
    kind: JoinConfiguration
    nodeRegistration:
      kubeletExtraArgs:
      - {name: v, value: "4"}
`)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	spec := kcp.Spec.KubeadmConfigSpec
	if got := arg(spec.ClusterConfiguration.APIServer.ExtraArgs, "enable-admission-plugins"); got != "NodeRestriction,MutatingAdmissionWebhook,ValidatingAdmissionWebhook" {
		t.Errorf("enable-admission-plugins %q", got)
	}
	if sans := spec.ClusterConfiguration.APIServer.CertSANs; !slices.Contains(sans, "dev.example") || !slices.Contains(sans, "127.0.0.1") {
		t.Errorf("certSANs %v: want the patch's added to the flavor's", sans)
	}
	if got := arg(spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels"); got != "ingress-ready=true" {
		t.Errorf("init node-labels %q", got)
	}
	if got := arg(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels"); got != "" {
		t.Errorf("join node-labels %q: an InitConfiguration patch is for the first control plane node only", got)
	}
	ct := get(t, objs, "KubeadmConfigTemplate", "dev-md-0", &bootstrapv1.KubeadmConfigTemplate{})
	join := ct.Spec.Template.Spec.JoinConfiguration
	if got := arg(join.NodeRegistration.KubeletExtraArgs, "v"); got != "4" {
		t.Errorf("worker kubelet -v %q", got)
	}
	if join.Patches.Directory != "/etc/dockyard/kubeadm-patches" {
		t.Errorf("worker patches directory %q", join.Patches.Directory)
	}
	files := ct.Spec.Template.Spec.Files
	if len(files) != 1 || files[0].Path != "/etc/dockyard/kubeadm-patches/kubeletconfiguration100+strategic.yaml" || files[0].Content != "maxPods: 150\n" {
		t.Errorf("worker files %+v", files)
	}
	for _, f := range spec.Files {
		if strings.Contains(f.Path, "kubeletconfiguration") {
			t.Errorf("the control plane got the worker's kubelet patch %s", f.Path)
		}
	}
}

func TestApplyNamesTheObjectAFlavorLacks(t *testing.T) {
	cfg, err := Load([]byte(header))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, u := range generated(t) {
		if u.GetKind() != "KubeadmConfigTemplate" {
			objs = append(objs, u)
		}
	}
	if _, err := Apply(cfg, "dev", objs); err == nil || !strings.Contains(err.Error(), "KubeadmConfigTemplate dev-md-0") {
		t.Errorf("error %v, want one naming KubeadmConfigTemplate dev-md-0", err)
	}
}

// kind's configuration guide: "Kubeadm Config Patches", JSON 6902 (a SAN added to the API
// server's certificate); and patches of each kind and version Cluster API's fields can carry.
func TestKubeadmConfigPatchesJSON6902(t *testing.T) {
	objs := apply(t, header+`kubeadmConfigPatchesJSON6902:
- group: kubeadm.k8s.io
  version: v1beta3
  kind: ClusterConfiguration
  patch: |
    - op: add
      path: /apiServer/certSANs/-
      value: my-hostname
- group: kubeadm.k8s.io
  version: v1beta4
  kind: ClusterConfiguration
  patch: |
    - op: add
      path: /scheduler/extraArgs/-
      value: {name: v, value: "5"}
- group: kubeadm.k8s.io
  version: v1beta4
  kind: JoinConfiguration
  patch: |
    - op: add
      path: /nodeRegistration/kubeletExtraArgs/-
      value: {name: v, value: "3"}
nodes:
- role: control-plane
  kubeadmConfigPatchesJSON6902:
  - group: kubeadm.k8s.io
    version: v1beta3
    kind: InitConfiguration
    patch: |
      - op: add
        path: /nodeRegistration/kubeletExtraArgs/node-labels
        value: ingress-ready=true
- role: worker
  kubeadmConfigPatchesJSON6902:
  - group: kubelet.config.k8s.io
    version: v1beta1
    kind: KubeletConfiguration
    patch: |
      - op: replace
        path: /maxPods
        value: 150
`)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	spec := kcp.Spec.KubeadmConfigSpec
	if sans := spec.ClusterConfiguration.APIServer.CertSANs; !slices.Contains(sans, "my-hostname") || !slices.Contains(sans, "127.0.0.1") {
		t.Errorf("certSANs %v: want my-hostname after the flavor's", sans)
	}
	if got := arg(spec.ClusterConfiguration.Scheduler.ExtraArgs, "v"); got != "5" {
		t.Errorf("scheduler -v %q", got)
	}
	if got := arg(spec.ClusterConfiguration.Scheduler.ExtraArgs, "leader-elect-lease-duration"); got == "" {
		t.Errorf("scheduler args %+v: the flavor's were lost", spec.ClusterConfiguration.Scheduler.ExtraArgs)
	}
	if got := arg(spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels"); got != "ingress-ready=true" {
		t.Errorf("init node-labels %q", got)
	}
	if got := arg(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "v"); got != "3" {
		t.Errorf("control plane join -v %q", got)
	}
	ct := get(t, objs, "KubeadmConfigTemplate", "dev-md-0", &bootstrapv1.KubeadmConfigTemplate{})
	join := ct.Spec.Template.Spec.JoinConfiguration
	if got := arg(join.NodeRegistration.KubeletExtraArgs, "v"); got != "3" {
		t.Errorf("worker join -v %q", got)
	}
	files := ct.Spec.Template.Spec.Files
	if len(files) != 1 || files[0].Path != "/etc/dockyard/kubeadm-patches/kubeletconfiguration200+json.json" ||
		files[0].Content != `[{"op":"replace","path":"/maxPods","value":150}]` || join.Patches.Directory != "/etc/dockyard/kubeadm-patches" {
		t.Errorf("worker files %+v, patches %q", files, join.Patches.Directory)
	}
}

// A JSON 6902 patch may remove what the flavor set, as in kind it may remove what kind set.
func TestKubeadmConfigPatchesJSON6902Remove(t *testing.T) {
	before := get(t, generated(t), "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	n := len(before.Spec.KubeadmConfigSpec.ClusterConfiguration.ControllerManager.ExtraArgs)
	if n == 0 {
		t.Fatal("the flavor sets no controller manager argument to remove")
	}
	objs := apply(t, header+`kubeadmConfigPatchesJSON6902:
- group: kubeadm.k8s.io
  version: v1beta4
  kind: ClusterConfiguration
  patch: '[{op: remove, path: /controllerManager/extraArgs/0}]'
`)
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	after := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.ControllerManager.ExtraArgs
	if len(after) != n-1 || slices.ContainsFunc(after, func(a bootstrapv1.Arg) bool {
		return a.Name == before.Spec.KubeadmConfigSpec.ClusterConfiguration.ControllerManager.ExtraArgs[0].Name
	}) {
		t.Errorf("controller manager args %+v, want the first of %+v removed", after, before.Spec.KubeadmConfigSpec.ClusterConfiguration.ControllerManager.ExtraArgs)
	}
}

// kind's configuration guide: "Disable Default CNI" (a CNI such as Calico installed after).
func TestDisableDefaultCNI(t *testing.T) {
	objs := apply(t, header+"networking: {disableDefaultCNI: true}\n")
	spec := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	for _, f := range spec.Files {
		if f.Path == "/etc/dockyard/install-cni.sh" {
			t.Error("the control plane still gets the CNI installation script")
		}
	}
	if slices.Contains(spec.PostKubeadmCommands, "sh /etc/dockyard/install-cni.sh") {
		t.Errorf("the control plane still installs the CNI: %v", spec.PostKubeadmCommands)
	}
	if len(spec.Files) == 0 {
		t.Error("the flavor's other files were dropped")
	}
	// Without the setting the flavor installs it (what the test above removes is there).
	spec = get(t, apply(t, header), "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	if !slices.Contains(spec.PostKubeadmCommands, "sh /etc/dockyard/install-cni.sh") {
		t.Errorf("the flavor's post-kubeadm commands %v do not install the CNI", spec.PostKubeadmCommands)
	}
}

// kind's configuration guide: "kube-proxy" mode none (a CNI that replaces it installed after).
func TestKubeProxyModeNone(t *testing.T) {
	spec := get(t, apply(t, header+"networking: {kubeProxyMode: none}\n"), "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	if !slices.Contains(spec.InitConfiguration.SkipPhases, "addon/kube-proxy") {
		t.Errorf("skipPhases %v, want addon/kube-proxy", spec.InitConfiguration.SkipPhases)
	}
	spec = get(t, apply(t, header+"networking: {kubeProxyMode: iptables}\n"), "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	if slices.Contains(spec.InitConfiguration.SkipPhases, "addon/kube-proxy") {
		t.Errorf("iptables mode skips kube-proxy: %v", spec.InitConfiguration.SkipPhases)
	}
}

// kind's networking.dnsSearch: every node's search list, empty included (no search domain).
func TestDNSSearch(t *testing.T) {
	objs := apply(t, header+"networking: {dnsSearch: [corp.example]}\nnodes: [{role: control-plane}, {role: worker}]\n")
	for _, name := range []string{"dev-control-plane", "dev-md-0"} {
		mt := get(t, objs, "DockyardMachineTemplate", name, &infrav1.DockyardMachineTemplate{})
		if s := mt.Spec.Template.Spec.DNSSearch; s == nil || !slices.Equal(*s, []string{"corp.example"}) {
			t.Errorf("%s: dnsSearch %v, want [corp.example]", name, s)
		}
	}
	mt := get(t, apply(t, header+"networking: {dnsSearch: []}\n"), "DockyardMachineTemplate", "dev-control-plane", &infrav1.DockyardMachineTemplate{})
	if s := mt.Spec.Template.Spec.DNSSearch; s == nil || len(*s) != 0 {
		t.Errorf("dnsSearch %v, want an empty list", s)
	}
	mt = get(t, apply(t, header), "DockyardMachineTemplate", "dev-control-plane", &infrav1.DockyardMachineTemplate{})
	if s := mt.Spec.Template.Spec.DNSSearch; s != nil {
		t.Errorf("dnsSearch %v without kind's setting, want none (the host's)", *s)
	}
}

// kind's configuration guide: "Local Registry" patches containerd's configuration; every node
// gets the patches, in order.
func TestContainerdConfigPatches(t *testing.T) {
	patches := []string{"[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"", "[debug]\n  level = \"debug\""}
	jsonPatches := []string{`[{"op": "remove", "path": "/debug"}]`}
	objs := apply(t, header+"containerdConfigPatches:\n- |-\n  "+strings.ReplaceAll(patches[0], "\n", "\n  ")+"\n- |-\n  "+strings.ReplaceAll(patches[1], "\n", "\n  ")+
		"\ncontainerdConfigPatchesJSON6902: ['"+jsonPatches[0]+"']\nnodes: [{role: control-plane}, {role: worker}]\n")
	for _, name := range []string{"dev-control-plane", "dev-md-0"} {
		mt := get(t, objs, "DockyardMachineTemplate", name, &infrav1.DockyardMachineTemplate{})
		if got := mt.Spec.Template.Spec.ContainerdConfigPatches; !slices.Equal(got, patches) {
			t.Errorf("%s: containerdConfigPatches %q, want %q", name, got, patches)
		}
		if got := mt.Spec.Template.Spec.ContainerdConfigPatchesJSON6902; !slices.Equal(got, jsonPatches) {
			t.Errorf("%s: containerdConfigPatchesJSON6902 %q, want %q", name, got, jsonPatches)
		}
	}
}

// Apply's parts, one case each: the objects' order, the control plane's node, the settings every
// node gets, the subnets, and the patches of each machine template (the cluster's, then its
// node's).
func TestApplyParts(t *testing.T) {
	for _, c := range []struct {
		name   string
		config string
		objs   func([]*unstructured.Unstructured) []*unstructured.Unstructured
		check  func(t *testing.T, objs []*unstructured.Unstructured)
	}{{
		name:   "objects in order: the others, the cluster's, each group's",
		config: "nodes: [{role: control-plane}, {role: worker}, {role: worker, labels: {tier: b}}, {role: worker}]",
		objs:   withConfigMap,
		check:  wantObjectsInOrder,
	}, {
		name:   "the control plane's template from its first node, wherever it is",
		config: "nodes: [{role: worker}, {role: control-plane, image: cp:v1, labels: {tier: control}}, {role: control-plane, image: cp:v1, labels: {tier: control}}]",
		check:  wantControlPlaneFromItsFirstNode,
	}, {
		name:   "feature gates on every kubelet",
		config: "featureGates: {CSIMigration: true}\nnodes: [{role: control-plane}, {role: worker}]",
		check:  wantFeatureGatesOnEveryKubelet,
	}, {
		name:   "dual-stack subnets",
		config: "networking: {ipFamily: dual, podSubnet: '10.244.0.0/16,fd00:10:244::/56', serviceSubnet: '10.96.0.0/16,fd00:10:96::/112'}",
		check:  wantDualStackSubnets,
	}, {
		name: "the control plane's patches: the cluster's, then its node's",
		config: `kubeadmConfigPatches:
- '{kind: ClusterConfiguration, controllerManager: {extraArgs: {v: "2"}}, scheduler: {extraArgs: {v: "3", profiling: "false"}}}'
- '{kind: InitConfiguration, nodeRegistration: {kubeletExtraArgs: {v: "9"}}}'
- '{kind: JoinConfiguration, nodeRegistration: {kubeletExtraArgs: {v: "1"}}}'
- '{kind: KubeletConfiguration, maxPods: 100}'
kubeadmConfigPatchesJSON6902:
- {group: kubelet.config.k8s.io, version: v1beta1, kind: KubeletConfiguration, patch: '[{op: add, path: /c, value: 1}]'}
nodes:
- role: control-plane
  kubeadmConfigPatches:
  - '{kind: ClusterConfiguration, controllerManager: {extraArgs: [{name: v, value: "4"}]}, scheduler: {extraArgs: {v: "5"}}}'
  - '{kind: KubeletConfiguration, maxPods: 120}'
  kubeadmConfigPatchesJSON6902:
  - {group: kubelet.config.k8s.io, version: v1beta1, kind: KubeletConfiguration, patch: '[{op: add, path: /x, value: 1}]'}
- role: worker`,
		check: wantControlPlanePatches,
	}, {
		name: "a JSON 6902 patch's view replaces the fields it has",
		config: `kubeadmConfigPatchesJSON6902:
- {group: kubeadm.k8s.io, version: v1beta3, kind: ClusterConfiguration, patch: '[{op: remove, path: /apiServer/certSANs/0}, {op: remove, path: /scheduler/extraArgs}]'}
- {group: kubeadm.k8s.io, version: v1beta4, kind: JoinConfiguration, patch: '[{op: remove, path: /nodeRegistration/kubeletExtraArgs}]'}`,
		check: wantJSON6902ViewReplaced,
	}, {
		name: "each worker group's patches are its own nodes'",
		config: `nodes:
- role: control-plane
- role: worker
- role: worker
  labels: {tier: b}
  kubeadmConfigPatches: ['{kind: KubeletConfiguration, maxPods: 150}']
  kubeadmConfigPatchesJSON6902:
  - {group: kubeadm.k8s.io, version: v1beta4, kind: JoinConfiguration, patch: '[{op: add, path: /nodeRegistration/kubeletExtraArgs/-, value: {name: v, value: "7"}}]'}`,
		check: wantWorkerGroupsPatches,
	}} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load([]byte(header + c.config + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			objs := generated(t)
			if c.objs != nil {
				objs = c.objs(objs)
			}
			out, err := Apply(cfg, "dev", objs)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, out)
		})
	}
}

// withConfigMap adds to the generated objects one Apply does not change, ConfigMap dev-extra.
func withConfigMap(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	other := &unstructured.Unstructured{}
	other.SetAPIVersion("v1")
	other.SetKind("ConfigMap")
	other.SetName("dev-extra")
	return append(objs, other)
}

// wantObjectsInOrder checks the objects' order: the others, the cluster's, each group's.
func wantObjectsInOrder(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var got []string
	for _, u := range objs {
		got = append(got, u.GetKind()+" "+u.GetName())
	}
	want := []string{"ConfigMap dev-extra", "Cluster dev", "DockyardCluster dev", "KubeadmControlPlane dev-control-plane", "DockyardMachineTemplate dev-control-plane",
		"MachineDeployment dev-md-0", "DockyardMachineTemplate dev-md-0", "KubeadmConfigTemplate dev-md-0",
		"MachineDeployment dev-md-1", "DockyardMachineTemplate dev-md-1", "KubeadmConfigTemplate dev-md-1"}
	if !slices.Equal(got, want) {
		t.Errorf("objects %q, want %q", got, want)
	}
	for name, replicas := range map[string]int32{"dev-md-0": 2, "dev-md-1": 1} {
		if md := get(t, objs, "MachineDeployment", name, &clusterv1.MachineDeployment{}); *md.Spec.Replicas != replicas {
			t.Errorf("%s: %d replicas, want %d", name, *md.Spec.Replicas, replicas)
		}
	}
}

// wantControlPlaneFromItsFirstNode checks the control plane's template is its first node's.
func wantControlPlaneFromItsFirstNode(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	spec := kcp.Spec.KubeadmConfigSpec
	if *kcp.Spec.Replicas != 2 || arg(spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels") != "tier=control" ||
		arg(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels") != "tier=control" {
		t.Errorf("control plane %d replicas, registration %+v", *kcp.Spec.Replicas, spec.InitConfiguration.NodeRegistration)
	}
	if mt := get(t, objs, "DockyardMachineTemplate", "dev-control-plane", &infrav1.DockyardMachineTemplate{}); mt.Spec.Template.Spec.Image != "cp:v1" {
		t.Errorf("control plane image %q, want cp:v1", mt.Spec.Template.Spec.Image)
	}
	if mt := get(t, objs, "DockyardMachineTemplate", "dev-md-0", &infrav1.DockyardMachineTemplate{}); mt.Spec.Template.Spec.Image == "cp:v1" {
		t.Error("the worker got the control plane's image")
	}
	ct := get(t, objs, "KubeadmConfigTemplate", "dev-md-0", &bootstrapv1.KubeadmConfigTemplate{})
	if got := arg(ct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "node-labels"); got != "" {
		t.Errorf("worker node-labels %q, want none", got)
	}
}

// wantFeatureGatesOnEveryKubelet checks the feature gates of the kubelets that join.
func wantFeatureGatesOnEveryKubelet(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	kcp := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{})
	ct := get(t, objs, "KubeadmConfigTemplate", "dev-md-0", &bootstrapv1.KubeadmConfigTemplate{})
	for what, args := range map[string][]bootstrapv1.Arg{
		"control plane join": kcp.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.KubeletExtraArgs,
		"worker join":        ct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs,
	} {
		if got := arg(args, "feature-gates"); got != "CSIMigration=true" {
			t.Errorf("%s feature-gates %q", what, got)
		}
	}
}

// wantDualStackSubnets checks both families of each subnet reach the Cluster.
func wantDualStackSubnets(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	cn := get(t, objs, "Cluster", "dev", &clusterv1.Cluster{}).Spec.ClusterNetwork
	if p, s := cn.Pods.CIDRBlocks, cn.Services.CIDRBlocks; !slices.Equal(p, []string{"10.244.0.0/16", "fd00:10:244::/56"}) ||
		!slices.Equal(s, []string{"10.96.0.0/16", "fd00:10:96::/112"}) {
		t.Errorf("pods %v, services %v", p, s)
	}
}

// wantControlPlanePatches checks the control plane's patches: the cluster's, then its node's.
func wantControlPlanePatches(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	spec := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	cc := spec.ClusterConfiguration
	for _, a := range []struct{ what, got, want string }{
		{"controller manager -v (the node's)", arg(cc.ControllerManager.ExtraArgs, "v"), "4"},
		{"controller manager lease (the flavor's)", arg(cc.ControllerManager.ExtraArgs, "leader-elect-lease-duration"), "60s"},
		{"scheduler -v (the node's)", arg(cc.Scheduler.ExtraArgs, "v"), "5"},
		{"scheduler profiling (the cluster's)", arg(cc.Scheduler.ExtraArgs, "profiling"), "false"},
		{"init kubelet -v", arg(spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, "v"), "9"},
		{"join kubelet -v", arg(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "v"), "1"},
	} {
		if a.got != a.want {
			t.Errorf("%s %q, want %q", a.what, a.got, a.want)
		}
	}
	var files []string
	for _, f := range spec.Files {
		if strings.Contains(f.Path, "kubeletconfiguration") {
			files = append(files, f.Path+": "+f.Content)
		}
	}
	if want := []string{
		"/etc/dockyard/kubeadm-patches/kubeletconfiguration100+strategic.yaml: maxPods: 100\n",
		"/etc/dockyard/kubeadm-patches/kubeletconfiguration101+strategic.yaml: maxPods: 120\n",
		`/etc/dockyard/kubeadm-patches/kubeletconfiguration200+json.json: [{"op":"add","path":"/c","value":1}]`,
		`/etc/dockyard/kubeadm-patches/kubeletconfiguration201+json.json: [{"op":"add","path":"/x","value":1}]`,
	}; !slices.Equal(files, want) {
		t.Errorf("control plane kubelet patches %q, want %q", files, want)
	}
	ct := get(t, objs, "KubeadmConfigTemplate", "dev-md-0", &bootstrapv1.KubeadmConfigTemplate{}).Spec.Template.Spec
	if got := arg(ct.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "v"); got != "1" {
		t.Errorf("worker join kubelet -v %q, want the cluster's 1", got)
	}
	if f := ct.Files; len(f) != 2 || f[0].Content != "maxPods: 100\n" || f[1].Content != `[{"op":"add","path":"/c","value":1}]` {
		t.Errorf("worker files %+v, want the cluster's kubelet patches only", f)
	}
}

// wantJSON6902ViewReplaced checks a JSON 6902 patch replaces what its view has, removals included.
func wantJSON6902ViewReplaced(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	flavor := get(t, generated(t), "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	spec := get(t, objs, "KubeadmControlPlane", "dev-control-plane", &controlplanev1.KubeadmControlPlane{}).Spec.KubeadmConfigSpec
	if got, want := spec.ClusterConfiguration.APIServer.CertSANs, flavor.ClusterConfiguration.APIServer.CertSANs[1:]; !slices.Equal(got, want) {
		t.Errorf("certSANs %v, want %v", got, want)
	}
	if got := spec.ClusterConfiguration.Scheduler.ExtraArgs; len(got) != 0 {
		t.Errorf("scheduler args %+v, want none", got)
	}
	if got := spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs; len(got) != 0 {
		t.Errorf("join kubelet args %+v, want none", got)
	}
	if got, want := spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, flavor.InitConfiguration.NodeRegistration.KubeletExtraArgs; len(got) == 0 || len(got) != len(want) {
		t.Errorf("init kubelet args %+v, want the flavor's %+v", got, want)
	}
}

// wantWorkerGroupsPatches checks each worker group gets its own nodes' patches.
func wantWorkerGroupsPatches(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	first := get(t, objs, "KubeadmConfigTemplate", "dev-md-0", &bootstrapv1.KubeadmConfigTemplate{}).Spec.Template.Spec
	if got := arg(first.JoinConfiguration.NodeRegistration.KubeletExtraArgs, "v"); got != "" || len(first.Files) != 0 || first.JoinConfiguration.Patches.Directory != "" {
		t.Errorf("dev-md-0: -v %q, files %+v, patches %q: want none", got, first.Files, first.JoinConfiguration.Patches.Directory)
	}
	second := get(t, objs, "KubeadmConfigTemplate", "dev-md-1", &bootstrapv1.KubeadmConfigTemplate{}).Spec.Template.Spec
	join := second.JoinConfiguration
	if got := arg(join.NodeRegistration.KubeletExtraArgs, "v"); got != "7" || arg(join.NodeRegistration.KubeletExtraArgs, "node-labels") != "tier=b" {
		t.Errorf("dev-md-1 kubelet args %+v, want -v 7 and its labels", join.NodeRegistration.KubeletExtraArgs)
	}
	if f := second.Files; len(f) != 1 || f[0].Path != "/etc/dockyard/kubeadm-patches/kubeletconfiguration100+strategic.yaml" ||
		f[0].Content != "maxPods: 150\n" || join.Patches.Directory != "/etc/dockyard/kubeadm-patches" {
		t.Errorf("dev-md-1 files %+v, patches %q", f, join.Patches.Directory)
	}
}

// Apply stops at the first part that fails, in order: the control plane's kubeadmConfigPatches
// (the cluster's, then its node's), its JSON 6902 patches, the networking, then each worker
// group's patches, whose errors name the group's first node.
func TestApplyErrorOrder(t *testing.T) {
	const forbidden = ": Dockyard turns only the fields Cluster API has into its objects"
	const noCNI = "networking.disableDefaultCNI: the generated KubeadmControlPlane does not install the CNI with /etc/dockyard/install-cni.sh (a kind configuration applies to the default flavor's objects)"
	for _, c := range []struct {
		name   string
		config string
		noCNI  bool // the flavor's control plane does not install the CNI
		want   string
	}{{
		name:   "the cluster's kubeadmConfigPatches, then the node's",
		config: "kubeadmConfigPatches: ['{kind: ClusterConfiguration, apiServer: {timeoutForControlPlane: 4m}}']\nnodes: [{role: control-plane, kubeadmConfigPatches: ['{kind: InitConfiguration, x: 1}']}]",
		want: "kind's configuration: [kubeadmConfigPatches[0]: Forbidden: ClusterConfiguration field apiServer.timeoutForControlPlane" + forbidden +
			", nodes[0].kubeadmConfigPatches[0]: Forbidden: InitConfiguration field x" + forbidden + "]",
	}, {
		name:   "kubeadmConfigPatches before JSON 6902 patches",
		config: "kubeadmConfigPatches: ['{kind: InitConfiguration, x: 1}']\nkubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta3, kind: JoinConfiguration, patch: '[{op: add, path: /y, value: 1}]'}]",
		want:   "kind's configuration: kubeadmConfigPatches[0]: Forbidden: InitConfiguration field x" + forbidden,
	}, {
		name:   "the control plane's patches before the networking",
		config: "networking: {disableDefaultCNI: true}\nnodes: [{role: control-plane, kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta4, kind: InitConfiguration, patch: '[{op: add, path: /nodeRegistration/taints, value: []}]'}]}]",
		noCNI:  true,
		want:   "kind's configuration: nodes[0].kubeadmConfigPatchesJSON6902[0].patch: Forbidden: InitConfiguration field nodeRegistration.taints" + forbidden,
	}, {
		name:   "the networking before the workers' patches",
		config: "networking: {disableDefaultCNI: true}\nnodes: [{role: control-plane}, {role: worker, kubeadmConfigPatches: ['{kind: JoinConfiguration, x: 1}']}]",
		noCNI:  true,
		want:   noCNI,
	}, {
		name:   "a worker group's kubeadmConfigPatches, by its first node",
		config: "nodes: [{role: control-plane}, {role: worker}, {role: worker, labels: {a: b}, kubeadmConfigPatches: ['{kind: JoinConfiguration, x: 1}']}]",
		want:   "kind's configuration: nodes[2].kubeadmConfigPatches[0]: Forbidden: JoinConfiguration field x" + forbidden,
	}, {
		name:   "a worker group's JSON 6902 patches, by its first node",
		config: "nodes: [{role: control-plane}, {role: worker}, {role: worker, labels: {a: b}, kubeadmConfigPatchesJSON6902: [{group: kubeadm.k8s.io, version: v1beta3, kind: JoinConfiguration, patch: '[{op: add, path: /y, value: 1}]'}]}]",
		want:   "kind's configuration: nodes[2].kubeadmConfigPatchesJSON6902[0].patch: Forbidden: JoinConfiguration field y" + forbidden,
	}} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load([]byte(header + c.config + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			objs := generated(t)
			if c.noCNI {
				for _, u := range objs {
					if u.GetKind() != "KubeadmControlPlane" {
						continue
					}
					commands, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "kubeadmConfigSpec", "postKubeadmCommands")
					commands = slices.DeleteFunc(commands, func(c string) bool { return c == "sh /etc/dockyard/install-cni.sh" })
					if err := unstructured.SetNestedStringSlice(u.Object, commands, "spec", "kubeadmConfigSpec", "postKubeadmCommands"); err != nil {
						t.Fatal(err)
					}
				}
			}
			out, err := Apply(cfg, "dev", objs)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %s", err, c.want)
			}
			if out != nil {
				t.Errorf("objects %d with the error, want none", len(out))
			}
		})
	}
}
