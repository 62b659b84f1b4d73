package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A Pod that waits for a node or an image is on its way; one no node takes, or whose image or
// configuration is refused, is said so, with Kubernetes' reason.
func TestStuckPodsSayWhy(t *testing.T) {
	waiting := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: mainContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details"}},
		}}}}
	}
	unschedulable := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available",
	}}}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		says string
	}{
		"pulling":       {waiting("ContainerCreating"), ""},
		"scheduling":    {&corev1.Pod{}, ""},
		"no image":      {waiting("ImagePullBackOff"), "ImagePullBackOff: details"},
		"bad image":     {waiting("InvalidImageName"), "InvalidImageName"},
		"no node takes": {unschedulable, "cannot be scheduled: 0/4 nodes are available"},
	} {
		err := stuck(tc.pod)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: %v, want nothing", name, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want %q", name, err, tc.says)
		}
	}
}

// Labels Kubernetes refuses as values are stored hashed, and a selector of the exact labels
// still finds them; keys it refuses are left to the annotation.
func TestLabelsKubernetesRefusesAreStillSelected(t *testing.T) {
	want := map[string]string{"dockyard.x-k8s.io/machine": "team-a/md-0", "io.x-k8s.kind.role": "worker", "not a key": "x"}
	got := objectLabels("container", want)
	if got["io.x-k8s.kind.role"] != "worker" || got["dockyard.x-k8s.io/machine"] == "team-a/md-0" || got["dockyard.x-k8s.io/machine"] == "" {
		t.Errorf("labels %v", got)
	}
	if _, ok := got["not a key"]; ok {
		t.Errorf("a key Kubernetes refuses became a label: %v", got)
	}
	sel := selector("container", map[string]string{"dockyard.x-k8s.io/machine": "team-a/md-0", "io.x-k8s.kind.role": ""})
	if !strings.Contains(sel, "dockyard.x-k8s.io/machine="+got["dockyard.x-k8s.io/machine"]) || !strings.Contains(sel, "io.x-k8s.kind.role") {
		t.Errorf("selector %q", sel)
	}
	if exact := exactLabels(annotated(want)); len(exact) != 3 || exact["dockyard.x-k8s.io/machine"] != "team-a/md-0" {
		t.Errorf("exact labels %v", exact)
	}
}
