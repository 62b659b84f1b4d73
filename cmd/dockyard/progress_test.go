package main

import (
	"context"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// TestWaitReadyRidesOutATransientAPIError: a connection to the management cluster's API server
// that drops once (seen as "unexpected EOF" while the quick start followed its cluster) is
// retried, not the end of the wait.
func TestWaitReadyRidesOutATransientAPIError(t *testing.T) {
	ref, objs := oneMachineCluster(metav1.ConditionTrue)
	failures := 1
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithStatusSubresource(objs[:2]...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if failures > 0 {
					failures--
					return io.ErrUnexpectedEOF
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
	if err := waitReady(context.Background(), c, ref, time.Minute); err != nil {
		t.Fatalf("a cluster whose every Machine is Running with a Ready Node, read after one dropped connection: %v", err)
	}
}

// TestWaitNodesTakesNodesNotReady: a cluster whose nodes have no CNI (kind's disableDefaultCNI)
// is created once every Machine runs with its Node; waiting for Ready nodes would never end.
func TestWaitNodesTakesNodesNotReady(t *testing.T) {
	ref, objs := oneMachineCluster(metav1.ConditionFalse)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(objs[:2]...).Build()
	if err := waitNodes(context.Background(), c, ref, time.Minute); err != nil {
		t.Fatalf("a Running Machine with a Node not Ready: %v", err)
	}
	if err := waitReady(context.Background(), c, ref, 3*time.Second); err == nil {
		t.Fatal("waitReady took a Node not Ready")
	}
}

// oneMachineCluster is cluster default/dev wanting one machine, Running with its Node, whose
// Ready condition has status nodeReady: the Cluster, the Machine (both with a status
// subresource) and the DockyardCluster.
func oneMachineCluster(nodeReady metav1.ConditionStatus) (clusterRef, []client.Object) {
	ref := clusterRef{Namespace: "default", Name: "dev"}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
		Status: clusterv1.ClusterStatus{
			ControlPlane: &clusterv1.ClusterControlPlaneStatus{DesiredReplicas: ptr.To[int32](1)},
		},
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: "dev-cp", Labels: map[string]string{clusterv1.ClusterNameLabel: ref.Name}},
		Status: clusterv1.MachineStatus{
			Phase:   string(clusterv1.MachinePhaseRunning),
			NodeRef: clusterv1.MachineNodeReference{Name: "dev-cp"},
			Conditions: []metav1.Condition{{
				Type: clusterv1.MachineNodeReadyCondition, Status: nodeReady, Reason: "Node" + string(nodeReady), LastTransitionTime: metav1.Now(),
			}},
		},
	}
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	return ref, []client.Object{cluster, machine, dc}
}
