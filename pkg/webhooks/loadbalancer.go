package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// validateLoadBalancerHostPort checks spec.loadBalancer.hostPort: a port of the host, or unset
// (the CRD's bounds, checked again for specs that reach the webhook without them).
func validateLoadBalancerHostPort(spec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	if p := spec.LoadBalancer.HostPort; p < 0 || p > 65535 {
		return field.ErrorList{field.Invalid(fldPath.Child("loadBalancer", "hostPort"), p, "must be a port from 1 to 65535, or unset for the engine to pick one")}
	}
	return nil
}

// validateLoadBalancerHostPortUpdate refuses to change spec.loadBalancer.hostPort once it is
// set (by the user at creation, or by Dockyard with the port the engine picked): the load
// balancer is pinned to it and the kubeconfig written when the cluster was created names it.
// Setting it when it was unset is allowed: that is how Dockyard records the port.
func validateLoadBalancerHostPortUpdate(oldSpec, newSpec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	was, is := oldSpec.LoadBalancer.HostPort, newSpec.LoadBalancer.HostPort
	if was == 0 || is == was {
		return nil
	}
	return field.ErrorList{field.Forbidden(fldPath.Child("loadBalancer", "hostPort"),
		fmt.Sprintf("is immutable once set (was %d): the load balancer is published there and the kubeconfig written when the cluster was created names it", was))}
}

// keepLoadBalancerHostPort gives an update that leaves spec.loadBalancer.hostPort out (the
// whole object replaced from the manifest it was created from) the port set before, as the
// control plane endpoint is kept.
func keepLoadBalancerHostPort(ctx context.Context, spec *infrav1.DockyardClusterSpec) error {
	if spec.LoadBalancer.HostPort != 0 {
		return nil
	}
	old, err := oldDockyardCluster(ctx)
	if err != nil || old == nil {
		return err
	}
	spec.LoadBalancer.HostPort = old.Spec.LoadBalancer.HostPort
	return nil
}
