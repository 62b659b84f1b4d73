package kubernetes

import (
	"context"
	"encoding/json"
	"net/netip"
	"sort"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
)

// Placement. The infrastructure cluster's administrator places a namespace's node Pods with
// annotations on the namespace, which a team holding a kubeconfig of that namespace cannot
// change: a node selector and default tolerations as Kubernetes' PodNodeSelector and
// PodTolerationRestriction admission plugins read them, a runtime class, and what the Pods may
// reach besides their own cluster. The engine applies them to every Pod it makes, and its zones
// are those of the nodes the selector and tolerations allow. config/infrastructure/
// placement_policy.yaml makes the cluster refuse Pods made otherwise (a team's own, with its
// kubeconfig). An engine whose credentials may not read its namespace applies none.
const (
	nodeSelectorAnnotation = "scheduler.alpha.kubernetes.io/node-selector"
	tolerationsAnnotation  = "scheduler.alpha.kubernetes.io/defaultTolerations"
	runtimeClassAnnotation = "dockyard.x-k8s.io/runtime-class-name"
	// egressAnnotation lists ranges (CIDR) node Pods may reach inside the cluster's pod network
	// besides their own cluster, e.g. a shared registry's Pods.
	egressAnnotation = "dockyard.x-k8s.io/allowed-egress"
)

// placement is where and how the namespace's administrator lets node Pods run.
type placement struct {
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
	runtimeClass string
	egress       []string
}

// placement reads the namespace's placement; none when the engine may not read its namespace.
// An annotation that does not parse is an error naming it: Pods made without it would run where
// the administrator did not place them.
func (r *Runtime) placement(ctx context.Context) (placement, error) {
	ns, err := r.client.CoreV1().Namespaces().Get(ctx, r.namespace, metav1.GetOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return placement{}, nil // not readable; a namespace not found fails what the engine makes there
	}
	if err != nil {
		return placement{}, errors.Wrapf(err, "reading the placement of namespace %s", r.namespace)
	}
	return parsePlacement(r.namespace, ns.Annotations)
}

func parsePlacement(namespace string, a map[string]string) (placement, error) {
	var p placement
	bad := func(key string, err error) error {
		return errors.Wrapf(err, "namespace %s of the infrastructure cluster: annotation %s", namespace, key)
	}
	for _, pair := range strings.Split(a[nodeSelectorAnnotation], ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return p, bad(nodeSelectorAnnotation, errors.Errorf("%q is no key=value", pair))
		}
		if p.nodeSelector == nil {
			p.nodeSelector = map[string]string{}
		}
		p.nodeSelector[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if t := a[tolerationsAnnotation]; t != "" {
		if err := json.Unmarshal([]byte(t), &p.tolerations); err != nil {
			return p, bad(tolerationsAnnotation, err)
		}
	}
	p.runtimeClass = strings.TrimSpace(a[runtimeClassAnnotation])
	for _, c := range strings.Split(a[egressAnnotation], ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if _, err := netip.ParsePrefix(c); err != nil {
			return p, bad(egressAnnotation, err)
		}
		p.egress = append(p.egress, c)
	}
	return p, nil
}

// apply places a Pod as the namespace's administrator says.
func (p placement) apply(ps *corev1.PodSpec) {
	if len(p.nodeSelector) > 0 {
		if ps.NodeSelector == nil {
			ps.NodeSelector = map[string]string{}
		}
		for k, v := range p.nodeSelector {
			ps.NodeSelector[k] = v
		}
	}
	ps.Tolerations = append(ps.Tolerations, p.tolerations...)
	if p.runtimeClass != "" {
		ps.RuntimeClassName = &p.runtimeClass
	}
}

// allows reports whether the namespace's Pods can land on a node: it carries the node selector's
// labels, is not cordoned, and every NoSchedule or NoExecute taint is tolerated.
func (p placement) allows(n *corev1.Node) bool {
	for k, v := range p.nodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	if n.Spec.Unschedulable {
		return false
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range p.tolerations {
			if p.tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				tolerated = true
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// egressRules are where a cluster's Pods (member) may connect: each other, DNS anywhere,
// anything outside the infrastructure cluster's pod network (its API server, registries, the
// world: what nodes pull and call), and the ranges the administrator allows there. Other Pods
// of the cluster (other teams' nodes, their fronts' backends) are out of reach. The pod network
// is the /16 (IPv4) or /48 (IPv6) around each node's pod range: kubeadm gives each node a
// slice of one such range. Without any node pod range known, only the cluster's own Pods, DNS
// and the allowed ranges are reachable.
func egressRules(member map[string]string, podRanges []string, p placement) []networkingv1.NetworkPolicyEgressRule {
	rules := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: member}}}},
		{Ports: dnsPorts()},
	}
	var out []networkingv1.NetworkPolicyPeer
	for _, family := range []struct{ all, bits string }{{"0.0.0.0/0", "4"}, {"::/0", "6"}} {
		var except []string
		for _, r := range podRanges {
			if (strings.Contains(r, ":")) == (family.bits == "6") {
				except = append(except, r)
			}
		}
		if len(except) > 0 {
			out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: family.all, Except: except}})
		}
	}
	for _, c := range p.egress {
		out = append(out, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	if len(out) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyEgressRule{To: out})
	}
	return rules
}

func dnsPorts() []networkingv1.NetworkPolicyPort {
	var ports []networkingv1.NetworkPolicyPort
	for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
		port := intstr.FromInt32(53)
		ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
	}
	return ports
}

// podNetwork returns the ranges around the infrastructure cluster's node pod ranges (see
// egressRules), sorted; none when no node has one.
func (r *Runtime) podNetwork(ctx context.Context) ([]string, error) {
	nodes, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, nil // the pod network unknown: only the cluster, DNS and the allowed ranges
	}
	if err != nil {
		return nil, errors.Wrap(err, "listing the infrastructure cluster's nodes for its pod network")
	}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		ranges := n.Spec.PodCIDRs
		if len(ranges) == 0 && n.Spec.PodCIDR != "" {
			ranges = []string{n.Spec.PodCIDR}
		}
		for _, c := range ranges {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			bits := 16
			if p.Addr().Is6() {
				bits = 48
			}
			if p.Bits() > bits {
				p = netip.PrefixFrom(p.Addr(), bits)
			}
			seen[p.Masked().String()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}
