package kindconfig

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kind "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/dockyard-dev/dockyard/pkg/patch"
)

// kubeadmFields points at the fields of one machine template's kubeadm configuration that kind's
// JSON 6902 patches may change. A document the template's machines do not read (a worker's
// ClusterConfiguration and InitConfiguration) is nil, and patches of it are skipped, as kubeadm
// would ignore them on those machines.
type kubeadmFields struct {
	cluster *bootstrapv1.ClusterConfiguration
	init    *bootstrapv1.NodeRegistrationOptions
	join    *bootstrapv1.NodeRegistrationOptions
}

// applyJSON6902 applies kind's kubeadmConfigPatchesJSON6902 (at path) to a machine template.
// kubeadm's documents are patched as a view of the fields Cluster API has, in the patch's
// version (v1beta3 writes extra arguments as a map, v1beta4 as a list), and read back: a patch
// that leaves anything else in the view is refused, by field. Patches of the kubelet's
// configuration become kubeadm's own JSON patch files, returned in order.
func applyJSON6902(path *field.Path, patches []kind.PatchJSON6902, f kubeadmFields) ([]string, field.ErrorList) {
	var kubelet []string
	var errs field.ErrorList
	for i, p := range patches {
		pp := path.Index(i)
		decoded, ops, err := patch.JSON6902(p.Patch)
		if err != nil {
			errs = append(errs, field.Invalid(pp.Child("patch"), p.Patch, err.Error()))
			continue
		}
		switch {
		case p.Group == "kubelet.config.k8s.io" && p.Kind == "KubeletConfiguration":
			kubelet = append(kubelet, string(ops))
		case p.Group == "kubeadm.k8s.io":
			if p.Version != "v1beta3" && p.Version != "v1beta4" {
				errs = append(errs, field.NotSupported(pp.Child("version"), p.Version, []string{"v1beta3", "v1beta4"}))
				continue
			}
			errs = append(errs, patchKubeadm(pp, p, decoded, f)...)
		default:
			errs = append(errs, field.NotSupported(pp.Child("kind"), p.Group+"/"+p.Kind, []string{
				"kubeadm.k8s.io/ClusterConfiguration", "kubeadm.k8s.io/InitConfiguration", "kubeadm.k8s.io/JoinConfiguration",
				"kubelet.config.k8s.io/KubeletConfiguration"}))
		}
	}
	return kubelet, errs
}

// patchKubeadm applies one patch of a kubeadm document to the fields it has in f.
func patchKubeadm(pp *field.Path, p kind.PatchJSON6902, ops jsonpatch.Patch, f kubeadmFields) field.ErrorList {
	v1beta3 := p.Version == "v1beta3"
	doc := map[string]any{}
	switch p.Kind {
	case "ClusterConfiguration":
		if f.cluster == nil {
			return nil
		}
		doc["apiServer"] = map[string]any{"extraArgs": argsView(f.cluster.APIServer.ExtraArgs, v1beta3), "certSANs": stringsView(f.cluster.APIServer.CertSANs)}
		doc["controllerManager"] = map[string]any{"extraArgs": argsView(f.cluster.ControllerManager.ExtraArgs, v1beta3)}
		doc["scheduler"] = map[string]any{"extraArgs": argsView(f.cluster.Scheduler.ExtraArgs, v1beta3)}
	case "InitConfiguration", "JoinConfiguration":
		reg := f.init
		if p.Kind == "JoinConfiguration" {
			reg = f.join
		}
		if reg == nil {
			return nil
		}
		doc["nodeRegistration"] = map[string]any{"kubeletExtraArgs": argsView(reg.KubeletExtraArgs, v1beta3)}
	default:
		return field.ErrorList{field.NotSupported(pp.Child("kind"), p.Kind, []string{"ClusterConfiguration", "InitConfiguration", "JoinConfiguration"})}
	}
	view, err := json.Marshal(doc)
	if err != nil {
		return field.ErrorList{field.InternalError(pp, err)}
	}
	out, err := ops.Apply(view)
	if err != nil {
		return field.ErrorList{field.Invalid(pp.Child("patch"), p.Patch, fmt.Sprintf(
			"applying it to %s as Cluster API has it (%s): %v", p.Kind, view, err))}
	}
	doc = map[string]any{}
	if err := json.Unmarshal(out, &doc); err != nil {
		return field.ErrorList{field.InternalError(pp, err)}
	}
	var errs field.ErrorList
	refuseRest := func(m map[string]any, prefix string) {
		for _, k := range sortedKeys(m) {
			errs = append(errs, field.Forbidden(pp.Child("patch"), fmt.Sprintf(
				"%s field %s%s: Dockyard turns only the fields Cluster API has into its objects", p.Kind, prefix, k)))
		}
	}
	// readArgs replaces into with the arguments at key of m.
	readArgs := func(m map[string]any, key, prefix string, into *[]bootstrapv1.Arg) {
		v, ok := take[any](m, key)
		if !ok {
			*into = nil
			return
		}
		a, err := args(v)
		if err != nil {
			errs = append(errs, field.Invalid(pp.Child("patch"), p.Patch, fmt.Sprintf("%s%s: %v", prefix, key, err)))
			return
		}
		*into = a
	}
	if p.Kind == "ClusterConfiguration" {
		for _, c := range []struct {
			name string
			args *[]bootstrapv1.Arg
		}{{"apiServer", &f.cluster.APIServer.ExtraArgs}, {"controllerManager", &f.cluster.ControllerManager.ExtraArgs}, {"scheduler", &f.cluster.Scheduler.ExtraArgs}} {
			component, _ := take[map[string]any](doc, c.name)
			if component == nil {
				component = map[string]any{}
			}
			readArgs(component, "extraArgs", c.name+".", c.args)
			if c.name == "apiServer" {
				f.cluster.APIServer.CertSANs = nil
				sans, _ := take[[]any](component, "certSANs")
				for _, s := range sans {
					f.cluster.APIServer.CertSANs = append(f.cluster.APIServer.CertSANs, fmt.Sprint(s))
				}
			}
			refuseRest(component, c.name+".")
		}
	} else {
		reg := f.init
		if p.Kind == "JoinConfiguration" {
			reg = f.join
		}
		nr, _ := take[map[string]any](doc, "nodeRegistration")
		if nr == nil {
			nr = map[string]any{}
		}
		readArgs(nr, "kubeletExtraArgs", "nodeRegistration.", &reg.KubeletExtraArgs)
		refuseRest(nr, "nodeRegistration.")
	}
	refuseRest(doc, "")
	return errs
}

// argsView is extra arguments as kubeadm writes them: v1beta3's map (a later argument of a name
// wins) or v1beta4's list of name and value.
func argsView(a []bootstrapv1.Arg, v1beta3 bool) any {
	if v1beta3 {
		m := map[string]any{}
		for _, arg := range a {
			m[arg.Name] = ptr.Deref(arg.Value, "")
		}
		return m
	}
	l := []any{}
	for _, arg := range a {
		l = append(l, map[string]any{"name": arg.Name, "value": ptr.Deref(arg.Value, "")})
	}
	return l
}

func stringsView(s []string) []any {
	l := []any{}
	for _, v := range s {
		l = append(l, v)
	}
	return l
}
