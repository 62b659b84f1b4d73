package framework

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// dumpKinds are the objects Dump lists, in the order a person reads a cluster top-down.
var dumpKinds = []schema.GroupVersionKind{
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "DockyardCluster"},
	{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineSet"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachinePool"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Machine"},
	{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Kind: "DockyardMachine"},
	{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"},
	{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineHealthCheck"},
	{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSet"},
}

// Dump writes what a person needs when an end-to-end run fails: the Cluster API and Dockyard
// objects with their conditions, recent warning events, each process's state and memory, and the
// last lines of each process's log. It never fails: what cannot be read is reported inline.
func (p *ManagementPlane) Dump(ctx context.Context, w io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fmt.Fprintf(w, "===== management plane %s (kubeconfig %s)\n", p.workDir, p.kubeconfig)

	for _, gvk := range dumpKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := p.client.List(ctx, list); err != nil {
			fmt.Fprintf(w, "--- %s: cannot list: %v\n", gvk.Kind, err)
			continue
		}
		if len(list.Items) == 0 {
			continue
		}
		fmt.Fprintf(w, "--- %s (%d)\n", gvk.Kind, len(list.Items))
		for i := range list.Items {
			dumpObject(w, &list.Items[i])
		}
	}

	events := &corev1.EventList{}
	if err := p.client.List(ctx, events); err != nil {
		fmt.Fprintf(w, "--- Events: cannot list: %v\n", err)
	} else {
		var warnings []corev1.Event
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				warnings = append(warnings, e)
			}
		}
		sort.Slice(warnings, func(i, j int) bool { return eventTime(warnings[i]).Before(eventTime(warnings[j])) })
		if len(warnings) > 30 {
			warnings = warnings[len(warnings)-30:]
		}
		if len(warnings) > 0 {
			fmt.Fprintf(w, "--- last %d warning events\n", len(warnings))
		}
		for _, e := range warnings {
			fmt.Fprintf(w, "  %s %s %s/%s: %s: %s (x%d)\n", eventTime(e).Format(time.TimeOnly), e.InvolvedObject.Kind,
				e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason, oneLine(e.Message), max(e.Count, 1))
		}
	}

	fmt.Fprintf(w, "--- processes\n")
	for _, proc := range p.procs {
		fmt.Fprintf(w, "  %-28s pid %-7d %-22s rss %4d MiB  %s\n", proc.name, proc.pid(), proc.state(), proc.rss()>>20, proc.logPath)
	}
	for _, proc := range p.procs {
		fmt.Fprintf(w, "--- last lines of %s\n%s\n", proc.logPath, indent(tailFile(proc.logPath, 30)))
	}
	fmt.Fprintf(w, "===== end of management plane dump\n")
}

// dumpObject prints one object: name, phase, deletion, finalizers, controlling owner, conditions.
func dumpObject(w io.Writer, obj *unstructured.Unstructured) {
	var notes []string
	if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase != "" {
		notes = append(notes, "phase "+phase)
	}
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		notes = append(notes, "deleting since "+ts.Format(time.TimeOnly))
	}
	if f := obj.GetFinalizers(); len(f) > 0 {
		notes = append(notes, "finalizers "+strings.Join(f, ","))
	}
	for _, ref := range obj.GetOwnerReferences() {
		notes = append(notes, "owner "+ref.Kind+"/"+ref.Name)
	}
	if paused, ok := obj.GetAnnotations()["cluster.x-k8s.io/paused"]; ok {
		notes = append(notes, "paused annotation "+paused)
	}
	fmt.Fprintf(w, "  %s/%s (%s)\n", obj.GetNamespace(), obj.GetName(), strings.Join(notes, "; "))
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "    %v=%v %v: %s\n", cond["type"], cond["status"], cond["reason"], oneLine(fmt.Sprint(valueOr(cond["message"], ""))))
	}
}

func valueOr(v any, def any) any {
	if v == nil {
		return def
	}
	return v
}

func oneLine(s string) string {
	s = strings.ReplaceAll(strings.TrimSpace(s), "\n", " | ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.CreationTimestamp.Time
	}
}
