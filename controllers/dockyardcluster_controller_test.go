package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

func (f *fixture) reconcileCluster() error {
	_, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)})
	return err
}

func (f *fixture) reconcileClusterN(n int) {
	f.t.Helper()
	for range n {
		if err := f.reconcileCluster(); err != nil {
			f.t.Fatalf("reconciling DockyardCluster: %v", err)
		}
	}
}

func TestClusterProvisionsNetworkLoadBalancerAndEndpoint(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Spec.FailureDomains = []clusterv1.FailureDomain{{Name: "fd1", ControlPlane: ptr.To(true)}, {Name: "fd2"}}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)

	got := f.getDockyardCluster()
	if !controllerutil.ContainsFinalizer(got, infrav1.ClusterFinalizer) {
		t.Error("finalizer missing")
	}
	lb, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS)
	if err != nil {
		t.Fatal(err)
	}
	network := testNetwork
	if got.Spec.ControlPlaneEndpoint.Host != lb.Networks[network].IPv4 || got.Spec.ControlPlaneEndpoint.Port != 6443 {
		t.Errorf("endpoint %+v, load balancer address %s", got.Spec.ControlPlaneEndpoint, lb.Networks[network].IPv4)
	}
	if lb.Labels["io.x-k8s.kind.role"] != "external-load-balancer" || lb.Labels["dockyard.x-k8s.io/cluster"] != "ns1/c1" {
		t.Errorf("load balancer labels: %v", lb.Labels)
	}
	if len(lb.Ports) != 1 || lb.Ports[0].HostIP != "127.0.0.1" || lb.Ports[0].HostPort == 0 {
		t.Errorf("load balancer not published on the host: %+v", lb.Ports)
	}
	if !ptr.Deref(got.Status.Initialization.Provisioned, false) || len(got.Status.FailureDomains) != 2 {
		t.Errorf("provisioned %v failure domains %+v", got.Status.Initialization.Provisioned, got.Status.FailureDomains)
	}
	expectCondition(t, got, infrav1.LoadBalancerAvailableCondition, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason)
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason)
	// Where it answers is told once, in an event (a True condition carries no message).
	if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "LoadBalancerReady") || !strings.Contains(events, "published on 127.0.0.1:") {
		t.Errorf("no LoadBalancerReady event naming the published port: %s", events)
	}
	if n := f.rt.NetworkNames(); len(n) != 1 || n[0] != network {
		t.Errorf("networks: %v", n)
	}
	if !strings.Contains(f.loadBalancerConfig(), "frontend control-plane") {
		t.Errorf("load balancer not configured:\n%s", f.loadBalancerConfig())
	}
}

// An endpoint port other than 6443 is served, not only advertised.
func TestClusterServesItsEndpointPort(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Spec.ControlPlaneEndpoint.Port = 7443
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)
	lb, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS)
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Ports) != 1 || lb.Ports[0].ContainerPort != 7443 {
		t.Errorf("load balancer publishes %+v, want 7443", lb.Ports)
	}
	if cfg := f.loadBalancerConfig(); !strings.Contains(cfg, "bind *:7443") {
		t.Errorf("haproxy does not listen on 7443:\n%s", cfg)
	}
	got := f.getDockyardCluster()
	if got.Spec.ControlPlaneEndpoint.Port != 7443 {
		t.Errorf("endpoint port %d", got.Spec.ControlPlaneEndpoint.Port)
	}
	expectCondition(t, got, infrav1.LoadBalancerAvailableCondition, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason)
}

func TestClusterWithoutOwnerWaits(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.OwnerReferences = nil
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(2)
	got := f.getDockyardCluster()
	expectCondition(t, got, infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.WaitingForOwnerClusterReason)
	if controllerutil.ContainsFinalizer(got, infrav1.ClusterFinalizer) || len(f.rt.ContainerNames()) != 0 {
		t.Error("acted without an owner Cluster")
	}
}

func TestExternallyManagedClusterIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Annotations = map[string]string{clusterv1.ManagedByAnnotation: "someone"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(2)
	got := f.getDockyardCluster()
	if len(got.Status.Conditions) != 0 || len(got.Finalizers) != 0 || len(f.rt.ContainerNames()) != 0 {
		t.Errorf("externally managed cluster touched: %+v", got)
	}
}

func TestPausedClusterIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	f.pauseCluster()
	f.reconcileClusterN(2)
	got := f.getDockyardCluster()
	expectCondition(t, got, clusterv1.PausedCondition, metav1.ConditionTrue, clusterv1.PausedReason, "spec.paused")
	if len(f.rt.ContainerNames()) != 0 {
		t.Error("created containers while paused")
	}
}

func TestClusterLoadBalancerImageFailure(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Spec.LoadBalancer.Image = "localhost/no-such-haproxy:v1"
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	if err := f.reconcileCluster(); err == nil {
		t.Fatal("expected an error")
	}
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse,
		infrav1.LoadBalancerImageFailedReason, "localhost/no-such-haproxy:v1")
}

func TestClusterLoadBalancerImageOutsideThePolicy(t *testing.T) {
	f := newFixture(t)
	f.nodes = docker.NewManager(f.rt, docker.ManagerOptions{Policy: policy.Default()})
	dc := f.getDockyardCluster()
	dc.Spec.LoadBalancer.Image = "registry.example.internal/haproxy:2"
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3) // a refusal is not an error to retry
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse,
		infrav1.NotAllowedReason, "registry.example.internal/haproxy", "--allowed-image-repositories")
	if n := f.rt.CallCount("CreateContainer") + f.rt.CallCount("PullImage"); n != 0 {
		t.Errorf("%d containers created or images pulled", n)
	}
}

// The load balancer stops (killed) or vanishes (removed): it comes back on the address the
// cluster's endpoint names, configured, and the condition was false while it was down.
func TestLoadBalancerComesBackOnTheEndpointsAddress(t *testing.T) {
	lbName := "c1-lb." + testNS
	f := newFixture(t)
	f.reconcileClusterN(3)
	first, _ := f.rt.InspectContainer(f.ctx, lbName)
	endpoint := f.getDockyardCluster().Spec.ControlPlaneEndpoint.Host
	if endpoint == "" || first.Networks[testNetwork].IPv4 != endpoint || first.Labels["dockyard.x-k8s.io/ipv4"] != endpoint {
		t.Fatalf("endpoint %q, load balancer at %+v with labels %v", endpoint, first.Networks, first.Labels)
	}
	expectBack := func(t *testing.T, wantSameContainer bool) {
		t.Helper()
		f.reconcileClusterN(1)
		lb, err := f.rt.InspectContainer(f.ctx, lbName)
		if err != nil {
			t.Fatal(err)
		}
		if !lb.Running || lb.Networks[testNetwork].IPv4 != endpoint || (lb.ID == first.ID) != wantSameContainer {
			t.Errorf("load balancer %s running %v at %s, want %s (same container: %v)", lb.ID, lb.Running, lb.Networks[testNetwork].IPv4, endpoint, wantSameContainer)
		}
		if !strings.Contains(f.loadBalancerConfig(), "frontend control-plane") {
			t.Error("not configured")
		}
		expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason)
	}

	t.Run("killed", func(t *testing.T) {
		f.rt.StopContainer(lbName, 137)
		expectBack(t, true)
	})
	t.Run("removed", func(t *testing.T) {
		if err := f.rt.RemoveContainer(f.ctx, lbName); err != nil {
			t.Fatal(err)
		}
		expectBack(t, false)
	})
}

// A cluster of v0.1 is on a network without fixed addresses: a replaced load balancer may come
// back on another address, which is reported, not hidden behind a true condition.
func TestLoadBalancerOnAnOldNetworkReportsAnAddressChange(t *testing.T) {
	f := newFixture(t)
	legacy := "dockyard-" + testNS + "-" + testCluster
	if err := f.rt.CreateNetwork(f.ctx, container.NetworkSpec{Name: legacy, Labels: docker.ClusterKey{Namespace: testNS, Name: testCluster}.ClusterLabels()}); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)
	lb, err := f.rt.InspectContainer(f.ctx, docker.LoadBalancerName(docker.ClusterKey{Namespace: testNS, Name: testCluster}))
	if err != nil || lb == nil || lb.Networks[legacy].IPv4 == "" {
		t.Fatalf("load balancer %+v (%v), want it on the cluster's network %s", lb, err, legacy)
	}
	old := lb.Networks[legacy].IPv4
	if err := f.rt.RemoveContainer(f.ctx, lb.Name); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse,
		infrav1.LoadBalancerAddressChangedReason, old)
}

func TestClusterCustomLoadBalancerTemplate(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "my-haproxy", Namespace: testNS},
		Data: map[string]string{"value": "# custom\nfrontend f\n  bind *:{{ .FrontendPort }}\n"}}
	f := newFixture(t, cm)
	dc := f.getDockyardCluster()
	dc.Spec.LoadBalancer.ConfigTemplateRef = &infrav1.ConfigMapReference{Name: "my-haproxy"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)
	if cfg := f.loadBalancerConfig(); cfg != "# custom\nfrontend f\n  bind *:6443\n" {
		t.Errorf("custom template not used:\n%s", cfg)
	}
	// clusterctl move takes it along with the cluster.
	got := &corev1.ConfigMap{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(cm), got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Labels["clusterctl.cluster.x-k8s.io/move"]; !ok {
		t.Errorf("the template's ConfigMap is not labelled for clusterctl move: %v", got.Labels)
	}

	t.Run("missing ConfigMap", func(t *testing.T) {
		dc := f.getDockyardCluster()
		dc.Spec.LoadBalancer.ConfigTemplateRef.Name = "missing"
		if err := f.c.Update(f.ctx, dc); err != nil {
			t.Fatal(err)
		}
		if err := f.reconcileCluster(); err == nil {
			t.Fatal("expected an error")
		}
		expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse,
			infrav1.LoadBalancerConfigFailedReason, "ConfigMap missing")
	})
	t.Run("haproxy rejects the rendered configuration", func(t *testing.T) {
		dc := f.getDockyardCluster()
		dc.Spec.LoadBalancer.ConfigTemplateRef.Name = "my-haproxy"
		if err := f.c.Update(f.ctx, dc); err != nil {
			t.Fatal(err)
		}
		current := &corev1.ConfigMap{}
		if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(cm), current); err != nil {
			t.Fatal(err)
		}
		current.Data["value"] = "# changed\n"
		if err := f.c.Update(f.ctx, current); err != nil {
			t.Fatal(err)
		}
		f.sim.RejectHAProxyConfig = true
		if err := f.reconcileCluster(); err == nil {
			t.Fatal("expected an error")
		}
		expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse,
			infrav1.LoadBalancerConfigFailedReason, "haproxy rejected")
		// The live configuration was not replaced by the rejected one.
		if cfg := f.loadBalancerConfig(); !strings.Contains(cfg, "# custom") {
			t.Errorf("rejected configuration went live:\n%s", cfg)
		}
	})
}

func TestClusterDeletionWaitsForMachinesThenRemovesEverything(t *testing.T) {
	m, dm, s := machineObjects(cpName, true)
	f := newFixture(t, m, dm, s)
	f.provisionCluster()
	f.provisionMachine(cpName)

	if err := f.c.Delete(f.ctx, f.getDockyardCluster()); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	got := f.getDockyardCluster()
	expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "1 DockyardMachines")
	if _, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS); err != nil {
		t.Error("load balancer removed while machines remain")
	}

	f.deleteAndExpectGone(cpName)
	f.reconcileClusterN(1)
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.dc), &infrav1.DockyardCluster{}); err == nil {
		t.Error("DockyardCluster still exists: finalizer not removed")
	}
	labels := docker.ClusterKey{Namespace: "ns1", Name: "c1"}.ClusterLabels()
	cs, _ := f.rt.ListContainers(f.ctx, labels)
	vs, _ := f.rt.ListVolumes(f.ctx, labels)
	ns, _ := f.rt.ListNetworks(f.ctx, labels)
	if len(cs)+len(vs)+len(ns) != 0 {
		t.Errorf("left on the engine: containers %v volumes %v networks %v", cs, vs, ns)
	}
}

func TestClusterDeletionKeepsTheUsersNetwork(t *testing.T) {
	f := newFixture(t)
	if err := f.rt.CreateNetwork(f.ctx, container.NetworkSpec{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	dc := f.getDockyardCluster()
	dc.Spec.Network.Name = "shared"
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)
	f.rt.WithContainer("c1-lb."+testNS, func(c *inmemory.Container) {
		if c.Spec.Network != "shared" {
			t.Errorf("load balancer on network %q", c.Spec.Network)
		}
	})
	if err := f.c.Delete(f.ctx, f.getDockyardCluster()); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	if n := f.rt.NetworkNames(); len(n) != 1 || n[0] != "shared" {
		t.Errorf("the user's network was removed: %v", n)
	}
	if len(f.rt.ContainerNames()) != 0 {
		t.Errorf("containers left: %v", f.rt.ContainerNames())
	}
}

// A cluster on an existing network waits, with a reason the user can act on, until the network
// is there; then it joins it, and leaves it behind when deleted.
func TestClusterOnAnExistingNetworkWaitsForItAndKeepsIt(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Spec.Network = infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "shared"}}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(2) // the Paused condition, the finalizer
	res, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("missing existing network: result %+v error %v, want a later look and no error", res, err)
	}
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.NetworkNotFoundReason, "docker network create shared")
	if n := f.rt.NetworkNames(); len(n) != 0 {
		t.Fatalf("Dockyard created %v in place of the missing existing network", n)
	}

	if err := f.rt.CreateNetwork(f.ctx, container.NetworkSpec{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(2)
	got := f.getDockyardCluster()
	expectCondition(t, got, infrav1.LoadBalancerAvailableCondition, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason, "")
	lb, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ControlPlaneEndpoint.Host == "" || got.Spec.ControlPlaneEndpoint.Host != lb.Networks["shared"].IPv4 {
		t.Errorf("endpoint %q, load balancer on the shared network at %q", got.Spec.ControlPlaneEndpoint.Host, lb.Networks["shared"].IPv4)
	}

	if err := f.c.Delete(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(1)
	if n := f.rt.NetworkNames(); len(n) != 1 || n[0] != "shared" {
		t.Errorf("networks after the delete: %v, want the existing one kept", n)
	}
	if len(f.rt.ContainerNames()) != 0 {
		t.Errorf("containers left: %v", f.rt.ContainerNames())
	}
}

// A network Dockyard created for another cluster cannot be joined: it goes away with that one.
func TestClusterOnAnotherClustersNetworkIsNotUsable(t *testing.T) {
	f := newFixture(t)
	other := docker.ClusterKey{Namespace: testNS, Name: "other"}
	if _, err := f.nodes.EnsureNetwork(f.ctx, other, docker.NetworkSpec{Name: docker.DefaultNetworkName(other)}); err != nil {
		t.Fatal(err)
	}
	dc := f.getDockyardCluster()
	dc.Spec.Network = infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: docker.DefaultNetworkName(other)}}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.NetworkNotUsableReason, "for cluster ns1/other")
	if _, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS); !container.IsNotFound(err) {
		t.Errorf("a load balancer was created on another cluster's network: %v", err)
	}
}

// A Cluster whose pods or services are IPv6 gets a dual-stack network: the load balancer
// listens on both families, the endpoint stays on IPv4 (a management cluster on an IPv4
// network reaches it), and machines report an address of each family.
func TestIPv6ClusterGetsADualStackNetwork(t *testing.T) {
	m, dm, s := machineObjects("c1-cp-0", true)
	f := newFixture(t, m, dm, s)
	cluster := &clusterv1.Cluster{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.cluster), cluster); err != nil {
		t.Fatal(err)
	}
	cluster.Spec.ClusterNetwork.Pods.CIDRBlocks = []string{"fd00:100:96::/48"}
	cluster.Spec.ClusterNetwork.Services.CIDRBlocks = []string{"fd00:100:64::/108"}
	if err := f.c.Update(f.ctx, cluster); err != nil {
		t.Fatal(err)
	}
	f.provisionCluster()

	lb, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS)
	if err != nil {
		t.Fatal(err)
	}
	ep := lb.Networks[testNetwork]
	if ep.IPv4 == "" || ep.IPv6 == "" {
		t.Fatalf("load balancer addresses %+v, want one of each family", ep)
	}
	if got := f.getDockyardCluster().Spec.ControlPlaneEndpoint.Host; got != ep.IPv4 {
		t.Errorf("endpoint %s, want the load balancer's IPv4 address %s", got, ep.IPv4)
	}
	if cfg := f.loadBalancerConfig(); !strings.Contains(cfg, "bind :::6443 v6only") {
		t.Errorf("load balancer does not listen on IPv6:\n%s", cfg)
	}

	f.provisionMachine("c1-cp-0")
	var internal []string
	for _, a := range f.getMachine("c1-cp-0").Status.Addresses {
		if a.Type == clusterv1.MachineInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if len(internal) != 2 || !strings.Contains(internal[1], ":") {
		t.Errorf("machine internal addresses %v, want IPv4 then IPv6", internal)
	}
}

// loadBalancerHostPort is the host port the running load balancer publishes the endpoint's
// port on; 0 when it does not run.
func (f *fixture) loadBalancerHostPort() int {
	f.t.Helper()
	lb, err := f.rt.InspectContainer(f.ctx, "c1-lb."+testNS)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range lb.Ports {
		if lb.Running && p.ContainerPort == docker.APIServerPort {
			return p.HostPort
		}
	}
	return 0
}

// pinnedHostPort is the host port in the load balancer's configuration: what the engine
// publishes it on when it starts it again itself (restart policy, engine or host restart).
func (f *fixture) pinnedHostPort() int {
	port := -1
	f.rt.WithContainer("c1-lb."+testNS, func(c *inmemory.Container) { port = c.Spec.Ports[0].HostPort })
	return port
}

// The host port the engine picks for a new load balancer is written to
// spec.loadBalancer.hostPort and pinned in the container: a load balancer that is killed
// (started again, the engine would publish it elsewhere) or removed comes back on it, so the
// kubeconfig written at creation keeps working.
func TestLoadBalancerKeepsItsHostPort(t *testing.T) {
	lbName := "c1-lb." + testNS
	f := newFixture(t)
	f.reconcileClusterN(3)
	got := f.getDockyardCluster()
	kept := int(got.Spec.LoadBalancer.HostPort)
	if kept == 0 || f.loadBalancerHostPort() != kept || f.pinnedHostPort() != kept {
		t.Fatalf("spec.loadBalancer.hostPort %d, load balancer published on %d, pinned to %d", kept, f.loadBalancerHostPort(), f.pinnedHostPort())
	}
	expectCondition(t, got, infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionTrue, infrav1.LoadBalancerHostPortKeptReason)

	for _, tc := range []struct {
		name string
		gone func()
	}{
		{"killed", func() { f.rt.StopContainer(lbName, 137) }},
		{"removed", func() {
			if err := f.rt.RemoveContainer(f.ctx, lbName); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.gone()
			f.reconcileClusterN(1)
			if got := f.loadBalancerHostPort(); got != kept {
				t.Errorf("the load balancer came back on host port %d, want the kept %d", got, kept)
			}
			dc := f.getDockyardCluster()
			if int(dc.Spec.LoadBalancer.HostPort) != kept {
				t.Errorf("spec.loadBalancer.hostPort changed to %d", dc.Spec.LoadBalancer.HostPort)
			}
			expectCondition(t, dc, infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionTrue, infrav1.LoadBalancerHostPortKeptReason)
		})
	}
}

// A host port the user sets at creation is the one the load balancer is published on.
func TestLoadBalancerUsesTheHostPortAskedFor(t *testing.T) {
	f := newFixture(t)
	dc := f.getDockyardCluster()
	dc.Spec.LoadBalancer.HostPort = 16443
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcileClusterN(3)
	if got := f.loadBalancerHostPort(); got != 16443 || f.pinnedHostPort() != 16443 {
		t.Errorf("load balancer published on %d, pinned to %d, want 16443", got, f.pinnedHostPort())
	}
	expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionTrue, infrav1.LoadBalancerHostPortKeptReason)
}

// A kept host port another container holds when the load balancer is created again: the load
// balancer still comes up (on a port the engine picks; Cluster API uses its network address),
// Ready stays true, and LoadBalancerHostPortKept says where it is and that the kubeconfig of
// the creation no longer works. Each later re-creation tries the kept port again.
func TestLoadBalancerOnATakenHostPortComesUpElsewhereAndSaysSo(t *testing.T) {
	lbName := "c1-lb." + testNS
	f := newFixture(t)
	f.reconcileClusterN(3)
	kept := int(f.getDockyardCluster().Spec.LoadBalancer.HostPort)
	if kept == 0 {
		t.Fatal("no host port kept in spec.loadBalancer.hostPort")
	}
	f.events()

	if err := f.rt.RemoveContainer(f.ctx, lbName); err != nil {
		t.Fatal(err)
	}
	holder := container.ContainerSpec{Name: "holder", Image: testNodeImage,
		Ports: []container.PortMapping{{ContainerPort: 80, Protocol: "tcp", HostIP: "127.0.0.1", HostPort: kept}}}
	if err := f.rt.CreateContainer(f.ctx, holder); err != nil {
		t.Fatal(err)
	}
	if err := f.rt.StartContainer(f.ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	expectElsewhere := func(t *testing.T) {
		t.Helper()
		f.reconcileClusterN(1)
		published := f.loadBalancerHostPort()
		if published == 0 || published == kept {
			t.Fatalf("load balancer published on %d with %d taken", published, kept)
		}
		got := f.getDockyardCluster()
		if int(got.Spec.LoadBalancer.HostPort) != kept {
			t.Errorf("spec.loadBalancer.hostPort changed from %d to %d", kept, got.Spec.LoadBalancer.HostPort)
		}
		expectCondition(t, got, infrav1.LoadBalancerAvailableCondition, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason)
		expectCondition(t, got, clusterv1.ReadyCondition, metav1.ConditionTrue, infrav1.ReadyReason)
		expectCondition(t, got, infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionFalse, infrav1.LoadBalancerHostPortChangedReason,
			fmt.Sprintf("127.0.0.1:%d", published), fmt.Sprintf("hostPort %d", kept), "another process or container",
			"written when the cluster was created", "dockyard get kubeconfig c1 -n ns1")
		if events := strings.Join(f.events(), "\n"); !strings.Contains(events, "Warning "+infrav1.LoadBalancerHostPortChangedReason) {
			t.Errorf("no %s warning event: %s", infrav1.LoadBalancerHostPortChangedReason, events)
		}
	}
	t.Run("re-created while the port is taken", expectElsewhere)
	t.Run("killed while the port is still taken", func(t *testing.T) {
		f.rt.StopContainer(lbName, 137)
		expectElsewhere(t)
	})
	t.Run("killed once the port is free", func(t *testing.T) {
		if err := f.rt.RemoveContainer(f.ctx, "holder"); err != nil {
			t.Fatal(err)
		}
		f.rt.StopContainer(lbName, 137)
		f.reconcileClusterN(1)
		if got := f.loadBalancerHostPort(); got != kept || f.pinnedHostPort() != kept {
			t.Errorf("load balancer published on %d, pinned to %d, want the kept %d back", got, f.pinnedHostPort(), kept)
		}
		expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionTrue, infrav1.LoadBalancerHostPortKeptReason)
	})
}

// A cluster made before host ports were kept: its load balancer runs on a port the engine
// picked and its spec names none. The port it publishes is adopted, without replacing the
// running load balancer, and pinned the next time the load balancer is created.
func TestExistingClustersAdoptTheirLoadBalancersHostPort(t *testing.T) {
	lbName := "c1-lb." + testNS
	f := newFixture(t)
	f.reconcileClusterN(3)
	// What an earlier version left: no host port in the spec, none pinned in the container.
	dc := f.getDockyardCluster()
	dc.Spec.LoadBalancer.HostPort = 0
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.rt.WithContainer(lbName, func(c *inmemory.Container) {
		c.Spec.Ports[0].HostPort = 0
		delete(c.Spec.Labels, "dockyard.x-k8s.io/host-port")
		delete(c.State.Labels, "dockyard.x-k8s.io/host-port")
	})
	before, _ := f.rt.InspectContainer(f.ctx, lbName)
	published := f.loadBalancerHostPort()

	f.reconcileClusterN(1)
	got := f.getDockyardCluster()
	if int(got.Spec.LoadBalancer.HostPort) != published {
		t.Errorf("spec.loadBalancer.hostPort %d, want the port the load balancer publishes, %d", got.Spec.LoadBalancer.HostPort, published)
	}
	if after, _ := f.rt.InspectContainer(f.ctx, lbName); after.ID != before.ID || f.loadBalancerHostPort() != published {
		t.Errorf("the running load balancer was replaced or moved to %d", f.loadBalancerHostPort())
	}
	expectCondition(t, got, infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionTrue, infrav1.LoadBalancerHostPortKeptReason)

	// Started again as it is, the engine would publish it elsewhere: it is created pinned.
	f.rt.StopContainer(lbName, 137)
	f.reconcileClusterN(1)
	if got := f.loadBalancerHostPort(); got != published || f.pinnedHostPort() != published {
		t.Errorf("after a kill the load balancer publishes %d, pinned to %d, want %d", got, f.pinnedHostPort(), published)
	}
}

// A cluster whose network the policy refuses (admitted before the policy changed) is reported
// NotAllowed, and nothing is created on the engine.
func TestClusterNetworkOutsideThePolicyIsNotAllowed(t *testing.T) {
	f := newFixture(t)
	f.nodes = docker.NewManager(f.rt, docker.ManagerOptions{Policy: policy.Default()})
	for name, network := range map[string]infrav1.NetworkSpec{
		"the host's network": {Existing: infrav1.ExistingNetworkSpec{Name: "host"}},
		"a public subnet":    {Name: "mine", Subnets: []string{"8.8.8.0/24"}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := f.rt.CreateNetwork(f.ctx, container.NetworkSpec{Name: "host"}); err != nil && !strings.Contains(err.Error(), "exists") {
				t.Fatal(err)
			}
			dc := f.getDockyardCluster()
			dc.Spec.Network = network
			if err := f.c.Update(f.ctx, dc); err != nil {
				t.Fatal(err)
			}
			res, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)})
			if err != nil || res.RequeueAfter == 0 {
				t.Fatalf("reconcile: %v, %+v; want a requeue without an error", err, res)
			}
			expectCondition(t, f.getDockyardCluster(), infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.NotAllowedReason, "--allowed-")
			if names := f.rt.ContainerNames(); len(names) != 0 {
				t.Errorf("containers created: %v", names)
			}
		})
	}
}

// On an engine whose front gets its address later (a Service of type LoadBalancer of an
// infrastructure cluster elsewhere), the cluster waits for it, saying why and looking again
// within seconds, and takes the address as its endpoint once there is one.
func TestClusterWaitsForItsLoadBalancersAddress(t *testing.T) {
	f := newFixture(t)
	engine := inmemory.NewBalancing(f.rt)
	engine.SetPending("Service team-a/c1-lb of type LoadBalancer has no address yet")
	f.nodes = docker.NewManager(engine, docker.ManagerOptions{})
	for range 3 {
		res, err := f.clusterReconciler().Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)})
		if err != nil || res.RequeueAfter == 0 || res.RequeueAfter > 10*time.Second {
			t.Fatalf("waiting for the address: %+v %v", res, err)
		}
	}
	dc := f.getDockyardCluster()
	expectCondition(t, dc, infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse,
		infrav1.LoadBalancerWaitingForAddressReason, "has no address yet", "Service team-a/c1-lb of type LoadBalancer")
	if dc.Spec.ControlPlaneEndpoint.Host != "" || ptr.Deref(dc.Status.Initialization.Provisioned, false) {
		t.Errorf("an endpoint %q (provisioned %v) without an address", dc.Spec.ControlPlaneEndpoint.Host, dc.Status.Initialization.Provisioned)
	}
	engine.SetPending("")
	f.reconcileClusterN(2)
	dc = f.getDockyardCluster()
	if dc.Spec.ControlPlaneEndpoint.Host != inmemory.FrontAddress || !ptr.Deref(dc.Status.Initialization.Provisioned, false) {
		t.Errorf("endpoint %q, provisioned %v: want the front's address", dc.Spec.ControlPlaneEndpoint.Host, dc.Status.Initialization.Provisioned)
	}
	expectCondition(t, dc, infrav1.LoadBalancerAvailableCondition, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason)
}
