package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// The namespace's administrator places its node Pods with annotations on the namespace: every
// Pod the engine makes carries the node selector, the tolerations and the runtime class, and
// the engine's zones are those of the nodes they allow (one with the selector's label, its
// taint tolerated). A team's spec has no say in it. An annotation that does not parse is an
// error naming it, and nothing is made.
func TestPodsRunWhereTheNamespacesAdministratorPlacesThem(t *testing.T) {
	ctx := context.Background()
	zone := func(name, z string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		l := map[string]string{corev1.LabelTopologyZone: z}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	teamTaint := corev1.Taint{Key: "pool", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}
	cs := fake.NewClientset(
		zone("a", "a", map[string]string{"pool": "team-a"}, teamTaint),
		zone("b", "b", map[string]string{"pool": "team-a"}),
		zone("c", "c", nil),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pods", Annotations: map[string]string{
			nodeSelectorAnnotation: "pool=team-a",
			tolerationsAnnotation:  `[{"key":"pool","operator":"Equal","value":"team-a","effect":"NoSchedule"}]`,
			runtimeClassAnnotation: "kata",
		}}},
	)
	r := newRuntime(nil, cs, "pods")
	zones, err := r.Zones(ctx)
	if err != nil || fmt.Sprint(zones) != "[a b]" {
		t.Errorf("zones %v (%v), want a (tainted, tolerated) and b: c's node lacks the selector's label", zones, err)
	}
	if err := r.CreateContainer(ctx, container.ContainerSpec{Name: "dev-cp", Image: "kindest/node:v1.34.0", Zone: "b"}); err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("pods").Get(ctx, "dev-cp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeSelector["pool"] != "team-a" || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != "kata" {
		t.Errorf("the Pod's node selector %v and runtime class %v, want the namespace's", pod.Spec.NodeSelector, pod.Spec.RuntimeClassName)
	}
	tolerated := false
	for _, tol := range pod.Spec.Tolerations {
		tolerated = tolerated || (tol.Key == "pool" && tol.Value == "team-a")
	}
	if !tolerated {
		t.Errorf("the Pod's tolerations %+v lack the namespace's", pod.Spec.Tolerations)
	}

	bad := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pods", Annotations: map[string]string{tolerationsAnnotation: "pool=team-a"}}})
	err = newRuntime(nil, bad, "pods").CreateContainer(ctx, container.ContainerSpec{Name: "dev-cp", Image: "kindest/node:v1.34.0"})
	if err == nil || !strings.Contains(err.Error(), tolerationsAnnotation) {
		t.Errorf("a namespace whose tolerations do not parse: %v, want an error naming %s", err, tolerationsAnnotation)
	}
	if pods, _ := bad.CoreV1().Pods("pods").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d Pods made with a placement that does not parse", len(pods.Items))
	}
}
