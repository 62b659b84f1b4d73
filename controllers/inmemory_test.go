package controllers

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/secret"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/test/bootstrapdata"
)

// An in-memory cluster goes through the reconcilers as any other: the engine chosen from its
// DockyardCluster (spec.infrastructure.inMemory) by the one picker, its endpoint the port of
// the manager where the in-memory engine serves its API, its first control plane machine's
// kubeadm init (parsed from Cluster API-shaped bootstrap data) making that API server, and the
// machine provisioned with its Node's providerID set there, where the node registered Ready.
// Deleting the cluster stops its API server.
func TestAnInMemoryClusterProvisionsThroughTheReconcilers(t *testing.T) {
	m, dm, data := machineObjects(cpName, true)
	f := newFixture(t, m, dm, data)
	dc := f.getDockyardCluster()
	dc.Spec.Infrastructure.InMemory = &infrav1.InMemoryInfrastructure{}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.provisionCluster()
	dc = f.getDockyardCluster()
	endpoint := net.JoinHostPort(dc.Spec.ControlPlaneEndpoint.Host, fmt.Sprint(dc.Spec.ControlPlaneEndpoint.Port))
	if dc.Spec.ControlPlaneEndpoint.Host != "127.0.0.1" || dc.Spec.ControlPlaneEndpoint.Port == 0 || dc.Status.Engine != infrav1.EngineInMemory {
		t.Fatalf("an in-memory cluster's endpoint %s on engine %q, want a port of 127.0.0.1 on %q", endpoint, dc.Status.Engine, infrav1.EngineInMemory)
	}

	certificates := secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
	if err := certificates.Generate(); err != nil {
		t.Fatal(err)
	}
	data.Data["value"] = []byte(bootstrapdata.Init(endpoint, certificates))
	if err := f.c.Update(f.ctx, data); err != nil {
		t.Fatal(err)
	}
	workload, err := bootstrapdata.Client(endpoint, certificates)
	if err != nil {
		t.Fatal(err)
	}
	f.workload = workload
	for i := 0; i < 10 && !ptr.Deref(f.getMachine(cpName).Status.Initialization.Provisioned, false); i++ {
		f.reconcileMachine(cpName)
	}
	f.reconcileMachine(cpName) // sets the Node's providerID once the machine is provisioned
	got := f.getMachine(cpName)
	if !ptr.Deref(got.Status.Initialization.Provisioned, false) {
		t.Fatalf("the in-memory machine was not provisioned: %+v", got.Status.Conditions)
	}
	var node corev1.Node
	if err := f.workload.Get(f.ctx, client.ObjectKey{Name: cpName}, &node); err != nil {
		t.Fatalf("the Node in the in-memory cluster's API server: %v", err)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if node.Spec.ProviderID != got.Spec.ProviderID || !ready {
		t.Errorf("Node %s: providerID %q (the machine's %q), conditions %+v", node.Name, node.Spec.ProviderID, got.Spec.ProviderID, node.Status.Conditions)
	}

	// A fault: kubelet stopped through the stop annotation, once the Machine has its Node;
	// the workload cluster's Node goes Unknown, and Ready again when the annotation goes.
	machine := &clusterv1.Machine{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: testNS, Name: cpName}, machine); err != nil {
		t.Fatal(err)
	}
	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: cpName}
	if err := f.c.Status().Update(f.ctx, machine); err != nil {
		t.Fatal(err)
	}
	nodeReady := func() corev1.ConditionStatus {
		t.Helper()
		var n corev1.Node
		if err := f.workload.Get(f.ctx, client.ObjectKey{Name: cpName}, &n); err != nil {
			t.Fatal(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}
	annotate := func(value string) {
		t.Helper()
		dm := f.getMachine(cpName)
		if value == "" {
			delete(dm.Annotations, infrav1.StopAnnotation)
		} else {
			dm.Annotations = map[string]string{infrav1.StopAnnotation: value}
		}
		if err := f.c.Update(f.ctx, dm); err != nil {
			t.Fatal(err)
		}
		f.reconcileMachine(cpName)
	}
	f.events()
	annotate("kubelet")
	if got := f.getMachine(cpName).Status.Stopped; !slices.Equal(got, []string{"kubelet"}) || nodeReady() != corev1.ConditionUnknown {
		t.Errorf("kubelet stopped: status.stopped %v, Node Ready %q; want [kubelet] and Unknown", got, nodeReady())
	}
	if events := f.events(); len(events) != 1 || !strings.Contains(events[0], "ServiceStopped kubelet of node") {
		t.Errorf("events %q, want one ServiceStopped", events)
	}
	f.reconcileMachine(cpName) // nothing changed: no command, no event
	if events := f.events(); len(events) != 0 {
		t.Errorf("a reconcile with the fault in place: events %q, want none", events)
	}
	annotate("")
	if got := f.getMachine(cpName).Status.Stopped; got != nil || nodeReady() != corev1.ConditionTrue {
		t.Errorf("the annotation removed: status.stopped %v, Node Ready %q; want none and True", got, nodeReady())
	}

	// Added latency: the network delay set once, recorded, and taken away with the annotation.
	setDelay := func(value string) {
		t.Helper()
		dm := f.getMachine(cpName)
		dm.Annotations = map[string]string{}
		if value != "" {
			dm.Annotations[infrav1.NetworkDelayAnnotation] = value
		}
		if err := f.c.Update(f.ctx, dm); err != nil {
			t.Fatal(err)
		}
		f.reconcileMachine(cpName)
	}
	f.events()
	setDelay("200ms")
	if got := f.getMachine(cpName).Status.NetworkDelay; got == nil || got.Duration != 200*time.Millisecond {
		t.Errorf("status.networkDelay %v, want 200ms", got)
	}
	setDelay("")
	if got := f.getMachine(cpName).Status.NetworkDelay; got != nil {
		t.Errorf("status.networkDelay %v after the annotation went, want none", got)
	}
	if events := f.events(); len(events) != 2 || !strings.Contains(events[0], "NetworkDelaySet") {
		t.Errorf("events %q, want two NetworkDelaySet", events)
	}

	f.deleteAndExpectGone(cpName)
	if err := f.c.Delete(f.ctx, f.getDockyardCluster()); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(2)
	if conn, err := net.DialTimeout("tcp", endpoint, time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("the deleted in-memory cluster's API server still listens on %s", endpoint)
	}
}
