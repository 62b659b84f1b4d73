package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A Service load balancer gives a workload cluster's Service of type LoadBalancer an address
// the engine's host reaches: a haproxy container on the cluster's network (the role
// cloud-provider-kind plays for kind), forwarding each Service port to that port's NodePort on
// every node, health-checked. It carries the cluster's labels, so it goes with the cluster;
// other clusters' networks do not reach it.

// serviceLabel holds "<namespace>/<name>" of the workload Service on its load balancer.
const serviceLabel = "dockyard.x-k8s.io/service"

// ServicePort is a TCP port of a Service and the NodePort that serves it on every node.
type ServicePort struct {
	Port, NodePort int
}

// ServiceBackend is a node the Service's traffic goes to.
type ServiceBackend struct {
	Name, Address string
}

// ServiceLoadBalancerSpec describes the load balancer of one Service.
type ServiceLoadBalancerSpec struct {
	Cluster ClusterKey
	// Service is "<namespace>/<name>" in the workload cluster.
	Service string
	Image   string
	Network string
	Ports   []ServicePort
	Nodes   []ServiceBackend
}

// ServiceLoadBalancer is a Service's load balancer container.
type ServiceLoadBalancer struct {
	Name string
	// Service is "<namespace>/<name>" in the workload cluster.
	Service string
	c       *container.Container
}

// Address is the load balancer's IPv4 address on a network.
func (s *ServiceLoadBalancer) Address(network string) string { return nodeAddress(s.c, network) }

// serviceLoadBalancerHostname is "<cluster>-lb-<hash of the Service>": unique per Service,
// whatever the length of its namespace and name; its container name adds the namespace.
func serviceLoadBalancerHostname(k ClusterKey, service string) string {
	sum := sha256.Sum256([]byte(service))
	return hostname(k.Name + "-lb-" + hex.EncodeToString(sum[:])[:8])
}

// EnsureServiceLoadBalancer makes a Service's load balancer run with the spec's ports and
// nodes, and returns it.
func (m *Manager) EnsureServiceLoadBalancer(ctx context.Context, spec ServiceLoadBalancerSpec) (*ServiceLoadBalancer, error) {
	host := serviceLoadBalancerHostname(spec.Cluster, spec.Service)
	name := spec.Cluster.qualify(host)
	c, err := m.runtime.InspectContainer(ctx, name)
	switch {
	case container.IsNotFound(err):
		if err := m.allowedImage(spec.Image); err != nil {
			return nil, err
		}
		if err := m.EnsureImage(ctx, spec.Image); err != nil {
			return nil, err
		}
		labels := spec.Cluster.ClusterLabels()
		labels[serviceLabel] = spec.Service
		if err := m.createAndStart(ctx, container.ContainerSpec{
			Name: name, Hostname: host, Image: spec.Image,
			Labels: labels, Network: spec.Network, RestartPolicy: "unless-stopped",
		}); err != nil {
			return nil, errors.Wrapf(err, "creating the load balancer of Service %s", spec.Service)
		}
	case err != nil:
		return nil, errors.Wrapf(err, "finding the load balancer of Service %s", spec.Service)
	case !c.Running:
		if err := m.runtime.StartContainer(ctx, name); err != nil {
			return nil, errors.Wrapf(err, "starting the load balancer of Service %s", spec.Service)
		}
	}
	if _, err := m.applyHAProxyConfig(ctx, name, serviceConfig(spec)); err != nil {
		return nil, errors.Wrapf(err, "configuring the load balancer of Service %s", spec.Service)
	}
	if c, err = m.runtime.InspectContainer(ctx, name); err != nil {
		return nil, err
	}
	return &ServiceLoadBalancer{Name: name, Service: spec.Service, c: c}, nil
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
		out = append(out, &ServiceLoadBalancer{Name: c.Name, Service: c.Labels[serviceLabel], c: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return out, nil
}

// DeleteServiceLoadBalancer removes a Service load balancer; one that is gone is not an error.
func (m *Manager) DeleteServiceLoadBalancer(ctx context.Context, lb *ServiceLoadBalancer) error {
	return errors.Wrapf(m.runtime.RemoveContainer(ctx, lb.Name), "removing the load balancer of Service %s", lb.Service)
}

// serviceConfig is haproxy's configuration for a Service: one TCP frontend per port, to that
// port's NodePort on every node, health-checked.
func serviceConfig(spec ServiceLoadBalancerSpec) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `# Rendered by Dockyard for Service %s; changes are overwritten.
global
  log stdout format raw local0 notice
  maxconn 4096
  hard-stop-after 1m

defaults
  mode tcp
  log global
  option dontlognull
  timeout connect 5s
  timeout client 10m
  timeout server 10m
`, spec.Service)
	nodes := append([]ServiceBackend(nil), spec.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, p := range spec.Ports {
		fmt.Fprintf(&b, "\nfrontend port-%[1]d\n  bind *:%[1]d\n  default_backend nodeport-%[1]d\n\nbackend nodeport-%[1]d\n  option tcp-check\n", p.Port)
		for _, n := range nodes {
			fmt.Fprintf(&b, "  server %s %s check inter 5s fall 2 rise 1\n", n.Name, net.JoinHostPort(n.Address, strconv.Itoa(p.NodePort)))
		}
	}
	return []byte(b.String())
}
