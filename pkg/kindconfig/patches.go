package kindconfig

import (
	"fmt"
	"maps"
	"slices"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// kubeadmChanges are what kind's kubeadmConfigPatches ask of one machine template: the fields of
// kubeadm's configuration Cluster API has (component flags, the API server's SANs, the kubelet's
// flags at init and at join) and the kubelet's configuration, which kubeadm patches itself from a
// file in its patches directory.
type kubeadmChanges struct {
	apiServer, controllerManager, scheduler []bootstrapv1.Arg
	certSANs                                []string
	initKubelet, joinKubelet                []bootstrapv1.Arg
	kubeletConfiguration                    []string
}

// readPatches reads kind's kubeadmConfigPatches (at path) for the machines of a control plane
// or of workers. Every field kubeadm has and Cluster API does not is refused, by name.
func readPatches(path *field.Path, patches []string, controlPlane bool) (kubeadmChanges, field.ErrorList) {
	var c kubeadmChanges
	var errs field.ErrorList
	for i, raw := range patches {
		p := path.Index(i)
		doc := map[string]any{}
		if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
			errs = append(errs, field.Invalid(p, raw, "not YAML: "+err.Error()))
			continue
		}
		kind, _ := doc["kind"].(string)
		delete(doc, "kind")
		delete(doc, "apiVersion")
		refuseRest := func(doc map[string]any, prefix string) {
			for _, k := range sortedKeys(doc) {
				errs = append(errs, field.Forbidden(p, fmt.Sprintf("%s field %s%s: Dockyard turns only the fields Cluster API has into its objects", kind, prefix, k)))
			}
		}
		switch kind {
		case "ClusterConfiguration":
			if !controlPlane {
				continue // kubeadm reads it when it initializes the control plane only, as in kind
			}
			for name, into := range map[string]*[]bootstrapv1.Arg{"apiServer": &c.apiServer, "controllerManager": &c.controllerManager, "scheduler": &c.scheduler} {
				component, ok := take[map[string]any](doc, name)
				if !ok {
					continue
				}
				args, err := takeArgs(component, "extraArgs")
				if err != nil {
					errs = append(errs, field.Invalid(p, raw, fmt.Sprintf("%s.extraArgs: %v", name, err)))
				}
				*into = append(*into, args...)
				if name == "apiServer" {
					if sans, ok := take[[]any](component, "certSANs"); ok {
						for _, s := range sans {
							c.certSANs = append(c.certSANs, fmt.Sprint(s))
						}
					}
				}
				refuseRest(component, name+".")
			}
			refuseRest(doc, "")
		case "InitConfiguration", "JoinConfiguration":
			reg, ok := take[map[string]any](doc, "nodeRegistration")
			if ok {
				args, err := takeArgs(reg, "kubeletExtraArgs")
				if err != nil {
					errs = append(errs, field.Invalid(p, raw, "nodeRegistration.kubeletExtraArgs: "+err.Error()))
				}
				switch {
				case kind == "JoinConfiguration":
					c.joinKubelet = append(c.joinKubelet, args...)
				case controlPlane:
					c.initKubelet = append(c.initKubelet, args...)
				}
				refuseRest(reg, "nodeRegistration.")
			}
			refuseRest(doc, "")
		case "KubeletConfiguration":
			out, err := yaml.Marshal(doc)
			if err != nil {
				errs = append(errs, field.Invalid(p, raw, err.Error()))
				continue
			}
			c.kubeletConfiguration = append(c.kubeletConfiguration, string(out))
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), kind, []string{"ClusterConfiguration", "InitConfiguration", "JoinConfiguration", "KubeletConfiguration"}))
		}
	}
	return c, errs
}

// take removes key from m and returns its value when it has type T.
func take[T any](m map[string]any, key string) (T, bool) {
	v, ok := m[key].(T)
	if ok {
		delete(m, key)
	}
	return v, ok
}

// takeArgs removes key (extraArgs, kubeletExtraArgs) from m and reads its arguments.
func takeArgs(m map[string]any, key string) ([]bootstrapv1.Arg, error) {
	v, ok := take[any](m, key)
	if !ok {
		return nil, nil
	}
	return args(v)
}

// args reads kubeadm's extra arguments in either form: v1beta3's map or v1beta4's list of name
// and value.
func args(v any) ([]bootstrapv1.Arg, error) {
	var out []bootstrapv1.Arg
	switch a := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(a) {
			out = append(out, bootstrapv1.Arg{Name: k, Value: ptr.To(fmt.Sprint(a[k]))})
		}
	case []any:
		for _, item := range a {
			m, ok := item.(map[string]any)
			name, _ := m["name"].(string)
			if !ok || name == "" {
				return nil, errors.New("want a list of {name, value}")
			}
			out = append(out, bootstrapv1.Arg{Name: name, Value: ptr.To(fmt.Sprint(m["value"]))})
		}
	default:
		return nil, errors.New("want a map or a list of {name, value}")
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// kubeletPatchFiles are kubeadm's patch files for the kubelet's configuration, in the directory
// the flavor's kubeadm configuration names: the strategic ones, then the JSON patches (kubeadm
// applies them in name order, as kind applies its JSON 6902 patches after the others).
func kubeletPatchFiles(strategic, json []string) []bootstrapv1.File {
	var files []bootstrapv1.File
	add := func(docs []string, first int, suffix string) {
		for i, d := range docs {
			files = append(files, bootstrapv1.File{
				Path:        fmt.Sprintf("%s/kubeletconfiguration%d%s", patchesDir, first+i, suffix),
				Owner:       "root:root",
				Permissions: "0644",
				Content:     d,
			})
		}
	}
	add(strategic, 100, "+strategic.yaml")
	add(json, 200, "+json.json")
	return files
}

// patchesDir is where the flavor's kubeadm configuration reads its patches.
const patchesDir = "/etc/dockyard/kubeadm-patches"

// mergeArgs sets each of add in args (a later one wins).
func mergeArgs(args []bootstrapv1.Arg, add []bootstrapv1.Arg) []bootstrapv1.Arg {
	for _, a := range add {
		args = setArg(args, a.Name, *a.Value)
	}
	return args
}

// appendNew appends what is not in list yet.
func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}
