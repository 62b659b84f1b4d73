package infrastructure

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// An infrastructure cluster whose administrator applied config/infrastructure/placement_policy.yaml
// refuses, in a namespace annotated with a node selector and a runtime class, any Pod (a team's
// own, made with its kubeconfig) without the namespace's node selector pairs or with another
// runtime class, naming the field; a Pod that carries them is admitted, and so is any Pod of a
// namespace without the annotations.
func TestThePlacementPolicyRefusesPodsPlacedElsewhere(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with make test")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "infrastructure", "placement_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(raw)), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	placed := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Annotations: map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector": "pool=team-a, disk=ssd",
		"dockyard.x-k8s.io/runtime-class-name":        "kata",
	}}}
	free := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}
	for _, handler := range []string{"kata", "runc"} {
		if err := c.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: handler}, Handler: handler}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []*corev1.Namespace{placed, free} {
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(ns, name string, selector map[string]string, runtimeClass string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "node", Image: "kindest/node:v1.34.0"}}}}
		if runtimeClass != "" {
			p.Spec.RuntimeClassName = &runtimeClass
		}
		return p
	}
	good := map[string]string{"pool": "team-a", "disk": "ssd", "kubernetes.io/os": "linux"}
	// The policy's binding takes a moment to reach the API server's admission.
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Create(ctx, pod("team-a", "probe", nil, ""))
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			break
		}
		if err == nil {
			_ = c.Delete(ctx, pod("team-a", "probe", nil, ""))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the placement policy refused nothing within a minute: %v", err)
		}
		time.Sleep(time.Second)
	}
	for what, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"no node selector":          {pod("team-a", "bare", nil, "kata"), "spec.nodeSelector"},
		"another pool":              {pod("team-a", "other-pool", map[string]string{"pool": "team-b", "disk": "ssd"}, "kata"), "spec.nodeSelector"},
		"one pair of two":           {pod("team-a", "half", map[string]string{"pool": "team-a"}, "kata"), "spec.nodeSelector"},
		"no runtime class":          {pod("team-a", "no-class", good, ""), "spec.runtimeClassName"},
		"another runtime class":     {pod("team-a", "runc", good, "runc"), "spec.runtimeClassName"},
		"the namespace's placement": {pod("team-a", "placed", good, "kata"), ""},
		"a namespace without":       {pod("team-b", "anywhere", nil, ""), ""},
	} {
		err := c.Create(ctx, tc.pod)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want the Pod admitted", what, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a refusal naming %s", what, err, tc.want)
		}
	}
}
