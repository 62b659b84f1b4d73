package kubernetes

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// networksAnnotation lists the networks a Pod is attached to, by name.
const networksAnnotation = "dockyard.x-k8s.io/networks"

func joinedNetworks(pod *corev1.Pod) []string {
	var out []string
	_ = json.Unmarshal([]byte(pod.Annotations[networksAnnotation]), &out)
	return out
}

func networksValue(names []string) string {
	b, _ := json.Marshal(names)
	return string(b)
}

// CreateNetwork makes the network's NetworkPolicy: its Pods (the owner's carrying its label)
// admit their network's Pods on every port, and anyone on spec.OpenPorts (a cluster's API
// server: Cluster API's controllers, the front's node port or load balancer); nothing else, from
// this namespace (other clusters) or any other. Subnets are refused: the cluster's network gives
// Pods their addresses. The policy holds only where the cluster's CNI enforces NetworkPolicies.
// A NetworkPolicy of its name not the owner's is said so.
func (r *Runtime) CreateNetwork(ctx context.Context, spec container.NetworkSpec) error {
	if err := validName("network", spec.Name); err != nil {
		return err
	}
	if spec.Subnet != "" || spec.WantsIPv6() {
		return errors.Errorf("network %s: a Kubernetes infrastructure cluster gives Pods their addresses; a network cannot choose a subnet or IPv6", spec.Name)
	}
	member := map[string]string{networkLabel(spec.Name): "", ownerLabel: ownerValue(r.owner)}
	ingress := []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: member}}}}}
	if len(spec.OpenPorts) > 0 {
		open := networkingv1.NetworkPolicyIngressRule{} // no From: any source
		for _, p := range spec.OpenPorts {
			port := intstr.FromInt32(int32(p)) //nolint:gosec // a port, at most 65535
			open.Ports = append(open.Ports, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: &port})
		}
		ingress = append(ingress, open)
	}
	place, err := r.placement(ctx)
	if err != nil {
		return errors.Wrapf(err, "creating network %s", spec.Name)
	}
	podNetwork, err := r.podNetwork(ctx)
	if err != nil {
		return errors.Wrapf(err, "creating network %s", spec.Name)
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: r.namespace, Labels: objectLabels("network", spec.Labels), Annotations: annotated(spec.Labels)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: member},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     ingress,
			Egress:      egressRules(member, podNetwork, place),
		},
	}
	r.own(np.Labels, np.Annotations)
	if err := r.claim(ctx); err != nil {
		return errors.Wrapf(err, "creating network %s", spec.Name)
	}
	_, err = r.client.NetworkingV1().NetworkPolicies(r.namespace).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if _, theirs := r.ownNetwork(ctx, spec.Name); container.IsNotFound(theirs) {
			return errors.Wrapf(r.notTheOwners("NetworkPolicy", spec.Name), "creating network %s", spec.Name)
		}
	}
	return errors.Wrapf(err, "creating network %s", spec.Name)
}

// ownNetwork reads a NetworkPolicy of the owner's; ErrNotFound when there is none of that name.
func (r *Runtime) ownNetwork(ctx context.Context, name string) (*networkingv1.NetworkPolicy, error) {
	o, err := r.owned(ctx, "NetworkPolicy", name, func() (metav1.Object, error) {
		return r.client.NetworkingV1().NetworkPolicies(r.namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*networkingv1.NetworkPolicy), nil
}

// InspectNetwork returns a network with the owner's Pods attached; it has no subnets or
// gateways of its own. ErrNotFound when the owner has no such network.
func (r *Runtime) InspectNetwork(ctx context.Context, name string) (*container.Network, error) {
	np, err := r.ownNetwork(ctx, name)
	if err != nil {
		return nil, errors.Wrapf(err, "inspecting network %s", name)
	}
	if np.Labels[kindLabel] != "network" {
		return nil, errors.Wrapf(container.ErrNotFound, "NetworkPolicy %s is not one of Dockyard's networks", name)
	}
	pods, err := r.ownPods(ctx, networkLabel(name))
	if err != nil {
		return nil, errors.Wrapf(err, "listing the Pods of network %s", name)
	}
	n := &container.Network{ID: string(np.UID), Name: name, Labels: labelsOf(np)}
	for _, p := range pods {
		n.Containers = append(n.Containers, p.Name)
	}
	return n, nil
}

// ListNetworks returns the owner's networks carrying the labels (without their Pods).
func (r *Runtime) ListNetworks(ctx context.Context, want map[string]string) ([]container.Network, error) {
	nps, err := r.ownedList(ctx, func() ([]metav1.Object, error) {
		l, err := r.client.NetworkingV1().NetworkPolicies(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector("network", want)})
		if err != nil {
			return nil, err
		}
		return objects(l.Items), nil
	})
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's networks")
	}
	var out []container.Network
	for _, np := range nps {
		if l := labelsOf(np); container.MatchLabels(l, want) {
			out = append(out, container.Network{ID: string(np.GetUID()), Name: np.GetName(), Labels: l})
		}
	}
	return out, nil
}

// RemoveNetwork deletes the network's NetworkPolicy; its Pods keep running, unattached. One not
// the owner's is left. The owner's claim goes with its last object (releaseClaim).
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	np, err := r.ownNetwork(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err == nil {
		err = r.client.NetworkingV1().NetworkPolicies(r.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: sameObject(np)})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return errors.Wrapf(err, "removing network %s", name)
	}
	return errors.Wrapf(r.releaseClaim(ctx), "removing network %s", name)
}

// ConnectNetwork attaches a Pod of the owner's to one more of its networks by labelling it.
func (r *Runtime) ConnectNetwork(ctx context.Context, network, name string) error {
	if _, err := r.InspectNetwork(ctx, network); err != nil {
		return err
	}
	return r.attach(ctx, network, name, true)
}

// DisconnectNetwork detaches a Pod from a network; a Pod or network that is not there is not an
// error.
func (r *Runtime) DisconnectNetwork(ctx context.Context, network, name string) error {
	err := r.attach(ctx, network, name, false)
	if container.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Runtime) attach(ctx context.Context, network, name string, join bool) error {
	pods := r.client.CoreV1().Pods(r.namespace)
	pod, err := r.ownPod(ctx, name)
	if err != nil {
		return errors.Wrapf(err, "attaching container %s to network %s", name, network)
	}
	joined := joinedNetworks(pod)
	has := slices.Contains(joined, network)
	if has == join {
		return nil
	}
	label := any(nil)
	if join {
		joined, label = append(joined, network), ""
	} else {
		joined = slices.DeleteFunc(joined, func(n string) bool { return n == network })
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID, // that Pod, not another made since under its name
		"labels":      map[string]any{networkLabel(network): label},
		"annotations": map[string]any{networksAnnotation: networksValue(joined)},
	}})
	if _, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return notFound(err, "attaching container %s to network %s", name, network)
	}
	return nil
}
