package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

func serviceLBManager(t *testing.T) (context.Context, *inmemory.Runtime, *Manager, ServiceLoadBalancerSpec) {
	t.Helper()
	ctx := context.Background()
	rt := inmemory.New("lb")
	inmemory.NewNodes(rt) // haproxy confirms each load in its log
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c"}
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	return ctx, rt, m, ServiceLoadBalancerSpec{
		Cluster: key, Service: "default/web", UID: "uid-1", Image: "lb", Network: network,
		Ports: []haproxy.ServicePort{{Port: 80, NodePort: 30080}},
		Nodes: []haproxy.ServiceBackend{{Name: "c-md-0-a", Address: "172.30.0.4"}},
	}
}

func containerID(t *testing.T, rt *inmemory.Runtime, name string) (id string, labels map[string]string) {
	t.Helper()
	if !rt.WithContainer(name, func(c *inmemory.Container) { id, labels = c.State.ID, c.State.Labels }) {
		t.Fatalf("container %s does not exist", name)
	}
	return id, labels
}

// A Service's load balancer carries the Service's name and UID, and is reused only by the
// Service both name: a Service re-created under the same name (a new UID), or another Service
// whose name has the same hash, gets a new container, never the other's.
func TestServiceLoadBalancerIsReusedOnlyByItsService(t *testing.T) {
	ctx, rt, m, spec := serviceLBManager(t)
	lb, err := m.EnsureServiceLoadBalancer(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Name != ServiceLoadBalancerName(spec.Cluster, spec.Service) || lb.Service != spec.Service || lb.UID != spec.UID {
		t.Errorf("load balancer %+v, want %s for %s (%s)", lb, ServiceLoadBalancerName(spec.Cluster, spec.Service), spec.Service, spec.UID)
	}
	first, labels := containerID(t, rt, lb.Name)
	if labels[serviceLabel] != spec.Service || labels[serviceUIDLabel] != spec.UID {
		t.Errorf("labels %v, want the Service's name and UID", labels)
	}

	if _, err := m.EnsureServiceLoadBalancer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if again, _ := containerID(t, rt, lb.Name); again != first {
		t.Errorf("the Service's own container %s was replaced by %s", first, again)
	}

	for _, tc := range []struct {
		name         string
		service, uid string
	}{
		{"re-created Service", spec.Service, "uid-2"},
		{"another Service with the same container name", "default/other", "uid-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := containerID(t, rt, lb.Name)
			// Make the container under the name look like what the case says.
			rt.WithContainer(lb.Name, func(c *inmemory.Container) {
				c.State.Labels[serviceLabel], c.State.Labels[serviceUIDLabel] = tc.service, tc.uid
			})
			got, err := m.EnsureServiceLoadBalancer(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			after, labels := containerID(t, rt, got.Name)
			if after == before {
				t.Errorf("container %s, labelled for %s (%s), was reused for %s (%s)", before, tc.service, tc.uid, spec.Service, spec.UID)
			}
			if labels[serviceLabel] != spec.Service || labels[serviceUIDLabel] != spec.UID {
				t.Errorf("labels %v, want %s and %s", labels, spec.Service, spec.UID)
			}
		})
	}
}

// A container that has the load balancer's name but is not the cluster's is someone else's:
// it is neither configured nor removed.
func TestServiceLoadBalancerLeavesAForeignContainerAlone(t *testing.T) {
	ctx, rt, m, spec := serviceLBManager(t)
	name := ServiceLoadBalancerName(spec.Cluster, spec.Service)
	if err := rt.CreateContainer(ctx, container.ContainerSpec{Name: name, Image: "lb", Labels: map[string]string{"app": "mine"}}); err != nil {
		t.Fatal(err)
	}
	before, _ := containerID(t, rt, name)
	_, err := m.EnsureServiceLoadBalancer(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "is not cluster") {
		t.Fatalf("error %v, want one saying the container is not the cluster's", err)
	}
	after, _ := containerID(t, rt, name)
	rt.WithContainer(name, func(c *inmemory.Container) {
		if _, ok := c.Files[LoadBalancerConfigPath]; ok || after != before {
			t.Errorf("the foreign container was configured or replaced")
		}
	})
}

// A spec with a name that could not be put in haproxy's configuration makes nothing.
func TestServiceLoadBalancerRefusesAnInvalidSpecBeforeMakingAContainer(t *testing.T) {
	ctx, rt, m, spec := serviceLBManager(t)
	spec.Nodes = append(spec.Nodes, haproxy.ServiceBackend{Name: "evil\n  server x 192.0.2.9", Address: "172.30.0.5"})
	if _, err := m.EnsureServiceLoadBalancer(ctx, spec); err == nil || !strings.Contains(err.Error(), "node name") {
		t.Errorf("error %v, want one naming the node name", err)
	}
	spec.Nodes, spec.UID = spec.Nodes[:1], ""
	if _, err := m.EnsureServiceLoadBalancer(ctx, spec); err == nil || !strings.Contains(err.Error(), "UID") {
		t.Errorf("error %v, want one asking for the UID", err)
	}
	if names := rt.ContainerNames(); len(names) != 0 {
		t.Errorf("containers made: %v", names)
	}
}
