package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
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
		Client: f.c, Nodes: f.nodes, Recorder: f.recorder, Image: docker.DefaultLoadBalancerImage,
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
	f.rt.WithContainer(lbs[0].Name, func(c *fake.Container) {
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
