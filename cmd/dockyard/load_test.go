package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// clusterClient is a fake management cluster holding ref's DockyardCluster with loadImages.
func clusterClient(t *testing.T, ref clusterRef, loadImages []string) *fake.ClientBuilder {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(&infrav1.DockyardCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
		Spec:       infrav1.DockyardClusterSpec{LoadImages: loadImages},
	})
}

// dockyard load image asks the management cluster first (a dry run: nothing recorded) and
// records the images in spec.loadImages once the nodes hold them, each name once.
func TestRecordImages(t *testing.T) {
	ctx := context.Background()
	ref := clusterRef{Namespace: "team-a", Name: "dev"}
	c := clusterClient(t, ref, []string{"app:v1"}).Build()
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

// The cluster's controller writes its status while images load: a conflict when recording them
// is retried on the object read again.
func TestRecordImagesRetriesAConflict(t *testing.T) {
	ctx := context.Background()
	ref := clusterRef{Namespace: "team-a", Name: "dev"}
	conflicts := 1
	c := clusterClient(t, ref, nil).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Resource: "dockyardclusters"}, obj.GetName(), errors.New("the object has been modified"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	if err := recordImages(ctx, c, ref, []string{"app:v1"}, false); err != nil {
		t.Fatal(err)
	}
	dc := &infrav1.DockyardCluster{}
	if err := c.Get(ctx, ref.objectKey(), dc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dc.Spec.LoadImages, []string{"app:v1"}) {
		t.Errorf("spec.loadImages is %v after a conflict, want [app:v1]", dc.Spec.LoadImages)
	}
}
