package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

// dockyard export logs writes a directory per container (nodes, the control plane's load
// balancer, each Service's), refuses a DIR that is not empty unless --overwrite, and creates
// nothing for a cluster that has no container.
func TestExportLogs(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("node:v1", "lb:v1")
	// haproxy confirms each load in its log (the fake's shell answers every other command).
	rt.OnStart = func(c *inmemory.Container) { c.Logs = append(c.Logs, "Loading success") }
	rt.OnSignal = func(c *inmemory.Container, _ string) { c.Logs = append(c.Logs, "Loading success") }
	m := docker.NewManager(rt, docker.ManagerOptions{})
	ref := clusterRef{Namespace: "ns", Name: "dev"}
	if _, err := m.EnsureNetwork(ctx, ref.key(), docker.NetworkSpec{Name: "dev"}); err != nil {
		t.Fatal(err)
	}
	node, err := m.AddNode(ctx, docker.NodeSpec{Cluster: ref.key(), Machine: "cp", Image: "node:v1", Role: docker.RoleControlPlane, Network: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := m.EnsureLoadBalancer(ctx, docker.LoadBalancerSpec{Cluster: ref.key(), Image: "lb:v1", Network: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	service, err := m.EnsureServiceLoadBalancer(ctx, docker.ServiceLoadBalancerSpec{Cluster: ref.key(), Service: "default/web", UID: "uid-web", Image: "lb:v1", Network: "dev",
		Ports: []haproxy.ServicePort{{Port: 80, NodePort: 30080}}})
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "logs")
	n, err := exportLogs(ctx, m, "fake", ref, dir, false)
	if err != nil || n != 3 {
		t.Fatalf("exportLogs = %d, %v; want 3 containers", n, err)
	}
	for _, c := range []string{node.Name, lb.Name, service.Name} {
		fi, err := os.Stat(filepath.Join(dir, c, "inspect.json"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s/inspect.json: %v %v", c, fi, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, service.Name, "haproxy.cfg")); err != nil {
		t.Errorf("the Service load balancer's configuration: %v", err)
	}

	_, err = exportLogs(ctx, m, "fake", ref, dir, false)
	if err == nil || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("a second export into the same DIR: %v, want a refusal naming --overwrite", err)
	}
	if n, err := exportLogs(ctx, m, "fake", ref, dir, true); err != nil || n != 3 {
		t.Errorf("with --overwrite: %d, %v", n, err)
	}

	missing := filepath.Join(t.TempDir(), "none")
	if _, err := exportLogs(ctx, m, "fake", clusterRef{Namespace: "ns", Name: "gone"}, missing, false); err == nil || !strings.Contains(err.Error(), "has no container on the fake engine") {
		t.Errorf("a cluster without containers: %v", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("DIR was created for a cluster without containers: %v", err)
	}
}
