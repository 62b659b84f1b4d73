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

// registration is the registration in f of docKind, an InitConfiguration or a JoinConfiguration.
func (f kubeadmFields) registration(docKind string) *bootstrapv1.NodeRegistrationOptions {
	if docKind == "JoinConfiguration" {
		return f.join
	}
	return f.init
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
		reg := f.registration(p.Kind)
		if reg == nil {
			return nil
		}
		doc["nodeRegistration"] = map[string]any{"kubeletExtraArgs": argsView(reg.KubeletExtraArgs, v1beta3)}
	default:
		return field.ErrorList{field.NotSupported(pp.Child("kind"), p.Kind, []string{"ClusterConfiguration", "InitConfiguration", "JoinConfiguration"})}
	}
	doc, errs := patchView(pp, p, ops, doc)
	if len(errs) > 0 {
		return errs
	}
	r := &viewReader{pp: pp, p: p}
	if p.Kind == "ClusterConfiguration" {
		r.readCluster(doc, f.cluster)
	} else {
		r.readRegistration(doc, f.registration(p.Kind))
	}
	r.refuseRest(doc, "")
	return r.errs
}

// patchView owns the patching: it applies ops to doc, the view of p's document, as JSON.
func patchView(pp *field.Path, p kind.PatchJSON6902, ops jsonpatch.Patch, doc map[string]any) (map[string]any, field.ErrorList) {
	view, err := json.Marshal(doc)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(pp, err)}
	}
	out, err := ops.Apply(view)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(pp.Child("patch"), p.Patch, fmt.Sprintf(
			"applying it to %s as Cluster API has it (%s): %v", p.Kind, view, err))}
	}
	doc = map[string]any{}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, field.ErrorList{field.InternalError(pp, err)}
	}
	return doc, nil
}

// viewReader owns reading a patched view back into Cluster API's fields, refusing the rest.
type viewReader struct {
	pp   *field.Path
	p    kind.PatchJSON6902
	errs field.ErrorList
}

// readCluster owns a ClusterConfiguration's view: the components' arguments, the SANs.
func (r *viewReader) readCluster(doc map[string]any, cc *bootstrapv1.ClusterConfiguration) {
	for _, c := range []struct {
		name string
		args *[]bootstrapv1.Arg
	}{{"apiServer", &cc.APIServer.ExtraArgs}, {"controllerManager", &cc.ControllerManager.ExtraArgs}, {"scheduler", &cc.Scheduler.ExtraArgs}} {
		component, _ := take[map[string]any](doc, c.name)
		if component == nil {
			component = map[string]any{}
		}
		r.readArgs(component, "extraArgs", c.name+".", c.args)
		if c.name == "apiServer" {
			cc.APIServer.CertSANs = nil
			sans, _ := take[[]any](component, "certSANs")
			for _, s := range sans {
				cc.APIServer.CertSANs = append(cc.APIServer.CertSANs, fmt.Sprint(s))
			}
		}
		r.refuseRest(component, c.name+".")
	}
}

// readRegistration owns an Init- or JoinConfiguration's view: the kubelet's arguments.
func (r *viewReader) readRegistration(doc map[string]any, reg *bootstrapv1.NodeRegistrationOptions) {
	nr, _ := take[map[string]any](doc, "nodeRegistration")
	if nr == nil {
		nr = map[string]any{}
	}
	r.readArgs(nr, "kubeletExtraArgs", "nodeRegistration.", &reg.KubeletExtraArgs)
	r.refuseRest(nr, "nodeRegistration.")
}

// readArgs replaces into with the arguments at key of m.
func (r *viewReader) readArgs(m map[string]any, key, prefix string, into *[]bootstrapv1.Arg) {
	v, ok := take[any](m, key)
	if !ok {
		*into = nil
		return
	}
	a, err := args(v)
	if err != nil {
		r.errs = append(r.errs, field.Invalid(r.pp.Child("patch"), r.p.Patch, fmt.Sprintf("%s%s: %v", prefix, key, err)))
		return
	}
	*into = a
}

// refuseRest refuses, by name, every field left in m, the part of the view at prefix.
func (r *viewReader) refuseRest(m map[string]any, prefix string) {
	for _, k := range sortedKeys(m) {
		r.errs = append(r.errs, field.Forbidden(r.pp.Child("patch"), fmt.Sprintf(
			"%s field %s%s: Dockyard turns only the fields Cluster API has into its objects", r.p.Kind, prefix, k)))
	}
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
