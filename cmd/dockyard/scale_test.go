package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
)

func scaleFixture(t *testing.T, mds ...string) client.Client {
	t.Helper()
	sc := dyscheme.New()
	objs := []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dev"}, Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "dev-control-plane"},
		}},
		&controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dev-control-plane"},
			Spec: controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](1)}},
	}
	for _, md := range mds {
		objs = append(objs, &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: md,
			Labels: map[string]string{clusterv1.ClusterNameLabel: "dev"}}, Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr.To[int32](1)}})
	}
	return fake.NewClientBuilder().WithScheme(sc).WithObjects(objs...).Build()
}

func TestScaleClusterPatchesTheControlPlaneAndTheMachineDeployment(t *testing.T) {
	ctx := context.Background()
	c := scaleFixture(t, "dev-md-0")
	ref := clusterRef{Namespace: "default", Name: "dev"}
	want, err := scaleCluster(ctx, c, ref, scaleOptions{controlPlanes: 3, workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want != 5 {
		t.Errorf("the cluster wants %d machines, want 5", want)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-control-plane"}, kcp)
	md := &clusterv1.MachineDeployment{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-md-0"}, md)
	if *kcp.Spec.Replicas != 3 || *md.Spec.Replicas != 2 {
		t.Errorf("control plane %d, workers %d; want 3 and 2", *kcp.Spec.Replicas, *md.Spec.Replicas)
	}
	// Workers only: the control plane stays.
	if want, err := scaleCluster(ctx, c, ref, scaleOptions{controlPlanes: -1, workers: 0}); err != nil || want != 3 {
		t.Errorf("workers to 0: want %d, %v; want 3", want, err)
	}
}

func TestScaleClusterNamesTheMachineDeploymentsWhenItCannotChoose(t *testing.T) {
	ctx := context.Background()
	c := scaleFixture(t, "dev-md-0", "dev-md-1")
	ref := clusterRef{Namespace: "default", Name: "dev"}
	_, err := scaleCluster(ctx, c, ref, scaleOptions{controlPlanes: -1, workers: 2})
	if err == nil || !strings.Contains(err.Error(), "dev-md-0, dev-md-1") || !strings.Contains(err.Error(), "--machine-deployment") {
		t.Errorf("error %v, want one naming both and the flag", err)
	}
	if _, err := scaleCluster(ctx, c, ref, scaleOptions{controlPlanes: -1, workers: 2, machineDeployment: "dev-md-9"}); err == nil || !strings.Contains(err.Error(), "no MachineDeployment dev-md-9") {
		t.Errorf("error %v", err)
	}
	if want, err := scaleCluster(ctx, c, ref, scaleOptions{controlPlanes: -1, workers: 3, machineDeployment: "dev-md-1"}); err != nil || want != 5 {
		t.Errorf("dev-md-1 to 3: want %d, %v; want 5", want, err)
	}
}

func TestScaleClusterOfAClusterClassChangesItsTopology(t *testing.T) {
	ctx := context.Background()
	sc := dyscheme.New()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cc"}, Spec: clusterv1.ClusterSpec{
		Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: "dockyard-quick-start"},
			Version:      "v1.34.4",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "default-worker", Name: "md-0", Replicas: ptr.To[int32](1)},
			}},
		},
	}}
	c := fake.NewClientBuilder().WithScheme(sc).WithObjects(cluster).Build()
	want, err := scaleCluster(ctx, c, clusterRef{Namespace: "default", Name: "cc"}, scaleOptions{controlPlanes: 3, workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	got := &clusterv1.Cluster{}
	_ = c.Get(ctx, client.ObjectKeyFromObject(cluster), got)
	if want != 7 || *got.Spec.Topology.ControlPlane.Replicas != 3 || *got.Spec.Topology.Workers.MachineDeployments[0].Replicas != 4 {
		t.Errorf("want %d; topology %s", want, describeTopology(&got.Spec.Topology))
	}
}
