package kubernetes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A front for clients inside the cluster is a NodePort Service at its cluster address; one for
// clients elsewhere (ExternalFronts) is a LoadBalancer Service at its load balancer's address,
// without one (and saying why) until the cluster gives it one.
func TestFrontsForClientsElsewhereAreLoadBalancers(t *testing.T) {
	ctx := context.Background()
	spec := container.FrontSpec{Name: "team-a.dev-lb", Labels: map[string]string{"dockyard.x-k8s.io/cluster": "team-a/dev"},
		Select: map[string]string{"io.x-k8s.kind.role": "control-plane"}, Port: 6443}

	inside := newRuntime(nil, fake.NewClientset(), "team-a")
	f, err := inside.EnsureFront(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := inside.client.CoreV1().Services("team-a").Get(ctx, serviceName(spec.Name), metav1.GetOptions{})
	if err != nil || svc.Spec.Type != corev1.ServiceTypeNodePort {
		t.Fatalf("the front of clients inside: %v %v", svc, err)
	}
	if f.Pending != "" || f.Address != svc.Spec.ClusterIP {
		t.Errorf("the front of clients inside: %+v", f)
	}

	cs := fake.NewClientset()
	elsewhere := newRuntime(nil, cs, "team-a", ExternalFronts())
	f, err = elsewhere.EnsureFront(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	svc, err = cs.CoreV1().Services("team-a").Get(ctx, serviceName(spec.Name), metav1.GetOptions{})
	if err != nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("the front of clients elsewhere: %v %v", svc, err)
	}
	if f.Address != "" || !strings.Contains(f.Pending, "team-a/"+svc.Name) || !strings.Contains(f.Pending, "load balancer implementation") {
		t.Errorf("a front without its load balancer's address yet: %+v", f)
	}

	for _, c := range []struct {
		ingress []corev1.LoadBalancerIngress
		want    string
	}{
		{[]corev1.LoadBalancerIngress{{IP: "172.18.0.9"}}, "172.18.0.9"},
		{[]corev1.LoadBalancerIngress{{Hostname: "a1b2.elb.example.com"}, {IP: "172.18.0.9"}}, "a1b2.elb.example.com"},
		{[]corev1.LoadBalancerIngress{{}, {IP: "172.18.0.10"}}, "172.18.0.10"},
	} {
		svc.Status.LoadBalancer.Ingress = c.ingress
		if _, err := cs.CoreV1().Services("team-a").UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := elsewhere.InspectFront(ctx, spec.Name)
		if err != nil || got.Address != c.want || got.Pending != "" {
			t.Errorf("ingress %+v: front %+v %v, want address %s", c.ingress, got, err, c.want)
		}
		again, err := elsewhere.EnsureFront(ctx, spec)
		if err != nil || again.Address != c.want {
			t.Errorf("ensured again: %+v %v", again, err)
		}
	}
}
