package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

// A reload whose confirmation never came (the manager stopped, haproxy was slow) is not taken
// for done because the configuration file already says the new thing: the next update reloads
// again until haproxy confirms.
func TestALostReloadIsRetried(t *testing.T) {
	ctx := context.Background()
	rt := inmemory.New("lb")
	inmemory.NewNodes(rt) // haproxy confirms each load in its log
	m := NewManager(rt, ManagerOptions{})
	key := ClusterKey{Namespace: "ns", Name: "c"}
	network := DefaultNetworkName(key)
	if _, err := m.EnsureNetwork(ctx, key, NetworkSpec{Name: network}); err != nil {
		t.Fatal(err)
	}
	lb, err := m.ensureLoadBalancer(ctx, LoadBalancerSpec{Cluster: key, Image: "lb", Network: network})
	if err != nil {
		t.Fatal(err)
	}
	backends := []haproxy.Backend{{Name: "cp-1", Address: "192.0.2.3", Port: 6443}}
	list := func(context.Context) ([]haproxy.Backend, error) { return backends, nil }
	if _, err := m.lbs.update(ctx, &LoadBalancer{Cluster: key}, "", list); err != nil {
		t.Fatal(err)
	}

	// The second control plane's reload is lost: haproxy does not confirm before the caller
	// gives up. The file already lists it.
	backends = append(backends, haproxy.Backend{Name: "cp-2", Address: "192.0.2.4", Port: 6443})
	confirm := rt.OnSignal
	rt.OnSignal = nil
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := m.lbs.update(short, &LoadBalancer{Cluster: key}, "", list); err == nil {
		t.Fatal("a reload haproxy never confirmed counted as done")
	}
	cfg, err := m.readFile(ctx, lb.Name, LoadBalancerConfigPath)
	if err != nil || !strings.Contains(string(cfg), "server cp-2 ") {
		t.Fatalf("the new configuration was not written before the reload: %v\n%s", err, cfg)
	}

	rt.OnSignal = confirm
	changed, err := m.lbs.update(ctx, &LoadBalancer{Cluster: key}, "", list)
	if err != nil || !changed {
		t.Errorf("the lost reload was not done again: changed %v, %v", changed, err)
	}
	changed, err = m.lbs.update(ctx, &LoadBalancer{Cluster: key}, "", list)
	if err != nil || changed {
		t.Errorf("a confirmed configuration was loaded again: changed %v, %v", changed, err)
	}
}
