package docker

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// On a real engine, a workload node reaches a service the engine's host listens on at its
// network's gateway until the host is guarded; then only the port the administrator opened
// answers it. A host with no workload network left loses the chain.
func TestAWorkloadNodeReachesOnlyTheHostPortsOpenedToIt(t *testing.T) {
	m, rt, key := engineCluster(t)
	ctx := context.Background()
	listen := func() int {
		t.Helper()
		l, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		}()
		return l.Addr().(*net.TCPAddr).Port
	}
	closed, open := listen(), listen()
	node := bootNode(t, m, key, "w-0", RoleWorker)
	n, err := rt.InspectNetwork(ctx, DefaultNetworkName(key))
	if err != nil {
		t.Fatal(err)
	}
	var gateway string
	for _, g := range n.Gateways {
		if !strings.Contains(g, ":") {
			gateway = g
		}
	}
	reaches := func(port int) bool {
		out, code := execOut(t, rt, node.Name, "timeout", "5", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", gateway, port))
		t.Logf("node %s → host %s:%d: exit %d %s", node.Name, gateway, port, code, out)
		return code == 0
	}
	if !reaches(closed) || !reaches(open) {
		t.Fatal("the node does not reach the host's listeners even before the guard: nothing to test")
	}
	guarded := NewManager(rt, ManagerOptions{GuardHost: true, HostPortsOpenToWorkloads: []int{open}})
	t.Cleanup(func() {
		// What the test set on the host goes with it: the guard with no bridge removes its chain.
		if _, err := guarded.onHost(context.Background(), hostGuardScript, "host-guard.sh", nil, "removing the test's rules"); err != nil {
			t.Errorf("removing chain %s from the host: %v", hostChain, err)
		}
	})
	start := time.Now()
	if _, err := guarded.EnsureNetwork(ctx, key, NetworkSpec{Name: DefaultNetworkName(key)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("host guarded in %s", time.Since(start).Round(time.Millisecond))
	if reaches(closed) {
		t.Errorf("the node reaches port %d of the host, which is not open to workloads", closed)
	}
	if !reaches(open) {
		t.Errorf("the node does not reach port %d of the host, which is open to workloads", open)
	}
	if left, err := rt.ListContainers(ctx, map[string]string{hostHelperLabel: ""}); err != nil || len(left) != 0 {
		t.Errorf("helper containers left: %v (%v)", left, err)
	}
}
