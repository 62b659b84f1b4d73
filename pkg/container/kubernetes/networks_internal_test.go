package kubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A network's NetworkPolicy admits its own Pods on every port and anyone on its open ports,
// and nothing else: not the Pods of other networks in the namespace (other clusters), nor
// Pods of other namespaces beyond the open ports.
func TestANetworkAdmitsItsOwnPodsAndItsOpenPortsOnly(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	r := newRuntime(nil, cs, "team-a")
	if err := r.CreateNetwork(ctx, container.NetworkSpec{Name: "dev", OpenPorts: []int{6443}}); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateNetwork(ctx, container.NetworkSpec{Name: "closed"}); err != nil {
		t.Fatal(err)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("team-a").Get(ctx, "dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	member := networkLabel("dev")
	if _, ok := np.Spec.PodSelector.MatchLabels[member]; !ok || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Ingress" {
		t.Fatalf("the policy selects %v for %v", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	in := np.Spec.Ingress
	if len(in) != 2 {
		t.Fatalf("ingress rules %+v, want one for the network's Pods and one for its open port", in)
	}
	own := in[0]
	if len(own.Ports) != 0 || len(own.From) != 1 || own.From[0].NamespaceSelector != nil || own.From[0].IPBlock != nil {
		t.Errorf("the network's own rule %+v: want every port from its own Pods only", own)
	} else if _, ok := own.From[0].PodSelector.MatchLabels[member]; !ok {
		t.Errorf("the network's own rule admits %v", own.From[0].PodSelector)
	}
	open := in[1]
	if len(open.From) != 0 || len(open.Ports) != 1 || open.Ports[0].Port.IntValue() != 6443 || *open.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("the open port's rule %+v: want TCP 6443 from anywhere", open)
	}
	closed, err := cs.NetworkingV1().NetworkPolicies("team-a").Get(ctx, "closed", metav1.GetOptions{})
	if err != nil || len(closed.Spec.Ingress) != 1 {
		t.Errorf("a network without open ports: %+v %v", closed, err)
	}
}
