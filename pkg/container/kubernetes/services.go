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
// needs it), NodePort otherwise. A Service that exists is kept.
func (r *Runtime) ensureService(ctx context.Context, pod *corev1.Pod, spec container.ContainerSpec) error {
	if len(spec.Ports) == 0 {
		return nil
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: serviceName(spec.Name), Namespace: r.namespace, Labels: objectLabels("container", spec.Labels),
			Annotations:     map[string]string{hostIPAnnotation: spec.Ports[0].HostIP},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{podLabel: podSelectorValue(spec.Name)}},
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
	_, err := r.client.CoreV1().Services(r.namespace).Create(ctx, svc, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsInvalid(err) && svc.Spec.Type == corev1.ServiceTypeNodePort:
		return errors.Wrapf(container.ErrPortInUse, "publishing the ports of container %s: %v", spec.Name, err)
	}
	return errors.Wrapf(err, "publishing the ports of container %s", spec.Name)
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
