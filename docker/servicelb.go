package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
)

// A Service load balancer gives a workload cluster's Service of type LoadBalancer an address
// the engine's host reaches: a haproxy container on the cluster's network (the role
// cloud-provider-kind plays for kind), forwarding each Service port to that port's NodePort on
// every node, health-checked. It carries the cluster's labels, so it goes with the cluster;
// other clusters' networks do not reach it.

// serviceLabel holds "<namespace>/<name>" of the workload Service on its load balancer, and
// serviceUIDLabel the Service's UID: a container serves only the Service both labels name, so
// a Service deleted and re-created under the same name never inherits the old one's container.
const (
	serviceLabel    = "dockyard.x-k8s.io/service"
	serviceUIDLabel = "dockyard.x-k8s.io/service-uid"
)

// ServiceLoadBalancerSpec describes the load balancer of one Service.
type ServiceLoadBalancerSpec struct {
	Cluster ClusterKey
	// Service is "<namespace>/<name>" in the workload cluster.
	Service string
	// UID is the Service's metadata.uid.
	UID     string
	Image   string
	Network string
	Ports   []haproxy.ServicePort
	Nodes   []haproxy.ServiceBackend
}

// ServiceLoadBalancer is a Service's load balancer container.
type ServiceLoadBalancer struct {
	m *Manager
	c *container.Container

	Name string
	// Service is "<namespace>/<name>" in the workload cluster, UID its metadata.uid: what the
	// container's labels say it serves.
	Service, UID string
}

// Address is the load balancer's IPv4 address on a network.
func (s *ServiceLoadBalancer) Address(network string) string { return nodeAddress(s.c, network) }

// serviceLoadBalancerHostname is "<cluster>-lb-<hash of the Service>": unique per Service,
// whatever the length of its namespace and name; its container name adds the namespace.
func serviceLoadBalancerHostname(k ClusterKey, service string) string {
	sum := sha256.Sum256([]byte(service))
	return hostname(k.Name + "-lb-" + hex.EncodeToString(sum[:])[:8])
}

// ServiceLoadBalancerName is the container name of a Service's load balancer. Two Services
// may share it (the hash is short): only one of them can have a load balancer at a time.
func ServiceLoadBalancerName(k ClusterKey, service string) string {
	return k.qualify(serviceLoadBalancerHostname(k, service))
}

// EnsureServiceLoadBalancer makes a Service's load balancer run with the spec's ports and
// nodes, and returns it. Its configuration is rendered (and every name in it checked) before
// anything is made. A container of the cluster under the load balancer's name is reused only
// when its labels name the same Service and UID; otherwise (the Service was re-created, or
// another Service's name has the same hash) it is replaced. A container of that name that is
// not the cluster's is left alone, and is an error.
func (m *Manager) EnsureServiceLoadBalancer(ctx context.Context, spec ServiceLoadBalancerSpec) (*ServiceLoadBalancer, error) {
	if spec.UID == "" {
		return nil, errors.Errorf("the load balancer of Service %s needs the Service's UID", spec.Service)
	}
	cfg, err := haproxy.RenderService(haproxy.ServiceData{Service: spec.Service, Ports: spec.Ports, Nodes: spec.Nodes})
	if err != nil {
		return nil, errors.Wrapf(err, "configuring the load balancer of Service %s", spec.Service)
	}
	host := serviceLoadBalancerHostname(spec.Cluster, spec.Service)
	name := spec.Cluster.qualify(host)
	c, err := m.runtime.InspectContainer(ctx, name)
	switch {
	case container.IsNotFound(err):
		c = nil
	case err != nil:
		return nil, errors.Wrapf(err, "finding the load balancer of Service %s", spec.Service)
	case !container.MatchLabels(c.Labels, spec.Cluster.ClusterLabels()):
		return nil, errors.Errorf("container %s, the name of the load balancer of Service %s, exists and is not cluster %s's: remove or rename it", name, spec.Service, spec.Cluster)
	case c.Labels[serviceLabel] != spec.Service || c.Labels[serviceUIDLabel] != spec.UID:
		if err := m.runtime.RemoveContainer(ctx, name); err != nil {
			return nil, errors.Wrapf(err, "replacing container %s, which served Service %s (UID %q), for Service %s (UID %s)",
				name, c.Labels[serviceLabel], c.Labels[serviceUIDLabel], spec.Service, spec.UID)
		}
		ctrl.LoggerFrom(ctx).Info("Replaced a load balancer whose labels name another Service or UID",
			"container", name, "previousService", c.Labels[serviceLabel], "previousUID", c.Labels[serviceUIDLabel], "service", spec.Service, "uid", spec.UID)
		c = nil
	}
	switch {
	case c == nil:
		if err := m.allowedImage(spec.Image); err != nil {
			return nil, err
		}
		if err := m.ensureImage(ctx, spec.Image); err != nil {
			return nil, err
		}
		labels := spec.Cluster.ClusterLabels()
		labels[serviceLabel] = spec.Service
		labels[serviceUIDLabel] = spec.UID
		if err := m.createAndStart(ctx, container.ContainerSpec{
			Name: name, Hostname: host, Image: spec.Image,
			Labels: labels, Network: spec.Network, RestartPolicy: "unless-stopped",
		}); err != nil {
			return nil, errors.Wrapf(err, "creating the load balancer of Service %s", spec.Service)
		}
	case !c.Running:
		if err := m.runtime.StartContainer(ctx, name); err != nil {
			return nil, errors.Wrapf(err, "starting the load balancer of Service %s", spec.Service)
		}
	}
	if _, err := m.applyHAProxyConfig(ctx, name, cfg); err != nil {
		return nil, errors.Wrapf(err, "configuring the load balancer of Service %s", spec.Service)
	}
	if c, err = m.runtime.InspectContainer(ctx, name); err != nil {
		return nil, err
	}
	return &ServiceLoadBalancer{m: m, c: c, Name: name, Service: spec.Service, UID: spec.UID}, nil
}

// ServiceLoadBalancers lists a cluster's Service load balancers.
func (m *Manager) ServiceLoadBalancers(ctx context.Context, cluster ClusterKey) ([]*ServiceLoadBalancer, error) {
	labels := cluster.ClusterLabels()
	labels[serviceLabel] = ""
	containers, err := m.runtime.ListContainers(ctx, labels)
	if err != nil {
		return nil, errors.Wrapf(err, "listing the Service load balancers of cluster %s", cluster)
	}
	out := make([]*ServiceLoadBalancer, 0, len(containers))
	for i := range containers {
		c := &containers[i]
		out = append(out, &ServiceLoadBalancer{m: m, c: c, Name: c.Name, Service: c.Labels[serviceLabel], UID: c.Labels[serviceUIDLabel]})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Service != out[j].Service {
			return out[i].Service < out[j].Service
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Delete removes the Service load balancer; one that is gone is not an error.
func (s *ServiceLoadBalancer) Delete(ctx context.Context) error {
	return errors.Wrapf(s.m.runtime.RemoveContainer(ctx, s.Name), "removing the load balancer of Service %s", s.Service)
}

// CollectLogs writes the load balancer's haproxy configuration, console output and the engine's
// inspect data into dir, like LoadBalancer.CollectLogs.
func (s *ServiceLoadBalancer) CollectLogs(ctx context.Context, dir *logdir.Dir) error {
	return errors.Wrapf(s.m.collectLoadBalancerLogs(ctx, s.c, dir), "collecting the logs of the load balancer of Service %s", s.Service)
}
