package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// dockyard load image asks the management cluster first (a dry run: nothing recorded) and
// records the images in spec.loadImages once the nodes hold them, each name once.
func TestRecordImages(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ref := clusterRef{Namespace: "team-a", Name: "dev"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&infrav1.DockyardCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
		Spec:       infrav1.DockyardClusterSpec{LoadImages: []string{"app:v1"}},
	}).Build()
	loadImages := func() []string {
		dc := &infrav1.DockyardCluster{}
		if err := c.Get(ctx, ref.objectKey(), dc); err != nil {
			t.Fatal(err)
		}
		return dc.Spec.LoadImages
	}

	if err := recordImages(ctx, c, ref, []string{"app:v2"}, true); err != nil {
		t.Fatal(err)
	}
	if got := loadImages(); !slices.Equal(got, []string{"app:v1"}) {
		t.Fatalf("a dry run recorded %v", got)
	}
	if err := recordImages(ctx, c, ref, []string{"app:v1", "app:v2", "app:v2"}, false); err != nil {
		t.Fatal(err)
	}
	if got := loadImages(); !slices.Equal(got, []string{"app:v1", "app:v2"}) {
		t.Fatalf("spec.loadImages is %v, want [app:v1 app:v2]", got)
	}

	err := recordImages(ctx, c, clusterRef{Namespace: "team-a", Name: "missing"}, []string{"app:v1"}, true)
	if err == nil || !strings.Contains(err.Error(), "team-a/missing") {
		t.Fatalf("a cluster that is not there: got %v, want an error naming it", err)
	}
}
