package kubernetes

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// hostIPAnnotation keeps the host address a port was asked on (the Service's ports do not).
const hostIPAnnotation = "dockyard.x-k8s.io/host-ip"

// ensureService makes the Service publishing a container's ports, owned by its Pod so it goes
// with it: ClusterIP when every port asks for a loopback address (nothing outside the cluster
// needs it), NodePort otherwise. A Service of the owner's that exists is kept; one of its name
// that is not the owner's is said so.
func (r *Runtime) ensureService(ctx context.Context, pod *corev1.Pod, spec container.ContainerSpec) error {
	if len(spec.Ports) == 0 {
		return nil
	}
	svc := serviceOf(pod, spec)
	r.own(svc.Labels, svc.Annotations)
	if err := r.claim(ctx); err != nil {
		return errors.Wrapf(err, "publishing the ports of container %s", spec.Name)
	}
	_, err := r.client.CoreV1().Services(r.namespace).Create(ctx, svc, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		if _, theirs := r.ownService(ctx, svc.Name); container.IsNotFound(theirs) {
			return errors.Wrapf(r.notTheOwners("Service", svc.Name), "publishing the ports of container %s", spec.Name)
		}
		return nil
	case apierrors.IsInvalid(err) && svc.Spec.Type == corev1.ServiceTypeNodePort:
		return errors.Wrapf(container.ErrPortInUse, "publishing the ports of container %s: %v", spec.Name, err)
	}
	return errors.Wrapf(err, "publishing the ports of container %s", spec.Name)
}

// serviceOf is the Service publishing the ports of a container's Pod, selecting it.
func serviceOf(pod *corev1.Pod, spec container.ContainerSpec) *corev1.Service {
	sel := map[string]string{podLabel: podSelectorValue(spec.Name)}
	if v, ok := pod.Labels[ownerLabel]; ok {
		sel[ownerLabel] = v
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: serviceName(spec.Name), Namespace: pod.Namespace, Labels: objectLabels("container", spec.Labels),
			Annotations:     map[string]string{hostIPAnnotation: spec.Ports[0].HostIP},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: sel},
	}
	for _, p := range spec.Ports {
		if a, err := netip.ParseAddr(p.HostIP); err != nil || !a.IsLoopback() {
			svc.Spec.Type = corev1.ServiceTypeNodePort
		}
	}
	for _, p := range spec.Ports {
		port := corev1.ServicePort{Protocol: protocol(p.Protocol), Port: int32(p.ContainerPort), TargetPort: intstr.FromInt32(int32(p.ContainerPort))}
		port.Name = fmt.Sprintf("%s-%d", strings.ToLower(string(port.Protocol)), p.ContainerPort)
		if p.HostPort != 0 {
			if svc.Spec.Type == corev1.ServiceTypeNodePort {
				port.NodePort = int32(p.HostPort)
			} else {
				port.Port = int32(p.HostPort)
			}
		}
		svc.Spec.Ports = append(svc.Spec.Ports, port)
	}
	return svc
}

// ownService reads a Service of the owner's (a container's or a front); ErrNotFound when there
// is none of that name.
func (r *Runtime) ownService(ctx context.Context, name string) (*corev1.Service, error) {
	o, err := r.owned(ctx, "Service", name, func() (metav1.Object, error) {
		return r.client.CoreV1().Services(r.namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Service), nil
}

// removeService deletes the Service of a container when it is the owner's.
func (r *Runtime) removeService(ctx context.Context, name string) error {
	return errors.Wrapf(r.deleteService(ctx, serviceName(name)), "removing the Service of container %s", name)
}

// deleteService deletes a Service of the owner's; one that is not there, or not the owner's,
// is left.
func (r *Runtime) deleteService(ctx context.Context, name string) error {
	svc, err := r.ownService(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = r.client.CoreV1().Services(r.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: sameObject(svc)})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// servicePorts are the published ports of a container: on the Service's cluster address for
// a ClusterIP Service, on every node's address (HostIP empty) for a NodePort one.
func servicePorts(svc *corev1.Service) []container.PortMapping {
	var out []container.PortMapping
	for _, p := range svc.Spec.Ports {
		pm := container.PortMapping{ContainerPort: p.TargetPort.IntValue(), Protocol: strings.ToLower(string(p.Protocol)), HostIP: svc.Spec.ClusterIP, HostPort: int(p.Port)}
		if svc.Spec.Type == corev1.ServiceTypeNodePort {
			pm.HostIP, pm.HostPort = "", int(p.NodePort)
		}
		out = append(out, pm)
	}
	return out
}
