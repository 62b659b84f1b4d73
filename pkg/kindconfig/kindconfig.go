// Package kindconfig turns kind's cluster configuration (kind.x-k8s.io/v1alpha4 Cluster, the
// file of `kind create cluster --config`) into the Cluster API objects of Dockyard's default
// flavor: control plane nodes become the KubeadmControlPlane's machines, each group of identical
// workers a MachineDeployment, and node and cluster settings the fields of the KubeadmControlPlane,
// the KubeadmConfigTemplates and the DockyardMachineTemplates. A value Dockyard cannot honour is
// refused with its field named; nothing is dropped.
package kindconfig

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"
	kind "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// Load reads a kind configuration: kind.x-k8s.io/v1alpha4 Cluster, unknown fields refused. Nodes
// without a role are control plane nodes (kind's default); no nodes is one control plane node.
func Load(data []byte) (*kind.Cluster, error) {
	cfg := &kind.Cluster{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, errors.Wrap(err, "reading kind's configuration")
	}
	if cfg.APIVersion != "kind.x-k8s.io/v1alpha4" || cfg.Kind != "Cluster" {
		return nil, errors.Errorf("kind's configuration is %s %s, want kind.x-k8s.io/v1alpha4 Cluster", cfg.APIVersion, cfg.Kind)
	}
	if len(cfg.Nodes) == 0 {
		cfg.Nodes = []kind.Node{{Role: kind.ControlPlaneRole}}
	}
	for i := range cfg.Nodes {
		if cfg.Nodes[i].Role == "" {
			cfg.Nodes[i].Role = kind.ControlPlaneRole
		}
	}
	return cfg, nil
}

// Flavor is the template flavor a configuration's IP family needs.
func Flavor(cfg *kind.Cluster) (string, error) {
	switch cfg.Networking.IPFamily {
	case "", kind.IPv4Family:
		return "", nil
	case kind.IPv6Family:
		return "ipv6", nil
	case kind.DualStackFamily:
		return "dual-stack", nil
	}
	return "", field.NotSupported(field.NewPath("networking", "ipFamily"), cfg.Networking.IPFamily, []string{"ipv4", "ipv6", "dual"})
}

// Counts are the machines a configuration asks for.
func Counts(cfg *kind.Cluster) (controlPlanes, workers int64) {
	for _, n := range cfg.Nodes {
		if n.Role == kind.WorkerRole {
			workers++
		} else {
			controlPlanes++
		}
	}
	return controlPlanes, workers
}

// objects are the default flavor's objects of one cluster, typed.
type objects struct {
	cluster        *clusterv1.Cluster
	dockyard       *infrav1.DockyardCluster
	controlPlane   *controlplanev1.KubeadmControlPlane
	controlPlaneMT *infrav1.DockyardMachineTemplate
	workers        *clusterv1.MachineDeployment
	workersMT      *infrav1.DockyardMachineTemplate
	workersCT      *bootstrapv1.KubeadmConfigTemplate
	others         []*unstructured.Unstructured
}

// Apply rewrites the objects clusterctl generated from Dockyard's default flavor (or an IP family
// flavor, see Flavor) for cluster name to what cfg asks. It returns them in their order, a
// MachineDeployment with its templates for each group of identical workers, or an error listing
// every field Dockyard cannot honour.
func Apply(cfg *kind.Cluster, name string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	if errs := validate(cfg); len(errs) > 0 {
		return nil, errors.Wrap(errs.ToAggregate(), "kind's configuration")
	}
	o, err := split(name, objs)
	if err != nil {
		return nil, err
	}
	cp, groups := nodeGroups(cfg)
	if err := controlPlane(o, cfg, cp, len(groups) > 0); err != nil {
		return nil, err
	}
	// The networking between the control plane and the workers: its error (disableDefaultCNI's)
	// comes after the control plane's patches' and before the workers'.
	if err := networking(o, cfg); err != nil {
		return nil, err
	}
	out, err := appendObjects(append([]*unstructured.Unstructured{}, o.others...), o.cluster, o.dockyard, o.controlPlane, o.controlPlaneMT)
	if err != nil {
		return nil, err
	}
	return appendWorkers(out, o, cfg, name, groups)
}

// nodeGroups owns the nodes' roles: the control plane's, the workers' in identical groups.
func nodeGroups(cfg *kind.Cluster) (cp []int, groups [][]int) {
	for i, n := range cfg.Nodes {
		if n.Role != kind.WorkerRole {
			cp = append(cp, i)
			continue
		}
		g := slices.IndexFunc(groups, func(g []int) bool { return sameMachine(cfg.Nodes[g[0]], n) })
		if g < 0 {
			groups = append(groups, nil)
			g = len(groups) - 1
		}
		groups[g] = append(groups[g], i)
	}
	return cp, groups
}

// networking owns kind's networking: the subnets, the API server's port, the CNI, kube-proxy.
func networking(o *objects, cfg *kind.Cluster) error {
	cn := &o.cluster.Spec.ClusterNetwork
	if cfg.Networking.PodSubnet != "" {
		cn.Pods.CIDRBlocks = strings.Split(cfg.Networking.PodSubnet, ",")
	}
	if cfg.Networking.ServiceSubnet != "" {
		cn.Services.CIDRBlocks = strings.Split(cfg.Networking.ServiceSubnet, ",")
	}
	if cfg.Networking.APIServerPort > 0 {
		o.dockyard.Spec.LoadBalancer.HostPort = cfg.Networking.APIServerPort
	}
	spec := &o.controlPlane.Spec.KubeadmConfigSpec
	if cfg.Networking.DisableDefaultCNI {
		if err := withoutDefaultCNI(spec); err != nil {
			return err
		}
	}
	if cfg.Networking.KubeProxyMode == noKubeProxy {
		spec.InitConfiguration.SkipPhases = appendNew(spec.InitConfiguration.SkipPhases, "addon/kube-proxy")
	}
	return nil
}

// controlPlane owns the control plane: one template and kubeadm configuration for its nodes (cp).
func controlPlane(o *objects, cfg *kind.Cluster, cp []int, workers bool) error {
	o.controlPlane.Spec.Replicas = ptr.To(int32(len(cp)))
	machine(&o.controlPlaneMT.Spec.Template.Spec, cfg, cfg.Nodes[cp[0]])
	spec := &o.controlPlane.Spec.KubeadmConfigSpec
	clusterSettings(&spec.ClusterConfiguration, cfg)
	for _, reg := range []*bootstrapv1.NodeRegistrationOptions{&spec.InitConfiguration.NodeRegistration, &spec.JoinConfiguration.NodeRegistration} {
		kubelet(reg, cfg, cfg.Nodes[cp[0]])
		if !workers {
			// kind's single-role clusters schedule pods on the control plane.
			reg.Taints = &[]corev1.Taint{}
		}
	}
	// kubeadmConfigPatches last: in kind they apply to the configuration kind made.
	return controlPlanePatches(spec, cfg, cp[0])
}

// clusterSettings owns kind's cluster-wide settings: the feature gates, the runtime config.
func clusterSettings(cc *bootstrapv1.ClusterConfiguration, cfg *kind.Cluster) {
	if gates := featureGates(cfg.FeatureGates); gates != "" {
		cc.APIServer.ExtraArgs = setArg(cc.APIServer.ExtraArgs, "feature-gates", gates)
		cc.ControllerManager.ExtraArgs = setArg(cc.ControllerManager.ExtraArgs, "feature-gates", gates)
		cc.Scheduler.ExtraArgs = setArg(cc.Scheduler.ExtraArgs, "feature-gates", gates)
	}
	if len(cfg.RuntimeConfig) > 0 {
		cc.APIServer.ExtraArgs = setArg(cc.APIServer.ExtraArgs, "runtime-config", joinMap(cfg.RuntimeConfig, "="))
	}
}

// controlPlanePatches owns the control plane's kubeadm patches, the cluster's and node i's.
func controlPlanePatches(spec *bootstrapv1.KubeadmConfigSpec, cfg *kind.Cluster, i int) error {
	c, err := nodePatches(cfg, i)
	if err != nil {
		return err
	}
	cc := &spec.ClusterConfiguration
	cc.APIServer.ExtraArgs = mergeArgs(cc.APIServer.ExtraArgs, c.apiServer)
	cc.ControllerManager.ExtraArgs = mergeArgs(cc.ControllerManager.ExtraArgs, c.controllerManager)
	cc.Scheduler.ExtraArgs = mergeArgs(cc.Scheduler.ExtraArgs, c.scheduler)
	cc.APIServer.CertSANs = appendNew(cc.APIServer.CertSANs, c.certSANs...)
	spec.InitConfiguration.NodeRegistration.KubeletExtraArgs = mergeArgs(spec.InitConfiguration.NodeRegistration.KubeletExtraArgs, c.initKubelet)
	spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs = mergeArgs(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, c.joinKubelet)
	kubeletJSON, err := nodeJSONPatches(cfg, i, kubeadmFields{cluster: cc, init: &spec.InitConfiguration.NodeRegistration, join: &spec.JoinConfiguration.NodeRegistration})
	if err != nil {
		return err
	}
	if files := kubeletPatchFiles(c.kubeletConfiguration, kubeletJSON); len(files) > 0 {
		spec.Files = append(spec.Files, files...)
		spec.InitConfiguration.Patches.Directory = patchesDir
		spec.JoinConfiguration.Patches.Directory = patchesDir
	}
	return nil
}

// appendWorkers owns the workers: a MachineDeployment with its templates for each group of them.
func appendWorkers(out []*unstructured.Unstructured, o *objects, cfg *kind.Cluster, name string, groups [][]int) ([]*unstructured.Unstructured, error) {
	// The flavor's MachineDeployment and its templates for the first group, copies named
	// <cluster>-md-<i> for the others; none: the first with no replicas.
	if len(groups) == 0 {
		o.workers.Spec.Replicas = ptr.To[int32](0)
		return appendObjects(out, o.workers, o.workersMT, o.workersCT)
	}
	for i, g := range groups {
		objs, err := workerGroup(o, cfg, fmt.Sprintf("%s-md-%d", name, i), g)
		if err != nil {
			return nil, err
		}
		if out, err = appendObjects(out, objs...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// workerGroup owns a group of identical workers (g): a MachineDeployment and templates named n.
func workerGroup(o *objects, cfg *kind.Cluster, n string, g []int) ([]runtime.Object, error) {
	md, mt, ct := o.workers.DeepCopy(), o.workersMT.DeepCopy(), o.workersCT.DeepCopy()
	md.Name, mt.Name, ct.Name = n, n, n
	md.Spec.Template.Spec.InfrastructureRef.Name = n
	md.Spec.Template.Spec.Bootstrap.ConfigRef.Name = n
	md.Spec.Replicas = ptr.To(int32(len(g)))
	node := cfg.Nodes[g[0]]
	machine(&mt.Spec.Template.Spec, cfg, node)
	kubelet(&ct.Spec.Template.Spec.JoinConfiguration.NodeRegistration, cfg, node)
	if err := workerPatches(&ct.Spec.Template.Spec, cfg, g[0]); err != nil {
		return nil, err
	}
	return []runtime.Object{md, mt, ct}, nil
}

// workerPatches owns a worker group's kubeadm patches, the cluster's and node i's.
func workerPatches(spec *bootstrapv1.KubeadmConfigSpec, cfg *kind.Cluster, i int) error {
	c, err := nodePatches(cfg, i)
	if err != nil {
		return err
	}
	join := &spec.JoinConfiguration
	join.NodeRegistration.KubeletExtraArgs = mergeArgs(join.NodeRegistration.KubeletExtraArgs, c.joinKubelet)
	kubeletJSON, err := nodeJSONPatches(cfg, i, kubeadmFields{join: &join.NodeRegistration})
	if err != nil {
		return err
	}
	if files := kubeletPatchFiles(c.kubeletConfiguration, kubeletJSON); len(files) > 0 {
		spec.Files = append(spec.Files, files...)
		join.Patches.Directory = patchesDir
	}
	return nil
}

// nodePatches reads the cluster's kubeadmConfigPatches, then node i's, for its machine template.
func nodePatches(cfg *kind.Cluster, i int) (kubeadmChanges, error) {
	controlPlane := cfg.Nodes[i].Role != kind.WorkerRole
	c, errs := readPatches(field.NewPath("kubeadmConfigPatches"), cfg.KubeadmConfigPatches, controlPlane)
	nc, nerrs := readPatches(field.NewPath("nodes").Index(i).Child("kubeadmConfigPatches"), cfg.Nodes[i].KubeadmConfigPatches, controlPlane)
	if errs = append(errs, nerrs...); len(errs) > 0 {
		return c, errors.Wrap(errs.ToAggregate(), "kind's configuration")
	}
	c.apiServer = append(c.apiServer, nc.apiServer...)
	c.controllerManager = append(c.controllerManager, nc.controllerManager...)
	c.scheduler = append(c.scheduler, nc.scheduler...)
	c.certSANs = append(c.certSANs, nc.certSANs...)
	c.initKubelet = append(c.initKubelet, nc.initKubelet...)
	c.joinKubelet = append(c.joinKubelet, nc.joinKubelet...)
	c.kubeletConfiguration = append(c.kubeletConfiguration, nc.kubeletConfiguration...)
	return c, nil
}

// nodeJSONPatches applies the cluster's JSON 6902 patches, then node i's, returning the kubelet's.
func nodeJSONPatches(cfg *kind.Cluster, i int, f kubeadmFields) ([]string, error) {
	kubelet, errs := applyJSON6902(field.NewPath("kubeadmConfigPatchesJSON6902"), cfg.KubeadmConfigPatchesJSON6902, f)
	nk, nerrs := applyJSON6902(field.NewPath("nodes").Index(i).Child("kubeadmConfigPatchesJSON6902"), cfg.Nodes[i].KubeadmConfigPatchesJSON6902, f)
	if errs = append(errs, nerrs...); len(errs) > 0 {
		return nil, errors.Wrap(errs.ToAggregate(), "kind's configuration")
	}
	return append(kubelet, nk...), nil
}

// appendObjects owns the conversion of the output: it appends objs to out, unstructured.
func appendObjects(out []*unstructured.Unstructured, objs ...runtime.Object) ([]*unstructured.Unstructured, error) {
	for _, obj := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, errors.Wrap(err, "converting the cluster's objects")
		}
		out = append(out, &unstructured.Unstructured{Object: u})
	}
	return out, nil
}

// split types the objects of cluster name that Apply changes; the others stay as they are.
func split(name string, objs []*unstructured.Unstructured) (*objects, error) {
	o := &objects{
		cluster: &clusterv1.Cluster{}, dockyard: &infrav1.DockyardCluster{},
		controlPlane: &controlplanev1.KubeadmControlPlane{}, controlPlaneMT: &infrav1.DockyardMachineTemplate{},
		workers: &clusterv1.MachineDeployment{}, workersMT: &infrav1.DockyardMachineTemplate{}, workersCT: &bootstrapv1.KubeadmConfigTemplate{},
	}
	type target struct {
		gk    schema.GroupKind
		name  string
		into  runtime.Object
		found bool
	}
	wanted := []target{
		{clusterv1.GroupVersion.WithKind("Cluster").GroupKind(), name, o.cluster, false},
		{infrav1.GroupVersion.WithKind("DockyardCluster").GroupKind(), name, o.dockyard, false},
		{controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind(), name + "-control-plane", o.controlPlane, false},
		{infrav1.GroupVersion.WithKind("DockyardMachineTemplate").GroupKind(), name + "-control-plane", o.controlPlaneMT, false},
		{clusterv1.GroupVersion.WithKind("MachineDeployment").GroupKind(), name + "-md-0", o.workers, false},
		{infrav1.GroupVersion.WithKind("DockyardMachineTemplate").GroupKind(), name + "-md-0", o.workersMT, false},
		{bootstrapv1.GroupVersion.WithKind("KubeadmConfigTemplate").GroupKind(), name + "-md-0", o.workersCT, false},
	}
	for _, u := range objs {
		gk := u.GroupVersionKind().GroupKind()
		i := slices.IndexFunc(wanted, func(w target) bool { return w.gk == gk && w.name == u.GetName() })
		if i < 0 {
			o.others = append(o.others, u)
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wanted[i].into); err != nil {
			return nil, errors.Wrapf(err, "reading %s %s of the generated cluster", u.GetKind(), u.GetName())
		}
		wanted[i].found = true
	}
	for _, w := range wanted {
		if !w.found {
			return nil, errors.Errorf("the generated cluster %s has no %s %s: a kind configuration applies to the default flavor's objects", name, w.gk.Kind, w.name)
		}
	}
	return o, nil
}

// validate lists what Dockyard cannot honour, by field.
func validate(cfg *kind.Cluster) field.ErrorList {
	var errs field.ErrorList
	notYet := func(p *field.Path, v any) {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("not supported by Dockyard yet (value %v)", v)))
	}
	nw := field.NewPath("networking")
	switch m := cfg.Networking.KubeProxyMode; m {
	case "", kind.IPTablesProxyMode, noKubeProxy:
	default:
		errs = append(errs, field.NotSupported(nw.Child("kubeProxyMode"), m, []string{"iptables", "none"}))
	}
	if a := cfg.Networking.APIServerAddress; a != "" {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			errs = append(errs, field.Invalid(nw.Child("apiServerAddress"), a,
				"Dockyard publishes the API server on the host's loopback address only"))
		}
	}
	if p := cfg.Networking.APIServerPort; p < 0 || p > 65535 {
		errs = append(errs, field.Invalid(nw.Child("apiServerPort"), p, "want 0 (a free port) to 65535"))
	}
	for _, s := range []struct{ name, v string }{{"podSubnet", cfg.Networking.PodSubnet}, {"serviceSubnet", cfg.Networking.ServiceSubnet}} {
		if _, err := netutils.ParseCIDRs(strings.Split(s.v, ",")); s.v != "" && err != nil {
			errs = append(errs, field.Invalid(nw.Child(s.name), s.v, "want CIDRs, comma-separated"))
		}
	}
	if _, err := Flavor(cfg); err != nil {
		errs = append(errs, field.Invalid(nw.Child("ipFamily"), cfg.Networking.IPFamily, "want ipv4, ipv6 or dual"))
	}
	var first = -1
	for i, n := range cfg.Nodes {
		p := field.NewPath("nodes").Index(i)
		switch n.Role {
		case kind.ControlPlaneRole:
			if first < 0 {
				first = i
			} else if !sameMachine(cfg.Nodes[first], n) {
				errs = append(errs, field.Invalid(p, n.Role, fmt.Sprintf(
					"control plane nodes share one machine template in Cluster API (a KubeadmControlPlane's): this one differs from nodes[%d] in image, labels, extraMounts, extraPortMappings, kubeadmConfigPatches or kubeadmConfigPatchesJSON6902", first)))
			}
		case kind.WorkerRole:
		default:
			errs = append(errs, field.NotSupported(p.Child("role"), n.Role, []string{"control-plane", "worker"}))
		}
		for j, m := range n.ExtraMounts {
			mp := p.Child("extraMounts").Index(j)
			if m.SelinuxRelabel {
				notYet(mp.Child("selinuxRelabel"), true)
			}
			if m.Propagation != "" && m.Propagation != kind.MountPropagationNone {
				notYet(mp.Child("propagation"), m.Propagation)
			}
		}
		for j, pm := range n.ExtraPortMappings {
			pp := p.Child("extraPortMappings").Index(j)
			if pm.Protocol != "" && pm.Protocol != kind.PortMappingProtocolTCP && pm.Protocol != kind.PortMappingProtocolUDP {
				errs = append(errs, field.NotSupported(pp.Child("protocol"), pm.Protocol, []string{"TCP", "UDP"}))
			}
			if pm.HostPort > 0 && countSame(cfg.Nodes, n) > 1 {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), pm.HostPort,
					"identical nodes become one MachineDeployment (or the control plane), whose machines cannot all publish one host port: give each node its own port"))
			}
		}
	}
	if first < 0 {
		errs = append(errs, field.Required(field.NewPath("nodes"), "at least one control-plane node"))
	}
	return errs
}

// machine sets a DockyardMachine's spec from a node and the cluster: its image (empty: the
// manager's node image of the Machine's version), mounts, ports, DNS search list and containerd
// configuration patches.
func machine(spec *infrav1.DockyardMachineSpec, cfg *kind.Cluster, n kind.Node) {
	if s := cfg.Networking.DNSSearch; s != nil {
		spec.DNSSearch = ptr.To(slices.Clone(*s))
	}
	if len(cfg.ContainerdConfigPatches) > 0 {
		spec.ContainerdConfigPatches = slices.Clone(cfg.ContainerdConfigPatches)
	}
	if len(cfg.ContainerdConfigPatchesJSON6902) > 0 {
		spec.ContainerdConfigPatchesJSON6902 = slices.Clone(cfg.ContainerdConfigPatchesJSON6902)
	}
	if n.Image != "" {
		spec.Image = n.Image
	}
	spec.ExtraMounts = nil
	for _, m := range n.ExtraMounts {
		spec.ExtraMounts = append(spec.ExtraMounts, infrav1.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.Readonly})
	}
	if len(n.ExtraPortMappings) > 0 {
		spec.Ports = nil
	}
	for _, pm := range n.ExtraPortMappings {
		spec.Ports = append(spec.Ports, infrav1.PortMapping{ContainerPort: pm.ContainerPort, HostPort: pm.HostPort,
			Protocol: string(pm.Protocol), ListenAddress: pm.ListenAddress})
	}
}

// kubelet sets the kubelet's flags of a node's registration: its labels and the feature gates.
func kubelet(reg *bootstrapv1.NodeRegistrationOptions, cfg *kind.Cluster, n kind.Node) {
	if len(n.Labels) > 0 {
		reg.KubeletExtraArgs = setArg(reg.KubeletExtraArgs, "node-labels", joinMap(n.Labels, "="))
	}
	if gates := featureGates(cfg.FeatureGates); gates != "" {
		reg.KubeletExtraArgs = setArg(reg.KubeletExtraArgs, "feature-gates", gates)
	}
}

// sameMachine reports whether two nodes need the same machine template and registration.
func sameMachine(a, b kind.Node) bool {
	return a.Role == b.Role && a.Image == b.Image && maps.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.ExtraMounts, b.ExtraMounts) && slices.Equal(a.ExtraPortMappings, b.ExtraPortMappings) &&
		slices.Equal(a.KubeadmConfigPatches, b.KubeadmConfigPatches) &&
		slices.Equal(a.KubeadmConfigPatchesJSON6902, b.KubeadmConfigPatchesJSON6902)
}

// noKubeProxy is kind's kubeProxyMode without kube-proxy (kind's internal NoneProxyMode).
const noKubeProxy kind.ProxyMode = "none"

// The default flavor's control plane installs the node image's CNI with this script, run after
// kubeadm (see templates/src/cluster-template.yaml).
const (
	installCNIFile    = "/etc/dockyard/install-cni.sh"
	installCNICommand = "sh " + installCNIFile
)

// withoutDefaultCNI removes the installation of the node image's CNI from a control plane's
// kubeadm configuration (kind's disableDefaultCNI): the user installs one.
func withoutDefaultCNI(spec *bootstrapv1.KubeadmConfigSpec) error {
	files := slices.DeleteFunc(slices.Clone(spec.Files), func(f bootstrapv1.File) bool { return f.Path == installCNIFile })
	commands := slices.DeleteFunc(slices.Clone(spec.PostKubeadmCommands), func(c string) bool { return c == installCNICommand })
	if len(files) == len(spec.Files) || len(commands) == len(spec.PostKubeadmCommands) {
		return errors.Errorf("networking.disableDefaultCNI: the generated KubeadmControlPlane does not install the CNI with %s (a kind configuration applies to the default flavor's objects)", installCNIFile)
	}
	spec.Files, spec.PostKubeadmCommands = files, commands
	return nil
}

func countSame(nodes []kind.Node, n kind.Node) int {
	c := 0
	for _, o := range nodes {
		if sameMachine(o, n) {
			c++
		}
	}
	return c
}

func featureGates(gates map[string]bool) string {
	m := make(map[string]string, len(gates))
	for k, v := range gates {
		m[k] = fmt.Sprint(v)
	}
	return joinMap(m, "=")
}

// joinMap is k1<sep>v1,k2<sep>v2 in key order.
func joinMap(m map[string]string, sep string) string {
	items := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		items = append(items, k+sep+m[k])
	}
	return strings.Join(items, ",")
}

func setArg(args []bootstrapv1.Arg, name, value string) []bootstrapv1.Arg {
	for i := range args {
		if args[i].Name == name {
			args[i].Value = ptr.To(value)
			return args
		}
	}
	return append(args, bootstrapv1.Arg{Name: name, Value: ptr.To(value)})
}
