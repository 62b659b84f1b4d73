package docker

import (
	"context"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A cluster's load balancer on an engine that balances traffic itself (container.Balancer:
// Kubernetes) is the engine's front in front of the cluster's control plane nodes, not a
// haproxy container: its address stays while nodes come and go, and it follows the ready ones
// without being told. The LoadBalancer handle stands for it, so controllers see no difference:
// it runs, answers on the front's address whatever the network, publishes nothing on a host,
// and Update has nothing to do.

// ensureFront makes (or keeps) the front of a cluster's control plane.
func (m *Manager) ensureFront(ctx context.Context, b container.Balancer, spec LoadBalancerSpec) (*LoadBalancer, error) {
	if spec.Port == 0 {
		spec.Port = APIServerPort
	}
	f, err := b.EnsureFront(ctx, container.FrontSpec{
		Name: LoadBalancerName(spec.Cluster), Labels: spec.Cluster.labels(RoleLoadBalancer),
		Select: spec.Cluster.labels(RoleControlPlane), Port: spec.Port, TargetPort: APIServerPort,
	})
	if err != nil {
		return nil, err
	}
	return m.frontHandle(spec.Cluster, f), nil
}

// findFront returns the handle of a cluster's front, nil when it has none.
func (m *Manager) findFront(ctx context.Context, b container.Balancer, cluster ClusterKey) (*LoadBalancer, error) {
	f, err := b.InspectFront(ctx, LoadBalancerName(cluster))
	if container.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return m.frontHandle(cluster, f), nil
}

func (m *Manager) frontHandle(cluster ClusterKey, f *container.Front) *LoadBalancer {
	c := &container.Container{Name: f.Name, Labels: f.Labels, State: "running", Running: true}
	return &LoadBalancer{m: m, c: c, front: f, Name: f.Name, Cluster: cluster}
}

// Pending says why a load balancer has no address yet, when it is the engine's front and the
// engine has not given it one (a Kubernetes Service of type LoadBalancer waiting for its
// ingress); "" otherwise.
func (lb *LoadBalancer) Pending() string {
	if lb == nil || lb.front == nil || lb.front.Address != "" {
		return ""
	}
	return lb.front.Pending
}

// NodePort is where a load balancer that is the engine's front also answers from outside the
// engine's network: the addresses of the engine's hosts now and the port; none for a container
// (or no load balancer). The hosts are asked for here, not with every look at the front.
func (lb *LoadBalancer) NodePort(ctx context.Context) (hosts []string, port int, err error) {
	if lb == nil || lb.front == nil || lb.front.NodePort == 0 {
		return nil, 0, nil
	}
	b, ok := lb.m.runtime.(container.Balancer)
	if !ok {
		return nil, 0, nil
	}
	hosts, err = b.FrontHosts(ctx)
	return hosts, lb.front.NodePort, err
}
