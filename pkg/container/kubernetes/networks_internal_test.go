package kubernetes

import (
	"context"
	"fmt"
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
	if _, ok := np.Spec.PodSelector.MatchLabels[member]; !ok || len(np.Spec.PolicyTypes) != 2 || np.Spec.PolicyTypes[0] != "Ingress" || np.Spec.PolicyTypes[1] != "Egress" {
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

// A network's Pods reach their own network's Pods, DNS, whatever lies outside the
// infrastructure cluster's pod network (the /16 around each node's pod range), and the ranges
// the namespace's administrator allows: not other clusters' Pods. Before, a policy was ingress
// only, and a team's node reached every other team's Pods on their open ports.
func TestANetworkReachesItsOwnPodsDNSAndWhatLiesOutsideThePodNetwork(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.0.0/24", "fd00:10:244::/64"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Annotations: map[string]string{egressAnnotation: "10.244.7.0/24"}}},
	)
	r := newRuntime(nil, cs, "team-a")
	if err := r.CreateNetwork(ctx, container.NetworkSpec{Name: "dev", OpenPorts: []int{6443}}); err != nil {
		t.Fatal(err)
	}
	np, err := cs.NetworkingV1().NetworkPolicies("team-a").Get(ctx, "dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := np.Spec.Egress
	if len(out) != 3 {
		t.Fatalf("egress rules %+v, want the network's Pods, DNS, and the ranges outside the pod network", out)
	}
	if len(out[0].To) != 1 || out[0].To[0].PodSelector == nil || out[0].To[0].NamespaceSelector != nil {
		t.Errorf("the network's own rule %+v", out[0])
	} else if _, ok := out[0].To[0].PodSelector.MatchLabels[networkLabel("dev")]; !ok {
		t.Errorf("the network's own rule reaches %v", out[0].To[0].PodSelector)
	}
	if len(out[1].To) != 0 || len(out[1].Ports) != 2 || out[1].Ports[0].Port.IntValue() != 53 {
		t.Errorf("the DNS rule %+v: want port 53 anywhere", out[1])
	}
	var blocks []string
	for _, p := range out[2].To {
		if p.IPBlock == nil {
			t.Fatalf("a rule of ranges with a peer %+v", p)
		}
		blocks = append(blocks, p.IPBlock.CIDR+" except "+fmt.Sprint(p.IPBlock.Except))
	}
	want := []string{"0.0.0.0/0 except [10.244.0.0/16]", "::/0 except [fd00:10:244::/48]", "10.244.7.0/24 except []"}
	if fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Errorf("ranges %q, want %q", blocks, want)
	}
}
