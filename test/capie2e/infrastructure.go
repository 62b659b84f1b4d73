package capie2e

import (
	"context"
	"net"
	"strconv"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"sigs.k8s.io/cluster-api/test/framework"
)

// InfrastructureProxy is a management cluster that is also the infrastructure cluster of the
// workload clusters it makes (the kubernetes flavor): their endpoint is a Service's cluster
// address, which the host the suite runs on does not route to. Its workload proxies dial the
// Service's node port on a node of the management cluster instead (its containers' addresses,
// which the host reaches), keeping the endpoint as the name the API server's certificate is
// checked against.
type InfrastructureProxy struct {
	framework.ClusterProxy
}

// GetWorkloadCluster returns the proxy of a workload cluster that dials its endpoint through
// the management cluster's nodes.
func (p InfrastructureProxy) GetWorkloadCluster(ctx context.Context, namespace, name string, options ...framework.Option) framework.ClusterProxy {
	return p.ClusterProxy.GetWorkloadCluster(ctx, namespace, name, append(options, framework.WithRESTConfigModifier(func(cfg *rest.Config) {
		cfg.Dial = p.dialer(namespace)
	}))...)
}

// dialer dials a Service's cluster address (host:port) on its node port, on the first node of
// the management cluster that answers; any other address directly.
func (p InfrastructureProxy) dialer(namespace string) func(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		targets, err := NodePortTargets(ctx, p.GetClient(), namespace, address)
		if err != nil {
			return nil, err
		}
		if len(targets) == 0 {
			return d.DialContext(ctx, network, address)
		}
		var last error
		for _, t := range targets {
			c, err := d.DialContext(ctx, network, t)
			if err == nil {
				return c, nil
			}
			last = err
		}
		return nil, errors.Wrapf(last, "dialing %s through the management cluster's nodes %v", address, targets)
	}
}

// NodePortTargets returns where the Service of a namespace holding a cluster address (host:port)
// answers on the cluster's Ready nodes (their internal addresses and its node port); none when
// no such Service has a node port.
func NodePortTargets(ctx context.Context, c client.Client, namespace, address string) ([]string, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, errors.Wrapf(err, "dialing %s", address)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, errors.Wrapf(err, "dialing %s", address)
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs, client.InNamespace(namespace)); err != nil {
		return nil, errors.Wrapf(err, "listing the Services of %s", namespace)
	}
	nodePort := 0
	for _, s := range svcs.Items {
		for _, sp := range s.Spec.Ports {
			if s.Spec.ClusterIP == host && int(sp.Port) == port && sp.NodePort != 0 {
				nodePort = int(sp.NodePort)
			}
		}
	}
	if nodePort == 0 {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, errors.Wrap(err, "listing the management cluster's nodes")
	}
	var out []string
	for _, n := range nodes.Items {
		if !nodeReady(&n) {
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				out = append(out, net.JoinHostPort(a.Address, strconv.Itoa(nodePort)))
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

// BindInfrastructureRole grants Dockyard's manager, in every namespace, the rights it needs to
// run nodes as Pods of the management cluster (config/rbac/infrastructure_role.yaml), which an
// administrator binds only where the manager's policy allows it.
func BindInfrastructureRole(ctx context.Context, c client.Client) error {
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dockyard-e2e-infrastructure"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "dockyard-manager-infrastructure-role"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "dockyard-manager", Namespace: "dockyard-system"}},
	}
	return errors.Wrap(client.IgnoreAlreadyExists(c.Create(ctx, b)), "binding Dockyard's infrastructure role")
}
