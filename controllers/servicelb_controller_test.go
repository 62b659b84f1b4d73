package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
)

// A Service of type LoadBalancer gets a haproxy container forwarding its TCP ports to their
// NodePorts on every node, and its address in status; the container goes when the Service
// stops being one. Other Services, another class's and UDP ports are left alone.
func TestServiceLoadBalancerServesServicesOfTypeLoadBalancer(t *testing.T) {
	f := newFixture(t)
	f.provisionCluster()
	f.setClusterStatus(func(c *clusterv1.Cluster) { c.Status.Initialization.ControlPlaneInitialized = ptr.To(true) })
	f.workload = fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&corev1.Service{}).Build()
	for name, ip := range map[string]string{"c1-control-plane-a": "172.30.0.3", "c1-md-0-b": "172.30.0.4"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip},
		}}}
		if err := f.workload.Create(f.ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer,
		Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP},
			{Name: "dns", Port: 53, NodePort: 30053, Protocol: corev1.ProtocolUDP},
		},
	}}
	others := []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "internal", Namespace: "default", UID: "uid-internal"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "metallb", Namespace: "default", UID: "uid-metallb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: ptr.To("metallb.io/metallb"), Ports: []corev1.ServicePort{{Port: 80, NodePort: 30081}}}},
	}
	for _, svc := range append(others, web) {
		if err := f.workload.Create(f.ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	r := &ServiceLoadBalancerReconciler{
		Client: f.c, Engines: f.enginesOf(), Recorder: f.recorder, Image: docker.DefaultLoadBalancerImage,
		ClusterCache: clustercache.NewFakeClusterCache(f.workload, client.ObjectKey{Namespace: testNS, Name: testCluster}, "servicelb-services", "servicelb-nodes"),
	}
	reconcile := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.cluster)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := reconcile(); res.RequeueAfter != serviceResync {
		t.Errorf("requeue after %s, want %s", res.RequeueAfter, serviceResync)
	}

	key := docker.ClusterKey{Namespace: testNS, Name: testCluster}
	lbs, err := f.nodes.ServiceLoadBalancers(f.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 1 || lbs[0].Service != "default/web" {
		t.Fatalf("Service load balancers %+v, want one for default/web", lbs)
	}
	f.rt.WithContainer(lbs[0].Name, func(c *inmemory.Container) {
		cfg := string(c.Files[docker.LoadBalancerConfigPath])
		for _, want := range []string{"bind *:80", "server c1-control-plane-a 172.30.0.3:30080 check", "server c1-md-0-b 172.30.0.4:30080 check"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("haproxy.cfg lacks %q:\n%s", want, cfg)
			}
		}
		if strings.Contains(cfg, "30053") || strings.Contains(cfg, "30081") {
			t.Errorf("haproxy.cfg serves a UDP port or another class's Service:\n%s", cfg)
		}
	})
	got := &corev1.Service{}
	if err := f.workload.Get(f.ctx, client.ObjectKeyFromObject(web), got); err != nil {
		t.Fatal(err)
	}
	network := docker.DefaultNetworkName(key)
	if ingress := got.Status.LoadBalancer.Ingress; len(ingress) != 1 || ingress[0].IP != lbs[0].Address(network) || ingress[0].IP == "" {
		t.Errorf("status.loadBalancer.ingress %+v, want the container's address %q", ingress, lbs[0].Address(network))
	}

	// No longer of type LoadBalancer: its container goes.
	got.Spec.Type = corev1.ServiceTypeNodePort
	if err := f.workload.Update(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	if res := reconcile(); res.RequeueAfter != 0 {
		t.Errorf("requeue after %s with no Service load balancer left", res.RequeueAfter)
	}
	if lbs, _ := f.nodes.ServiceLoadBalancers(f.ctx, key); len(lbs) != 0 {
		t.Errorf("Service load balancers left: %+v", lbs)
	}
}

// serviceLBFixture is a workload cluster (a fake API server) with a node, the Service load
// balancer reconciler and the fake engine.
type serviceLBFixture struct {
	*fixture
	r   *ServiceLoadBalancerReconciler
	key docker.ClusterKey
}

// serviceTime is when the tests' Services are created, give or take.
var serviceTime = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newServiceLBFixture(t *testing.T) *serviceLBFixture {
	t.Helper()
	f := newFixture(t)
	f.provisionCluster()
	f.setClusterStatus(func(c *clusterv1.Cluster) { c.Status.Initialization.ControlPlaneInitialized = ptr.To(true) })
	f.workload = fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&corev1.Service{}).Build()
	s := &serviceLBFixture{fixture: f, key: docker.ClusterKey{Namespace: testNS, Name: testCluster}}
	s.r = &ServiceLoadBalancerReconciler{
		Client: f.c, Engines: f.enginesOf(), Recorder: f.recorder, Image: docker.DefaultLoadBalancerImage,
		ClusterCache: clustercache.NewFakeClusterCache(f.workload, client.ObjectKey{Namespace: testNS, Name: testCluster}, "servicelb-services", "servicelb-nodes"),
	}
	s.addNode("c1-control-plane-a", "172.30.0.3")
	return s
}

func (s *serviceLBFixture) addNode(name, ip string) {
	s.t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip},
	}}}
	if err := s.workload.Create(s.ctx, node); err != nil {
		s.t.Fatal(err)
	}
}

func (s *serviceLBFixture) reconcile() {
	s.t.Helper()
	if _, err := s.r.Reconcile(s.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s.cluster)}); err != nil {
		s.t.Fatal(err)
	}
}

// createService creates a Service of type LoadBalancer in namespace default, with port 80 on
// NodePort 30080 and any other ports given.
func (s *serviceLBFixture) createService(name, uid string, created time.Time, ports ...corev1.ServicePort) *corev1.Service {
	s.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: append([]corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP}}, ports...)},
	}
	if err := s.workload.Create(s.ctx, svc); err != nil {
		s.t.Fatal(err)
	}
	return svc
}

func (s *serviceLBFixture) deleteService(name string) {
	s.t.Helper()
	if err := s.workload.Delete(s.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}); err != nil {
		s.t.Fatal(err)
	}
}

// served maps the Services that have a load balancer container to the container's name.
func (s *serviceLBFixture) served() map[string]string {
	s.t.Helper()
	lbs, err := s.nodes.ServiceLoadBalancers(s.ctx, s.key)
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]string{}
	for _, lb := range lbs {
		if other, ok := out[lb.Service]; ok {
			s.t.Errorf("Service %s has two load balancers, %s and %s", lb.Service, other, lb.Name)
		}
		out[lb.Service] = lb.Name
	}
	return out
}

// container returns a container's ID and labels.
func (s *serviceLBFixture) container(name string) (id string, labels map[string]string) {
	s.t.Helper()
	if !s.rt.WithContainer(name, func(c *inmemory.Container) { id, labels = c.State.ID, c.State.Labels }) {
		s.t.Fatalf("container %s does not exist", name)
	}
	return id, labels
}

func (s *serviceLBFixture) ingress(name string) []corev1.LoadBalancerIngress {
	s.t.Helper()
	svc := &corev1.Service{}
	if err := s.workload.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: name}, svc); err != nil {
		s.t.Fatal(err)
	}
	return svc.Status.LoadBalancer.Ingress
}

// events are the workload cluster's Events on a Service with a reason.
func (s *serviceLBFixture) events(name, reason string) []corev1.Event {
	s.t.Helper()
	list := &corev1.EventList{}
	if err := s.workload.List(s.ctx, list, client.InNamespace("default")); err != nil {
		s.t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Service" && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// recorded drains the management cluster's Events recorded so far.
func (s *serviceLBFixture) recorded() []string {
	var out []string
	for {
		select {
		case e := <-s.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (s *serviceLBFixture) wantServed(want ...string) {
	s.t.Helper()
	got := s.served()
	var names []string
	for name := range got {
		names = append(names, name)
	}
	sort.Strings(names)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		s.t.Errorf("Services with a load balancer:\n%v\nwant:\n%v", names, want)
	}
}

// A cluster's Service load balancers are capped (20 unless the manager says otherwise): the
// oldest Services get one, the others none, no address and one Warning Event each, however
// often the cluster is looked at. A Service that has one keeps it, even when an older one
// arrives; deleting one lets the oldest waiting Service in.
func TestServiceLoadBalancersAreCappedPerCluster(t *testing.T) {
	s := newServiceLBFixture(t)
	const limit = 20
	// Names run against creation times: the order is the times', not the names'.
	var want []string
	for i := range limit + 1 {
		name := fmt.Sprintf("svc-%02d", limit-i)
		s.createService(name, "uid-"+name, serviceTime.Add(time.Duration(i)*time.Minute))
		if i < limit {
			want = append(want, "default/"+name)
		}
	}
	s.reconcile()
	s.wantServed(want...)
	if ingress := s.ingress("svc-00"); len(ingress) != 0 {
		t.Errorf("the Service over the cap has an address: %+v", ingress)
	}
	events := s.events("svc-00", "ServiceLoadBalancerLimit")
	if len(events) != 1 {
		t.Fatalf("%d ServiceLoadBalancerLimit Events on the Service over the cap, want 1", len(events))
	}
	if e := events[0]; e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, "20") ||
		!strings.Contains(e.Message, "--max-service-load-balancers-per-cluster") || e.InvolvedObject.UID != "uid-svc-00" {
		t.Errorf("Event %s %q on %+v, want a Warning naming the cap and the flag", e.Type, e.Message, e.InvolvedObject)
	}
	for _, name := range want {
		if ingress := s.ingress(strings.TrimPrefix(name, "default/")); len(ingress) != 1 {
			t.Errorf("Service %s has no address: %+v", name, ingress)
		}
	}

	// Resyncs change nothing and say it once.
	creates := s.rt.CallCount("CreateContainer")
	s.reconcile()
	s.reconcile()
	s.wantServed(want...)
	if n := s.rt.CallCount("CreateContainer") - creates; n != 0 {
		t.Errorf("resyncs created %d containers", n)
	}
	if events := s.events("svc-00", "ServiceLoadBalancerLimit"); len(events) != 1 {
		t.Errorf("%d ServiceLoadBalancerLimit Events after resyncs, want still 1", len(events))
	}

	// An older Service arriving late does not take a place that is held.
	s.createService("early", "uid-early", serviceTime.Add(-time.Hour))
	s.reconcile()
	s.wantServed(want...)
	if len(s.events("early", "ServiceLoadBalancerLimit")) != 1 || len(s.ingress("early")) != 0 {
		t.Errorf("the late Service should wait with an Event: events %+v, ingress %+v", s.events("early", "ServiceLoadBalancerLimit"), s.ingress("early"))
	}

	// Deleting a Service frees its place for the oldest waiting one.
	s.deleteService("svc-10")
	s.reconcile()
	want = slices.DeleteFunc(want, func(n string) bool { return n == "default/svc-10" })
	s.wantServed(append(want, "default/early")...)
	if len(s.ingress("early")) != 1 || len(s.ingress("svc-00")) != 0 {
		t.Errorf("addresses: early %+v, svc-00 %+v; want early's only", s.ingress("early"), s.ingress("svc-00"))
	}
}

// The cap is the reconciler's; lowered, it takes the load balancers of the newest Services
// away, with their addresses.
func TestServiceLoadBalancerCapCanBeLowered(t *testing.T) {
	if DefaultMaxServiceLoadBalancersPerCluster != 20 {
		t.Errorf("DefaultMaxServiceLoadBalancersPerCluster is %d, the docs say 20", DefaultMaxServiceLoadBalancersPerCluster)
	}
	s := newServiceLBFixture(t)
	s.r.MaxPerCluster = 3
	for i, name := range []string{"a", "b", "c", "d"} {
		s.createService(name, "uid-"+name, serviceTime.Add(time.Duration(i)*time.Minute))
	}
	s.reconcile()
	s.wantServed("default/a", "default/b", "default/c")

	s.r.MaxPerCluster = 2
	s.reconcile()
	s.wantServed("default/a", "default/b")
	if len(s.ingress("c")) != 0 {
		t.Errorf("Service c keeps the address of its removed load balancer: %+v", s.ingress("c"))
	}
	events := s.events("c", "ServiceLoadBalancerLimit")
	if len(events) != 1 || !strings.Contains(events[0].Message, " 2 ") {
		t.Errorf("Events %+v, want one naming the cap of 2", events)
	}
}

// A Service deleted and re-created under the same name is another Service: it gets a new
// container, labelled with its UID, not the old one's.
func TestServiceLoadBalancerOfARecreatedServiceIsANewContainer(t *testing.T) {
	s := newServiceLBFixture(t)
	s.createService("web", "uid-1", serviceTime)
	s.reconcile()
	first, _ := s.container(s.served()["default/web"])

	s.deleteService("web")
	s.createService("web", "uid-2", serviceTime.Add(time.Hour))
	s.reconcile()
	name := s.served()["default/web"]
	id, labels := s.container(name)
	if id == first {
		t.Errorf("the re-created Service got the old one's container %s", name)
	}
	if labels["dockyard.x-k8s.io/service"] != "default/web" || labels["dockyard.x-k8s.io/service-uid"] != "uid-2" {
		t.Errorf("labels %v, want the new Service's name and UID", labels)
	}
	if len(s.ingress("web")) != 1 {
		t.Errorf("the re-created Service has no address")
	}
}

// Two Services whose names have the same hash have the same container name: the container is
// the first one's, labelled so; the second is never served by it (no address, an Event),
// and resyncs do not flap between them. The second gets its own once the first is gone.
func TestServiceLoadBalancerNeverServesAServiceWithAnothersContainer(t *testing.T) {
	s := newServiceLBFixture(t)
	first, second := "svc-42190", "svc-44290"
	hash := func(name string) string {
		sum := sha256.Sum256([]byte("default/" + name))
		return hex.EncodeToString(sum[:])[:8]
	}
	if hash(first) != hash(second) {
		t.Fatalf("%s and %s should have the same hash", first, second)
	}
	s.createService(first, "uid-first", serviceTime)
	s.createService(second, "uid-second", serviceTime.Add(time.Minute))
	s.reconcile()
	s.wantServed("default/" + first)
	name := s.served()["default/"+first]
	if _, labels := s.container(name); labels["dockyard.x-k8s.io/service-uid"] != "uid-first" {
		t.Errorf("labels %v, want the first Service's UID", labels)
	}
	if ingress := s.ingress(second); len(ingress) != 0 {
		t.Errorf("Service %s is given the address of %s's container: %+v", second, first, ingress)
	}
	if events := s.events(second, "ServiceLoadBalancerNameCollision"); len(events) != 1 || !strings.Contains(events[0].Message, first) {
		t.Errorf("Events %+v, want one naming %s", events, first)
	}
	creates := s.rt.CallCount("CreateContainer")
	s.reconcile()
	if n := s.rt.CallCount("CreateContainer") - creates; n != 0 {
		t.Errorf("a resync created %d containers", n)
	}

	s.deleteService(first)
	s.reconcile()
	s.wantServed("default/" + second)
	if _, labels := s.container(name); labels["dockyard.x-k8s.io/service"] != "default/"+second || labels["dockyard.x-k8s.io/service-uid"] != "uid-second" {
		t.Errorf("labels %v, want the second Service's", labels)
	}
	if len(s.ingress(second)) != 1 {
		t.Errorf("Service %s has no address", second)
	}
}

// Names, addresses and ports the workload cluster's API returns reach haproxy's configuration
// only when valid: a bad one is skipped with an Event, the rest is served.
func TestServiceLoadBalancerKeepsInvalidNamesOutOfTheConfiguration(t *testing.T) {
	s := newServiceLBFixture(t)
	s.addNode("c1-md-0-b\n  server evil-node 192.0.2.66", "172.30.0.9")
	s.addNode("c1-md-0-c", "172.30.0.10\n  server evil-address 192.0.2.67")
	s.createService("web", "uid-web", serviceTime, corev1.ServicePort{Name: "bad", Port: 81, NodePort: 70000, Protocol: corev1.ProtocolTCP})
	s.createService("evil\nlisten stats", "uid-evil", serviceTime)
	s.reconcile()

	s.wantServed("default/web")
	s.rt.WithContainer(s.served()["default/web"], func(c *inmemory.Container) {
		cfg := string(c.Files[docker.LoadBalancerConfigPath])
		if !strings.Contains(cfg, "server c1-control-plane-a 172.30.0.3:30080 check") {
			t.Errorf("the valid node is not served:\n%s", cfg)
		}
		for _, bad := range []string{"evil", "192.0.2.6", "70000", "port-81", "listen stats"} {
			if strings.Contains(cfg, bad) {
				t.Errorf("haproxy.cfg has %q:\n%s", bad, cfg)
			}
		}
	})
	for _, name := range s.rt.ContainerNames() {
		s.rt.WithContainer(name, func(c *inmemory.Container) {
			if strings.Contains(string(c.Files[docker.LoadBalancerConfigPath]), "listen stats") {
				t.Errorf("%s's configuration has the invalid Service's name", name)
			}
		})
	}
	if events := s.events("web", "ServiceLoadBalancerPortSkipped"); len(events) != 1 || !strings.Contains(events[0].Message, "70000") {
		t.Errorf("Events %+v, want one naming the bad NodePort", events)
	}
	recorded := strings.Join(s.recorded(), "\n")
	for _, want := range []string{"Warning ServiceLoadBalancerNodeSkipped", "Warning ServiceLoadBalancerInvalidService"} {
		if !strings.Contains(recorded, want) {
			t.Errorf("no %q among the Cluster's Events:\n%s", want, recorded)
		}
	}
}
