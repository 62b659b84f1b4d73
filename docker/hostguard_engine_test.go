package docker

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
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
	// A node just booted may not answer at once on a loaded host: wait for both listeners, and
	// say what stands between the node and the host if they never answer.
	before := func() error {
		if !reaches(closed) || !reaches(open) {
			return errors.New("the node does not reach the host's listeners yet")
		}
		return nil
	}
	if _, err := waitFor(time.Minute, time.Second, before); err != nil {
		t.Fatalf("before the guard, nothing to test: %v\n%s", err, hostPathReport(t, rt, node.Name, gateway))
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

// hostPathReport says what a person needs when a node does not reach its gateway on the host:
// the node's addresses and routes, the host's route back and the host's INPUT rules (of both
// iptables back ends: the kernel runs both).
func hostPathReport(t *testing.T, rt container.Runtime, node, gateway string) string {
	t.Helper()
	var b strings.Builder
	out, _ := execOut(t, rt, node, "sh", "-c", "ip -o addr; ip route")
	fmt.Fprintf(&b, "%s addresses and routes:\n%s\n", node, out)
	for _, c := range [][]string{{"ip", "route", "get", gateway}, {"ip", "route"}, {"iptables-save", "-t", "filter"}, {"iptables-legacy-save", "-t", "filter"}} {
		o, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "host: %s (%v):\n%s\n", strings.Join(c, " "), err, o)
	}
	return b.String()
}
