package workloadapi

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// serve starts a Server on a loopback listener and returns a controller-runtime client of it,
// made as Cluster API's ClusterCache makes its clients (discovery through a lazy REST mapper).
func serve(t *testing.T) (*Store, client.WithWatch, *rest.Config) {
	t.Helper()
	store := NewStore()
	srv := httptest.NewServer(NewServer(store, "v1.34.4"))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New(), Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return store, c, cfg
}

// Cluster API's clients read and write a simulated workload cluster as they do a real one:
// create, get, list by label and by field, merge and strategic merge patches, status through its
// subresource only, optimistic concurrency, finalizers, and a Pod's eviction.
func TestTheServerAnswersAsKubeAPIServer(t *testing.T) {
	ctx := context.Background()
	_, c, cfg := serve(t)

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil || v.GitVersion != "v1.34.4" || v.Minor != "34" {
		t.Fatalf("/version: %+v, %v; want v1.34.4", v, err)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Labels: map[string]string{"role": "cp"}},
		Spec: corev1.NodeSpec{ProviderID: "dockyard:////cp-0", Taints: []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if node.UID == "" || node.ResourceVersion == "" || node.CreationTimestamp.IsZero() {
		t.Errorf("created Node %+v: want uid, resourceVersion and creationTimestamp set by the server", node.ObjectMeta)
	}
	if err := c.Create(ctx, node.DeepCopy()); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating it again: %v, want AlreadyExists", err)
	}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "md-0", Labels: map[string]string{"role": "worker"}}}
	if err := c.Create(ctx, worker); err != nil {
		t.Fatal(err)
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{"role": "worker"}); err != nil || len(nodes.Items) != 1 || nodes.Items[0].Name != "md-0" {
		t.Errorf("listing Nodes by label: %v, %v; want md-0", names(nodes.Items), err)
	}

	// A strategic merge patch merges taints by key; a merge patch would replace the list.
	before := node.DeepCopy()
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "b", Effect: corev1.TaintEffectNoExecute})
	if err := c.Patch(ctx, node, client.StrategicMergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.Taints) != 2 {
		t.Errorf("taints after a strategic merge patch: %v, want a and b", node.Spec.Taints)
	}

	// The status goes through its subresource; an update of the object leaves it as it was.
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = nil
	node.Labels["x"] = "y"
	if err := c.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	var got corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "cp-0"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 1 || got.Labels["x"] != "y" {
		t.Errorf("after a status update and an object update: status %v, labels %v; want Ready kept and label x", got.Status.Conditions, got.Labels)
	}

	stale := got.DeepCopy()
	stale.ResourceVersion = before.ResourceVersion
	stale.Labels["z"] = "1"
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("an update from an old resourceVersion: %v, want Conflict", err)
	}

	// Finalizers hold a deleted object until the last one goes.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-cp-0", Finalizers: []string{"test/hold"}},
		Spec: corev1.PodSpec{NodeName: "cp-0", Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
		Spec: corev1.PodSpec{NodeName: "md-0", Containers: []corev1.Container{{Name: "coredns", Image: "coredns"}}}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.MatchingFields{"spec.nodeName": "cp-0"}); err != nil || len(pods.Items) != 1 || pods.Items[0].Name != "etcd-cp-0" {
		t.Errorf("Pods of node cp-0 by field: %v, %v; want etcd-cp-0", len(pods.Items), err)
	}
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("a deleted Pod with a finalizer: %v, deletionTimestamp %v; want it kept, marked", err, pod.DeletionTimestamp)
	}
	pod.Finalizers = nil
	if err := c.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); !apierrors.IsNotFound(err) {
		t.Errorf("after its last finalizer: %v, want NotFound", err)
	}

	// A drain evicts.
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}}
	if err := c.SubResource("eviction").Create(ctx, other, eviction); err != nil {
		t.Fatalf("evicting: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), other); !apierrors.IsNotFound(err) {
		t.Errorf("an evicted Pod: %v, want NotFound", err)
	}

	// A merge patch, and an apply patch that makes what is not there.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}, Data: map[string]string{"a": "1"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"b":"2"}}`))); err != nil || cm.Data["a"] != "1" || cm.Data["b"] != "2" {
		t.Errorf("merge patch: %v, %v; want a and b", cm.Data, err)
	}
	applied := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "applied"}, Data: map[string]string{"k": "v"}}
	//nolint:staticcheck // Cluster API's own clients still apply this way
	if err := c.Patch(ctx, applied, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(applied), applied); err != nil || applied.Data["k"] != "v" {
		t.Errorf("an applied ConfigMap: %v, %v", applied.Data, err)
	}

	if err := c.Get(ctx, client.ObjectKey{Name: "x"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Namespace never made: %v, want NotFound", err)
	}
}

// An informer (controller-runtime's cache, as the ClusterCache's) lists, then watches from the
// list's version and sees every later change; a watch from a version the store no longer keeps
// is told it expired, and its client lists again.
func TestInformersFollowTheStore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, c, cfg := serve(t)
	for i := range 3 {
		if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-" + strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), Mapper: mustMapper(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("the cache never synced")
	}
	waitNodes := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var nodes corev1.NodeList
			if err := informers.List(ctx, &nodes); err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cache holds %d Nodes after 10 s, want %d", len(nodes.Items), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitNodes(3)
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-3"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-0"}}); err != nil {
		t.Fatal(err)
	}
	waitNodes(3)

	gr := schema.GroupResource{Resource: "nodes"}
	old := store.ResourceVersion()
	for i := range historySize + 1 {
		if _, err := store.Create(schema.GroupResource{Resource: "configmaps"}, configMap("cm-"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Watch(gr, "", old, Selector{}, false); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("a watch from a version no longer kept: %v, want Expired", err)
	}
	w, err := store.Watch(gr, "", store.ResourceVersion(), Selector{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-1"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.Events():
		if e.Type != "DELETED" || e.Object.GetName() != "n-1" {
			t.Errorf("event %s %s, want DELETED n-1", e.Type, e.Object.GetName())
		}
	case <-time.After(5 * time.Second):
		t.Error("no event 5 s after a delete")
	}
	waitNodes(2)
}

func mustMapper(t *testing.T, cfg *rest.Config) meta.RESTMapper {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func configMap(name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("v1")
	o.SetKind("ConfigMap")
	o.SetNamespace("default")
	o.SetName(name)
	return o
}

func names(nodes []corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}
