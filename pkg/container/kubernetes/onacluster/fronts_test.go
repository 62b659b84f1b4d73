package onacluster_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// A front sends traffic to the containers it selects once their ready port accepts, and keeps
// its address while they come and go.
func TestFrontSendsToReadyContainers(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	front, backend, client := "dockyard-k8s-front", "dockyard-k8s-front-backend", "dockyard-k8s-front-client"
	selected := map[string]string{"dockyard.x-k8s.io/cluster": "team-a/front", "io.x-k8s.kind.role": "control-plane"}
	for k, v := range labels {
		selected[k] = v
	}
	t.Cleanup(func() { _ = rt.RemoveFront(context.Background(), front) })
	f, err := rt.EnsureFront(ctx, container.FrontSpec{Name: front, Labels: labels, Select: selected, Port: 443, TargetPort: 6443})
	if err != nil {
		t.Fatal(err)
	}
	if hosts, err := rt.FrontHosts(ctx); err != nil || len(hosts) == 0 {
		t.Errorf("the hosts fronts answer on: %v %v", hosts, err)
	}
	if f.Address == "" || f.Port != 443 || f.NodePort == 0 {
		t.Fatalf("front %+v", f)
	}
	again, err := rt.EnsureFront(ctx, container.FrontSpec{Name: front, Labels: labels, Select: selected, Port: 443, TargetPort: 6443})
	if err != nil || again.Address != f.Address {
		t.Errorf("ensuring the front again: %+v %v", again, err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		cmd    string
		ready  int
	}{
		// It listens on 6443 only after 5 s: until then it is running but not ready.
		{backend, selected, "sleep 5; while true; do echo hello | nc -l -p 6443; done", 6443},
		{client, labels, "exec sleep 600", 0},
	} {
		spec := container.ContainerSpec{Name: c.name, Image: testImage(), Labels: c.labels, Entrypoint: []string{"sh", "-c"}, Cmd: []string{c.cmd}, ReadyPort: c.ready}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, c.name); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := execOut(ctx, t, rt, client, "sh", "-c", "nc -w 2 "+f.Address+" 443 </dev/null || true")
		if strings.Contains(got, "hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the front %s:443 did not answer with the backend's hello in 90s: %q", f.Address, got)
		}
		time.Sleep(time.Second)
	}
	if err := rt.RemoveFront(ctx, front); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.InspectFront(ctx, front); !container.IsNotFound(err) {
		t.Errorf("a removed front: %v", err)
	}
}

// Zones are the zone labels of the nodes Pods can land on; a container asked into a zone runs
// there, one asked into a zone no node has stays created.
func TestZonesPlaceContainers(t *testing.T) {
	rt, labels := engineTest(t)
	ctx := context.Background()
	cs := clientset(t)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	node := nodes.Items[0].Name
	zone := nodes.Items[0].Labels["topology.kubernetes.io/zone"]
	if zone == "" {
		zone = "dockyard-test-zone"
		label := func(v any) {
			patch := []byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":` + map[bool]string{true: "null", false: `"` + zone + `"`}[v == nil] + `}}}`)
			if _, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		label(zone)
		t.Cleanup(func() { label(nil) })
	}
	zones, err := rt.Zones(ctx)
	if err != nil || !slices.Contains(zones, zone) {
		t.Fatalf("zones %v %v, want %s among them", zones, err, zone)
	}
	for name, z := range map[string]string{"dockyard-k8s-zoned": zone, "dockyard-k8s-nowhere": "no-such-zone"} {
		spec := container.ContainerSpec{Name: name, Image: testImage(), Labels: labels, Zone: z, SpreadFrom: labels, Entrypoint: []string{"sh", "-c"}, Cmd: []string{"exec sleep 600"}}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.StartContainer(ctx, "dockyard-k8s-zoned"); err != nil {
		t.Fatal(err)
	}
	waitState(ctx, t, rt, "dockyard-k8s-zoned", func(c *container.Container) bool { return c.Running }, "running in its zone")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = rt.StartContainer(startCtx, "dockyard-k8s-nowhere")
	if c, err := rt.InspectContainer(ctx, "dockyard-k8s-nowhere"); err != nil || c.Running || c.State != "created" {
		t.Errorf("a container asked into a zone no node has: %+v %v, want created", c, err)
	}
}
