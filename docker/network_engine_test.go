package docker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// Two clusters on one network the user created (spec.network.existing.name): each load
// balancer serves its own cluster's backend and nothing of the other's, and deleting one
// cluster leaves the other's load balancer serving and the network in place.
// userNetwork creates a network of the user's (no Dockyard label) named prefix and a random
// suffix, removed when the test ends: after the clean-ups registered later.
func userNetwork(t *testing.T, rt container.Runtime, prefix string) string {
	t.Helper()
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := prefix + hex.EncodeToString(suffix)
	sweepEngine(t, rt)
	if err := rt.CreateNetwork(context.Background(), container.NetworkSpec{Name: name, Labels: map[string]string{engineTestLabel: ""}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.RemoveNetwork(context.Background(), name); err != nil && !container.IsNotFound(err) {
			t.Errorf("removing network %s: %v", name, err)
		}
	})
	return name
}

func TestTwoClustersOnASharedNetworkOnTheEngine(t *testing.T) {
	rt := dockerenv.Engine(t)
	dockerenv.RequireImages(t, rt, dockerenv.LoadBalancerImage())
	ctx := context.Background()
	// Made first, so it is removed after the clusters' own clean-ups.
	shared := userNetwork(t, rt, "dockyard-test-shared-")
	ma, _, a := engineCluster(t)
	mb, _, b := engineCluster(t)
	bin := buildBackend(t)

	spec := NetworkSpec{Name: shared, Existing: true}
	urls := map[ClusterKey]string{}
	backend := map[ClusterKey]string{}
	for _, c := range []struct {
		m   *Manager
		key ClusterKey
	}{{ma, a}, {mb, b}} {
		if _, err := c.m.EnsureNetwork(ctx, c.key, spec); err != nil {
			t.Fatalf("cluster %s on the shared network: %v", c.key, err)
		}
		name := c.key.Name + "-backend"
		addr := startBackendOn(t, rt, c.key, shared, name, bin)
		backend[c.key] = name
		lb, err := c.m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: c.key, Image: dockerenv.LoadBalancerImage(), Network: shared})
		if err != nil {
			t.Fatal(err)
		}
		if lb.Labels[addressLabel] != "" || nodeAddress(lb, shared) == "" {
			t.Fatalf("load balancer %s on the shared network: fixed address %q, address %q", lb.Name, lb.Labels[addressLabel], nodeAddress(lb, shared))
		}
		if _, err := c.m.lbs.update(ctx, &LoadBalancer{Cluster: c.key}, "", func(context.Context) ([]haproxy.Backend, error) {
			return []haproxy.Backend{{Name: name, Address: addr, Port: APIServerPort}}, nil
		}); err != nil {
			t.Fatal(err)
		}
		urls[c.key] = fmt.Sprintf("https://%s:%d/name", nodeAddress(lb, shared), APIServerPort)
	}
	if urls[a] == urls[b] {
		t.Fatalf("both load balancers answer on %s", urls[a])
	}

	insecure := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test backend's throwaway certificate
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: insecure, DisableKeepAlives: true}}
	serves := func(k ClusterKey) error {
		resp, err := client.Get(urls[k])
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if string(body) != backend[k] {
			return errors.Errorf("load balancer of %s answered from %q, want its own backend %s", k, body, backend[k])
		}
		return nil
	}
	for _, k := range []ClusterKey{a, b} {
		eventually(t, time.Minute, "load balancer of "+k.String()+" serving its own backend", func() error { return serves(k) })
	}

	if err := ma.DeleteCluster(ctx, a, shared); err != nil {
		t.Fatalf("deleting cluster %s: %v", a, err)
	}
	if cs, _ := rt.ListContainers(ctx, a.ClusterLabels()); len(cs) != 0 {
		t.Errorf("containers of the deleted cluster remain: %v", cs)
	}
	n, err := rt.InspectNetwork(ctx, shared)
	if err != nil {
		t.Fatalf("the shared network went with cluster %s: %v", a, err)
	}
	lbB, _ := mb.getLoadBalancer(ctx, b)
	if lbB == nil || !lbB.Running {
		t.Fatalf("the other cluster's load balancer after the delete: %v", lbB)
	}
	onNetwork := map[string]bool{}
	for _, c := range n.Containers {
		onNetwork[c] = true
	}
	if !onNetwork[lbB.Name] || !onNetwork[backend[b]] {
		t.Errorf("the shared network holds %v, want %s and %s still on it", n.Containers, lbB.Name, backend[b])
	}
	if err := serves(b); err != nil {
		t.Errorf("after deleting %s: %v", a, err)
	}
}

// A cluster with IPv6 gets a dual-stack network on the engine: its load balancer has fixed
// addresses of both families, and listens on both; a container of another dual-stack cluster
// reaches it over neither family (Docker before 27 isolates IPv6 networks only with
// ip6tables enabled, which hack/ensure-sh does: docs/security.md).
func TestDualStackClusterOnTheEngine(t *testing.T) {
	t.Parallel()
	if dockerenv.EngineName() == "containerd" {
		t.Skip("the containerd runtime has no IPv6 networks (the conformance suite checks it refuses them)")
	}
	m, rt, key := engineCluster(t)
	dockerenv.RequireImages(t, rt, dockerenv.LoadBalancerImage())
	ctx := context.Background()
	network := DefaultNetworkName(key)
	n, err := m.ensureClusterNetwork(ctx, key, NetworkSpec{Name: network, IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: dockerenv.LoadBalancerImage(), Network: network})
	if err != nil {
		t.Fatal(err)
	}
	ep := lb.Networks[network]
	if ep.IPv4 == "" || ep.IPv6 == "" || lb.Labels[addressLabel] != ep.IPv4 {
		t.Fatalf("load balancer on %v has %+v (labels %v), want fixed addresses of both families", n.Subnets, ep, lb.Labels)
	}
	if _, err := m.lbs.update(ctx, &LoadBalancer{Cluster: key}, "", func(context.Context) ([]haproxy.Backend, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	reaches := func(from, address string) (string, int) {
		probe := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", address, APIServerPort)
		return execOut(t, rt, from, "timeout", "3", "bash", "-c", probe)
	}
	for _, address := range []string{ep.IPv4, ep.IPv6} {
		eventually(t, 30*time.Second, "the load balancer answering on "+address, func() error {
			if out, code := reaches(lb.Name, address); code != 0 {
				return errors.Errorf("exit %d: %s", code, out)
			}
			return nil
		})
	}

	if dockerenv.EngineName() == "podman" {
		t.Skip("the load balancer serves both families; isolation is not checked: netavark 1.4 does not keep networks isolated (an upstream bug, docs/runtimes.md)")
	}
	_, _, other := engineCluster(t)
	if _, err := m.EnsureNetwork(ctx, other, NetworkSpec{Name: DefaultNetworkName(other), IPv6: true}); err != nil {
		t.Fatal(err)
	}
	stranger := other.Name + "-node"
	spec := container.ContainerSpec{Name: stranger, Image: dockerenv.LoadBalancerImage(), Labels: other.MachineLabels("node"),
		Network: DefaultNetworkName(other), Entrypoint: []string{"sleep"}, Cmd: []string{"600"}}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, stranger); err != nil {
		t.Fatal(err)
	}
	for _, address := range []string{ep.IPv4, ep.IPv6} {
		if out, code := reaches(stranger, address); code == 0 {
			t.Errorf("a container of another cluster reached the load balancer at %s (%s): the engine does not isolate the networks; on Docker before 27 run dockerd with --experimental --ip6tables (docs/security.md)", address, out)
		}
	}
}
