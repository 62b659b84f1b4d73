package kubernetes

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// managedLabel marks everything the engine creates in its namespace.
	managedLabel = "app.kubernetes.io/managed-by"
	managedBy    = "dockyard"
	// kindLabel says what an object stands for: container (a Pod and its Service), volume or
	// network.
	kindLabel = "dockyard.x-k8s.io/engine-kind"
	// podLabel selects one container's Pod (its Service's selector).
	podLabel = "dockyard.x-k8s.io/pod"
	// labelsAnnotation keeps the exact labels of a container, network or volume.
	labelsAnnotation = "dockyard.x-k8s.io/labels"
	// networkLabelPrefix marks a Pod attached to a network.
	networkLabelPrefix = "net.dockyard.x-k8s.io/"
)

// labelValue is a label's value as Kubernetes stores it: the value itself when Kubernetes
// allows it, else a hash of it.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	return "h-" + hashOf(v)
}

// labelKey is a label's key as Kubernetes stores it, or false when Kubernetes does not allow
// it (the label is then only in the annotation, and selections on it check the annotation).
func labelKey(k string) (string, bool) {
	return k, len(validation.IsQualifiedName(k)) == 0
}

func hashOf(s string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%016x", h.Sum64())
}

// objectLabels are the Kubernetes labels of an object of a kind carrying the given labels.
func objectLabels(kind string, want map[string]string) map[string]string {
	out := map[string]string{managedLabel: managedBy, kindLabel: kind}
	for k, v := range want {
		if key, ok := labelKey(k); ok {
			out[key] = labelValue(v)
		}
	}
	return out
}

// selector finds the objects of a kind that may carry the labels; matches then checks the
// exact labels.
func selector(kind string, want map[string]string) string {
	sel := labels.NewSelector()
	add := func(k string, op selection.Operator, vals ...string) {
		r, err := labels.NewRequirement(k, op, vals)
		if err == nil {
			sel = sel.Add(*r)
		}
	}
	add(managedLabel, selection.Equals, managedBy)
	add(kindLabel, selection.Equals, kind)
	for k, v := range want {
		key, ok := labelKey(k)
		switch {
		case !ok:
		case v == "":
			add(key, selection.Exists)
		default:
			add(key, selection.Equals, labelValue(v))
		}
	}
	return sel.String()
}

// annotated returns the annotation keeping the exact labels.
func annotated(want map[string]string) map[string]string {
	b, _ := json.Marshal(want)
	return map[string]string{labelsAnnotation: string(b)}
}

// exactLabels reads the labels an object was created with.
func exactLabels(annotations map[string]string) map[string]string {
	out := map[string]string{}
	if s, ok := annotations[labelsAnnotation]; ok {
		_ = json.Unmarshal([]byte(s), &out)
	}
	return out
}

// labelsOf are the exact labels of an object, those its annotation keeps, when its Kubernetes
// labels agree (each one Kubernetes allows is there, with its value); none when they do not, so
// an annotation edited to claim labels the object does not carry matches no selection of them.
func labelsOf(o metav1.Object) map[string]string {
	exact, have := exactLabels(o.GetAnnotations()), o.GetLabels()
	for k, v := range exact {
		if key, ok := labelKey(k); ok && have[key] != labelValue(v) {
			return map[string]string{}
		}
	}
	return exact
}

// ownSelector is selector, of the engine's owner's objects only (watches).
func (r *Runtime) ownSelector(kind string, want map[string]string) string {
	return selector(kind, want) + "," + ownerLabel + "=" + ownerValue(r.owner)
}

// networkLabel is the Pod label that attaches it to a network.
func networkLabel(network string) string {
	name := network
	if len(validation.IsQualifiedName(networkLabelPrefix+name)) != 0 {
		name = "h-" + hashOf(network)
	}
	return networkLabelPrefix + name
}

// serviceName is the name of a container's Service: its own when Kubernetes allows it for a
// Service, else one made from a hash of it.
func serviceName(container string) string {
	if len(validation.IsDNS1035Label(container)) == 0 {
		return container
	}
	return "dockyard-" + hashOf(container)
}

// podSelectorValue is the value of podLabel for a container.
func podSelectorValue(container string) string { return labelValue(container) }

// validName checks a name the engine gives a Pod, ConfigMap or NetworkPolicy.
func validName(what, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errors.Errorf("%s name %q cannot name a Kubernetes object: %s", what, name, strings.Join(errs, "; "))
	}
	return nil
}
