package docker

import (
	"context"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
)

// fronts are load balancers on an engine that balances traffic itself (Runtime.Balancer:
// Kubernetes): a cluster's load balancer is the engine's front in front of its control plane
// nodes, not a haproxy container. Its address stays while nodes come and go, and it follows the
// ready ones without being told: it runs, answers on the front's address whatever the network,
// publishes nothing on a host, and has nothing to update.
type fronts struct {
	m *Manager
	b container.Balancer
}

func (f *fronts) fronted() bool { return true }

// ensure makes (or keeps) the front of a cluster's control plane. The policy has nothing to
// check: the front runs no image and publishes nothing on the engine's host.
func (f *fronts) ensure(ctx context.Context, spec LoadBalancerSpec) (*LoadBalancer, error) {
	if spec.Port == 0 {
		spec.Port = APIServerPort
	}
	fr, err := f.b.EnsureFront(ctx, container.FrontSpec{
		Name: LoadBalancerName(spec.Cluster), Labels: spec.Cluster.labels(roleLoadBalancer),
		Select: spec.Cluster.labels(RoleControlPlane), Port: spec.Port, TargetPort: APIServerPort,
	})
	if err != nil {
		return nil, err
	}
	return f.handle(spec.Cluster, fr), nil
}

// find returns the handle of a cluster's front, nil when it has none.
func (f *fronts) find(ctx context.Context, cluster ClusterKey) (*LoadBalancer, error) {
	fr, err := f.b.InspectFront(ctx, LoadBalancerName(cluster))
	if container.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return f.handle(cluster, fr), nil
}

func (f *fronts) handle(cluster ClusterKey, fr *container.Front) *LoadBalancer {
	lb := &LoadBalancer{lbs: f, front: fr, Name: fr.Name, Cluster: cluster, Running: true, State: "running", Port: fr.Port, anyNetwork: fr.Address, frontNodePort: fr.NodePort}
	if fr.Address == "" {
		lb.Pending = fr.Pending
	}
	return lb
}

func (f *fronts) remove(ctx context.Context, cluster ClusterKey) error {
	return f.b.RemoveFront(ctx, LoadBalancerName(cluster))
}

// update has nothing to do: the front sends traffic to the ready control plane nodes.
func (f *fronts) update(context.Context, *LoadBalancer, string, func(context.Context) ([]haproxy.Backend, error)) (bool, error) {
	return false, nil
}

// nodePort asks the engine for its hosts now.
func (f *fronts) nodePort(ctx context.Context, lb *LoadBalancer) ([]string, int, error) {
	if lb.frontNodePort == 0 {
		return nil, 0, nil
	}
	hosts, err := f.b.FrontHosts(ctx)
	return hosts, lb.frontNodePort, err
}

// collectLogs describes the front: it has no logs, and what it is says where it answers.
func (f *fronts) collectLogs(_ context.Context, lb *LoadBalancer, dir *logdir.Dir) error {
	return dir.WriteJSON("front.json", lb.front)
}
