package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The control plane's version goes first; the workers' only once every control plane machine
// runs it (Kubernetes' version skew policy).
func TestUpgradeSetsTheWorkersVersionOnlyAfterTheControlPlanes(t *testing.T) {
	ctx := context.Background()
	c := scaleFixture(t, "dev-md-0")
	ref := clusterRef{Namespace: "default", Name: "dev"}
	md := &clusterv1.MachineDeployment{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-md-0"}, md)
	md.Spec.Template.Spec.Version = "v1.33.13"
	if err := c.Update(ctx, md); err != nil {
		t.Fatal(err)
	}
	// No control plane machine ever runs the new version here: the wait times out.
	err := upgradeCluster(ctx, c, ref, "v1.34.4", 3*time.Second)
	if err == nil {
		t.Fatal("no error while no control plane machine runs the new version")
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-control-plane"}, kcp)
	if kcp.Spec.Version != "v1.34.4" {
		t.Errorf("control plane version %q, want v1.34.4", kcp.Spec.Version)
	}
	_ = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dev-md-0"}, md)
	if md.Spec.Template.Spec.Version != "v1.33.13" {
		t.Errorf("the workers' version was set to %q before the control plane ran the new one", md.Spec.Template.Spec.Version)
	}
}

func TestMachinesAtCountsOnlyRunningMachinesOfTheVersionWithReadyNodes(t *testing.T) {
	ctx := context.Background()
	c := scaleFixture(t)
	ref := clusterRef{Namespace: "default", Name: "dev"}
	machine := func(name, version string, ready metav1.ConditionStatus) *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: "dev", clusterv1.MachineControlPlaneLabel: ""}},
			Spec:       clusterv1.MachineSpec{ClusterName: "dev", Version: version},
			Status: clusterv1.MachineStatus{Phase: string(clusterv1.MachinePhaseRunning), NodeRef: clusterv1.MachineNodeReference{Name: name},
				Conditions: []metav1.Condition{{Type: clusterv1.MachineNodeReadyCondition, Status: ready, Reason: "x", LastTransitionTime: metav1.Now()}}},
		}
	}
	if done, err := machinesAt(ctx, c, ref, "v1.34.4", true); err != nil || done {
		t.Errorf("no machines: done %v, %v; want not done", done, err)
	}
	if err := c.Create(ctx, machine("new", "v1.34.4", metav1.ConditionTrue)); err != nil {
		t.Fatal(err)
	}
	old := machine("old", "v1.33.13", metav1.ConditionTrue)
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if done, _ := machinesAt(ctx, c, ref, "v1.34.4", true); done {
		t.Error("done while a machine of the old version is left")
	}
	if err := c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if done, _ := machinesAt(ctx, c, ref, "v1.34.4", true); !done {
		t.Error("not done with every machine at the new version, Running, node Ready")
	}
	if err := c.Create(ctx, machine("joining", "v1.34.4", metav1.ConditionFalse)); err != nil {
		t.Fatal(err)
	}
	if done, _ := machinesAt(ctx, c, ref, "v1.34.4", true); done {
		t.Error("done while a machine's node is not Ready")
	}
}
