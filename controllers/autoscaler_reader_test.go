package controllers

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// A test-only reader of a node group the way the Kubernetes cluster autoscaler's clusterapi
// provider reads it when it builds the template node of a node group at zero. The autoscaler
// cannot be built here (the module proxy refuses k8s.io/autoscaler/cluster-autoscaler), so this
// mirrors, path by path, kubernetes/autoscaler cluster-autoscaler/cloudprovider/clusterapi:
//
//   - clusterapi_utils.go: the annotation keys, parseScalingBounds (min/max size with
//     strconv.Atoi), parseKey (cpu, memory, ephemeral-disk as quantities), parseIntKey
//     (maxPods as an integer), getManagedNodeLabelsFromLabels / isManagedLabel, and the default
//     architecture (CAPI_SCALE_ZERO_DEFAULT_ARCH, else amd64);
//   - clusterapi_unstructured.go: readInfrastructureReferenceResource
//     (spec.template.spec.infrastructureRef's apiGroup, kind and name; the group's preferred
//     version from discovery; the resource lower(kind)+"s"), resourceCapacityFromInfrastructureObject
//     (status.capacity as a map of strings, each parsed with resource.ParseQuantity, unparsable
//     ones dropped), systemInfoFromInfrastructureObject (status.nodeInfo's architecture and
//     operatingSystem), InstanceCapacity (the annotations override the status; pods is always
//     set: the maxPods annotation, else 110), CanScaleFromZero (cpu and memory present),
//     Labels and Taints;
//   - clusterapi_nodegroup.go: newNodeGroupFromScalableResource (a node group needs max > 0 and
//     max >= min; at zero replicas it must be able to scale from zero), TemplateNodeInfo and
//     buildTemplateLabels (kubernetes.io/arch, kubernetes.io/os and kubernetes.io/hostname,
//     then nodeInfo's architecture and operating system, then the node group's labels).
//
// Where the autoscaler silently drops what it cannot parse, the reader also records it, so a
// test can fail naming the path instead of seeing a node group vanish.

// The annotations and defaults of the clusterapi provider (clusterapi_utils.go, with the
// default CAPI_GROUP cluster.x-k8s.io; clusterapi_nodegroup.go for defaultMaxPods).
const (
	caMinSizeKey     = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	caMaxSizeKey     = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	caCPUKey         = "capacity.cluster-autoscaler.kubernetes.io/cpu"
	caMemoryKey      = "capacity.cluster-autoscaler.kubernetes.io/memory"
	caDiskKey        = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"
	caMaxPodsKey     = "capacity.cluster-autoscaler.kubernetes.io/maxPods"
	caLabelsKey      = "capacity.cluster-autoscaler.kubernetes.io/labels"
	caTaintsKey      = "capacity.cluster-autoscaler.kubernetes.io/taints"
	caDefaultMaxPods = 110
	caDefaultArch    = "amd64"
	caDefaultOS      = "linux"
)

// autoscalerNodeGroup is what the autoscaler makes of a MachineDeployment or MachineSet.
type autoscalerNodeGroup struct {
	MinSize, MaxSize int
	Replicas         int64
	// Template is the node the autoscaler simulates when it scales the group up from zero.
	Template corev1.Node
	// Dropped lists what the autoscaler would have ignored: unparsable status.capacity
	// entries and status.nodeInfo that is not a map of strings.
	Dropped []string
}

// autoscalerReader reads through unstructured objects, discovery and a dynamic client, as the
// autoscaler does.
type autoscalerReader struct {
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
}

// nodeGroup reads a scalable resource (MachineDeployment or MachineSet) and returns the node
// group the autoscaler would make of it, or an error naming the first path it could not use.
func (r *autoscalerReader) nodeGroup(ctx context.Context, scalable *unstructured.Unstructured) (*autoscalerNodeGroup, error) {
	what := fmt.Sprintf("%s %s/%s", scalable.GetKind(), scalable.GetNamespace(), scalable.GetName())
	annotations := scalable.GetAnnotations()
	ng := &autoscalerNodeGroup{}

	// parseScalingBounds: a missing annotation is 0, an unparsable one an error.
	var err error
	if ng.MinSize, err = caSize(annotations, caMinSizeKey); err != nil {
		return nil, errors.Wrap(err, what)
	}
	if ng.MaxSize, err = caSize(annotations, caMaxSizeKey); err != nil {
		return nil, errors.Wrap(err, what)
	}
	if ng.MinSize < 0 || ng.MaxSize < 0 || ng.MaxSize < ng.MinSize {
		return nil, errors.Errorf("%s: invalid min/max annotations %d/%d", what, ng.MinSize, ng.MaxSize)
	}
	// newNodeGroupFromScalableResource: no scaling capacity, no node group.
	if ng.MaxSize == 0 {
		return nil, errors.Errorf("%s: annotation %s is missing or 0: the autoscaler makes no node group of it", what, caMaxSizeKey)
	}
	replicas, found, err := unstructured.NestedInt64(scalable.Object, "spec", "replicas")
	if err != nil || !found {
		return nil, errors.Errorf("%s: spec.replicas is unreadable (found %t): %v", what, found, err)
	}
	ng.Replicas = replicas

	// InstanceCapacity: the annotations first.
	fromAnnotations := corev1.ResourceList{}
	for key, name := range map[string]corev1.ResourceName{caCPUKey: corev1.ResourceCPU, caMemoryKey: corev1.ResourceMemory, caDiskKey: corev1.ResourceEphemeralStorage} {
		if v := annotations[key]; v != "" {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, errors.Wrapf(err, "%s: annotation %s", what, key)
			}
			if !q.IsZero() {
				fromAnnotations[name] = q
			}
		}
	}
	maxPods := resource.NewQuantity(caDefaultMaxPods, resource.DecimalSI)
	if v := annotations[caMaxPodsKey]; v != "" {
		n, err := strconv.ParseInt(v, 10, 0)
		if err != nil {
			return nil, errors.Wrapf(err, "%s: annotation %s is not an integer", what, caMaxPodsKey)
		}
		if n != 0 {
			maxPods = resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	fromAnnotations[corev1.ResourcePods] = *maxPods

	// readInfrastructureReferenceResource, then the template's status.
	infra, err := r.infrastructureTemplate(ctx, scalable)
	if err != nil {
		return nil, errors.Wrap(err, what)
	}
	capacity := corev1.ResourceList{}
	statusCapacity, found, err := unstructured.NestedStringMap(infra.Object, "status", "capacity")
	switch {
	case err != nil:
		ng.Dropped = append(ng.Dropped, fmt.Sprintf("status.capacity is not a map of strings: %v", err))
	case found:
		for k, v := range statusCapacity {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				ng.Dropped = append(ng.Dropped, fmt.Sprintf("status.capacity.%s %q: %v", k, v, err))
				continue
			}
			capacity[corev1.ResourceName(k)] = q
		}
	}
	for k, v := range fromAnnotations {
		capacity[k] = v
	}
	// CanScaleFromZero.
	_, cpuOK := capacity[corev1.ResourceCPU]
	_, memOK := capacity[corev1.ResourceMemory]
	if ng.Replicas == 0 && (!cpuOK || !memOK) {
		return nil, errors.Errorf("%s has 0 replicas but the autoscaler finds no cpu and memory for it (status.capacity of %s %s: %v, dropped: %v; annotations: %v): it cannot scale from zero and is not a node group",
			what, infra.GetKind(), infra.GetName(), statusCapacity, ng.Dropped, fromAnnotations)
	}

	// systemInfoFromInfrastructureObject.
	nodeInfo := corev1.NodeSystemInfo{}
	statusNodeInfo, found, err := unstructured.NestedStringMap(infra.Object, "status", "nodeInfo")
	switch {
	case err != nil:
		ng.Dropped = append(ng.Dropped, fmt.Sprintf("status.nodeInfo is not a map of strings: %v", err))
	case found:
		nodeInfo.Architecture = statusNodeInfo["architecture"]
		nodeInfo.OperatingSystem = statusNodeInfo["operatingSystem"]
	}

	// TemplateNodeInfo and buildTemplateLabels.
	name := fmt.Sprintf("%s-asg-0", scalable.GetName())
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.NodeInfo = nodeInfo
	node.Labels = map[string]string{corev1.LabelArchStable: caDefaultArch, corev1.LabelOSStable: caDefaultOS, corev1.LabelHostname: name}
	// InstanceSystemInfo returns the (possibly empty) node info of every template it could
	// read, and buildTemplateLabels lets it override the defaults: a template without
	// status.nodeInfo gives empty kubernetes.io/arch and kubernetes.io/os labels.
	node.Labels[corev1.LabelArchStable] = nodeInfo.Architecture
	node.Labels[corev1.LabelOSStable] = nodeInfo.OperatingSystem
	if labels, ok, err := unstructured.NestedStringMap(scalable.Object, "spec", "template", "metadata", "labels"); ok && err == nil {
		for k, v := range labels {
			if caManagedLabel(k) {
				node.Labels[k] = v
			}
		}
	}
	if v, ok := annotations[caLabelsKey]; ok {
		for _, kv := range strings.Split(v, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				node.Labels[k] = v
			}
		}
	}
	var dropped []string
	node.Spec.Taints, dropped = caTaints(scalable)
	ng.Dropped = append(ng.Dropped, dropped...)
	ng.Template = node
	return ng, nil
}

// infrastructureTemplate reads spec.template.spec.infrastructureRef (the v1beta2 form: apiGroup,
// kind, name) and gets the object with the group's preferred version.
func (r *autoscalerReader) infrastructureTemplate(ctx context.Context, scalable *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ref, found, err := unstructured.NestedStringMap(scalable.Object, "spec", "template", "spec", "infrastructureRef")
	if !found || err != nil {
		return nil, errors.Errorf("spec.template.spec.infrastructureRef is missing or not a map of strings (%v)", err)
	}
	kind, group, name := ref["kind"], ref["apiGroup"], ref["name"]
	if kind == "" || group == "" || name == "" {
		return nil, errors.Errorf("spec.template.spec.infrastructureRef %v lacks apiGroup, kind or name", ref)
	}
	groups, err := r.discovery.ServerGroups()
	if err != nil {
		return nil, errors.Wrap(err, "discovering API groups")
	}
	version := ""
	for _, g := range groups.Groups {
		if g.Name == group {
			version = g.PreferredVersion.Version
		}
	}
	if version == "" {
		return nil, errors.Errorf("API group %s of spec.template.spec.infrastructureRef is not served", group)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: strings.ToLower(kind) + "s"}
	obj, err := r.dynamic.Resource(gvr).Namespace(scalable.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, errors.Wrapf(err, "reading the infrastructure template %s %s", gvr, name)
	}
	return obj, nil
}

// caSize is minSize / maxSize of clusterapi_utils.go: missing is 0, else strconv.Atoi.
func caSize(annotations map[string]string, key string) (int, error) {
	v, ok := annotations[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	return n, errors.Wrapf(err, "annotation %s", key)
}

// caManagedLabel is isManagedLabel of clusterapi_utils.go: the labels Cluster API propagates
// from a Machine to its Node.
func caManagedLabel(key string) bool {
	domain := strings.Split(key, "/")[0]
	for _, d := range []string{"node-restriction.kubernetes.io", "node.cluster.x-k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return domain == "node-role.kubernetes.io"
}

// caTaints is Taints of clusterapi_unstructured.go: spec.template.spec.taints, then the taints
// annotation ("key=value:Effect,..." parsed like parseTaint), whose taints replace those of the
// same key and effect. Taints the autoscaler skips are returned as dropped.
func caTaints(scalable *unstructured.Unstructured) (taints []corev1.Taint, dropped []string) {
	if raw, ok, err := unstructured.NestedSlice(scalable.Object, "spec", "template", "spec", "taints"); ok && err == nil {
		for _, item := range raw {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			key, _ := m["key"].(string)
			value, _ := m["value"].(string)
			effect, _ := m["effect"].(string)
			taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
		}
	}
	v, ok := scalable.GetAnnotations()[caTaintsKey]
	if !ok {
		return taints, nil
	}
	for _, s := range strings.Split(v, ",") {
		t, err := caParseTaint(s)
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("annotation %s: %v", caTaintsKey, err))
			continue
		}
		replaced := false
		for i := range taints {
			if taints[i].Key == t.Key && taints[i].Effect == t.Effect {
				taints[i], replaced = t, true
			}
		}
		if !replaced {
			taints = append(taints, t)
		}
	}
	return taints, dropped
}

// caParseTaint is parseTaint of clusterapi_unstructured.go: "key", or "key[=value]:effect".
func caParseTaint(s string) (corev1.Taint, error) {
	parts := strings.Split(s, ":")
	var t corev1.Taint
	switch len(parts) {
	case 1:
		t.Key = parts[0]
	case 2:
		t.Effect = corev1.TaintEffect(parts[1])
		kv := strings.Split(parts[0], "=")
		if len(kv) > 2 {
			return t, errors.Errorf("invalid taint spec %q", s)
		}
		t.Key = kv[0]
		if len(kv) == 2 {
			t.Value = kv[1]
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return t, errors.Errorf("invalid taint spec %q: %s", s, strings.Join(errs, "; "))
			}
		}
	default:
		return t, errors.Errorf("invalid taint spec %q", s)
	}
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return t, errors.Errorf("invalid taint spec %q: %s", s, strings.Join(errs, "; "))
	}
	return t, nil
}
