package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"sort"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

var _ container.Balancer = &Runtime{}

// Balancer is the engine itself: a front is a Service.
func (r *Runtime) Balancer() container.Balancer { return r }

// EnsureFront makes a Service in front of the owner's ready Pods carrying spec.Select, or
// returns the owner's of that name as it is; a Service of its name not the owner's is said so.
// A NodePort Service's address is its cluster address, which lasts as long as the Service
// whatever happens to the Pods; with ExternalFronts it is a LoadBalancer Service and its address
// is the load balancer's. Either way its node port reaches it through any node of the cluster.
func (r *Runtime) EnsureFront(ctx context.Context, spec container.FrontSpec) (*container.Front, error) {
	if f, err := r.InspectFront(ctx, spec.Name); !container.IsNotFound(err) {
		return f, err
	}
	sel := map[string]string{ownerLabel: ownerValue(r.owner)}
	for k, v := range spec.Select {
		key, ok := labelKey(k)
		if !ok {
			return nil, errors.Errorf("front %s: %q cannot select Pods", spec.Name, k)
		}
		sel[key] = labelValue(v)
	}
	target := spec.TargetPort
	if target == 0 {
		target = spec.Port
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(spec.Name), Namespace: r.namespace, Labels: objectLabels("front", spec.Labels), Annotations: annotated(spec.Labels)},
		Spec: corev1.ServiceSpec{
			Type: r.fronts, Selector: sel,
			Ports: []corev1.ServicePort{{Name: "front", Protocol: corev1.ProtocolTCP, Port: int32(spec.Port), TargetPort: intstr.FromInt32(int32(target))}},
		},
	}
	svc.Annotations[frontNameAnnotation] = spec.Name
	r.own(svc.Labels, svc.Annotations)
	if err := r.claim(ctx); err != nil {
		return nil, errors.Wrapf(err, "making front %s", spec.Name)
	}
	created, err := r.client.CoreV1().Services(r.namespace).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if _, theirs := r.ownService(ctx, svc.Name); container.IsNotFound(theirs) {
			return nil, errors.Wrapf(r.notTheOwners("Service", svc.Name), "making front %s", spec.Name)
		}
	}
	if err != nil {
		return nil, errors.Wrapf(err, "creating the Service in front of %s", spec.Name)
	}
	return frontOf(created), nil
}

// FrontHosts returns the internal addresses of the cluster's Ready nodes, where fronts' node
// ports answer.
func (r *Runtime) FrontHosts(ctx context.Context) ([]string, error) {
	nodes, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, errors.Wrap(err, "listing the infrastructure cluster's nodes")
	}
	var out []string
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out = append(out, a.Address)
			}
		}
	}
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// frontNameAnnotation keeps a front's name (its Service's may be a hash of it).
const frontNameAnnotation = "dockyard.x-k8s.io/front"

// frontOf is the front a Service is. A LoadBalancer Service's address is the first of its
// status.loadBalancer.ingress (an IP, else a host name), and none until it has one.
func frontOf(svc *corev1.Service) *container.Front {
	f := &container.Front{Name: svc.Annotations[frontNameAnnotation], Labels: labelsOf(svc), Address: svc.Spec.ClusterIP}
	if len(svc.Spec.Ports) > 0 {
		f.Port, f.NodePort = int(svc.Spec.Ports[0].Port), int(svc.Spec.Ports[0].NodePort)
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		f.Address = ""
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if f.Address = cmp.Or(in.IP, in.Hostname); f.Address != "" {
				break
			}
		}
		if f.Address == "" {
			f.Pending = fmt.Sprintf("Service %s/%s of type LoadBalancer has no address in its status.loadBalancer.ingress yet; "+
				"the infrastructure cluster gives it one only if it has a load balancer implementation (a cloud's, MetalLB, Dockyard's for its own clusters)", svc.Namespace, svc.Name)
		}
	}
	return f
}

// InspectFront returns a front; ErrNotFound when the owner has no Service of it.
func (r *Runtime) InspectFront(ctx context.Context, name string) (*container.Front, error) {
	svc, err := r.ownService(ctx, serviceName(name))
	if err != nil {
		return nil, errors.Wrapf(err, "inspecting front %s", name)
	}
	if svc.Labels[kindLabel] != "front" {
		return nil, errors.Wrapf(container.ErrNotFound, "Service %s is not one of Dockyard's fronts", svc.Name)
	}
	return frontOf(svc), nil
}

// RemoveFront deletes a front's Service; one not the owner's is left.
func (r *Runtime) RemoveFront(ctx context.Context, name string) error {
	return errors.Wrapf(r.deleteService(ctx, serviceName(name)), "removing front %s", name)
}

// Zones returns the topology.kubernetes.io/zone values of the nodes the namespace's Pods can be
// scheduled on: those its placement (placement.go) allows.
func (r *Runtime) Zones(ctx context.Context) ([]string, error) {
	place, err := r.placement(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: corev1.LabelTopologyZone})
	if err != nil {
		return nil, errors.Wrap(err, "listing the infrastructure cluster's nodes")
	}
	seen := map[string]bool{}
	for _, n := range nodes.Items {
		if place.allows(&n) {
			seen[n.Labels[corev1.LabelTopologyZone]] = true
		}
	}
	zones := make([]string, 0, len(seen))
	for z := range seen {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	return zones, nil
}
