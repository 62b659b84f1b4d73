package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/test/dockerenv"
)

// A management node joined to clusters' networks keeps sending what has no route of its own (a
// Service's cluster IP here) through its own network, from its own address, while on them and
// after leaving them, and can still join more. Docker gives the default route to the network
// first by name: the node's own network is named to sort after the clusters' (as kind's "kind"
// sorts after "dockyard-…"), and the second cluster's network before the first's, so Docker
// moves its default route at each join and leave.
func TestManagementNodeKeepsItsOwnRoutesOnTheEngine(t *testing.T) {
	rt := dockerenv.Engine(t)
	dockerenv.RequireImages(t, rt, dockerenv.NodeImage())
	ctx := context.Background()
	// Made first, so it is removed after the node and the clusters.
	home := userNetwork(t, rt, "zz-dockyard-test-home-")
	id := strings.TrimPrefix(home, "zz-dockyard-test-home-")
	node := "dockyard-test-mgmt-" + id
	_, _, key := engineCluster(t)
	labels := map[string]string{kindClusterLabel: "mgmt-" + id, kindRoleLabel: string(RoleControlPlane), engineTestLabel: ""}
	if err := rt.CreateContainer(ctx, container.ContainerSpec{
		Name: node, Image: dockerenv.NodeImage(), Labels: labels, Network: home,
		Entrypoint: []string{"sleep"}, Cmd: []string{"infinity"}, Security: container.SecuritySpec{CapAdd: []string{"NET_ADMIN"}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.RemoveContainer(context.Background(), node); err != nil {
			t.Errorf("removing %s: %v", node, err)
		}
	})
	if err := rt.StartContainer(ctx, node); err != nil {
		t.Fatal(err)
	}
	m := NewManager(rt, ManagerOptions{ManagementNodes: map[string]string{kindClusterLabel: "mgmt-" + id}})

	c, err := rt.InspectContainer(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	own := c.Networks[home].IPv4
	route := func(when string) {
		t.Helper()
		var out bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		code, err := rt.Exec(cctx, node, container.ExecOptions{Cmd: []string{"ip", "-4", "route", "get", "10.96.0.1"}, Stdout: &out, Stderr: &out})
		if err != nil || code != 0 {
			t.Fatalf("%s: ip route get: code %d, %v: %s", when, code, err, out.String())
		}
		if got := out.String(); !strings.Contains(got, " dev eth0 ") || !strings.Contains(got, " src "+own+" ") {
			t.Errorf("%s: a cluster IP goes %q, want through eth0 from %s (the node's own network)", when, strings.TrimSpace(got), own)
		}
	}

	_, _, key2 := engineCluster(t)
	if DefaultNetworkName(key2) > DefaultNetworkName(key) {
		key, key2 = key2, key
	}
	for _, k := range []ClusterKey{key, key2} {
		network := DefaultNetworkName(k)
		if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: network}); err != nil {
			t.Fatal(err)
		}
		if c, err = rt.InspectContainer(ctx, node); err != nil {
			t.Fatal(err)
		}
		ep, on := c.Networks[network]
		if !on {
			t.Fatalf("management node not connected to %s: %v", network, c.Networks)
		}
		var out bytes.Buffer
		if code, err := rt.Exec(ctx, node, container.ExecOptions{Cmd: []string{"ip", "-4", "-o", "addr"}, Stdout: &out}); err != nil || code != 0 {
			t.Fatalf("ip addr: code %d, %v", code, err)
		}
		if !strings.Contains(out.String(), " "+ep.IPv4+"/") {
			t.Fatalf("the engine reports %s on %s, the node has no such address:\n%s", ep.IPv4, network, out.String())
		}
		route("on " + network)
	}
	for _, k := range []ClusterKey{key2, key} {
		if err := m.DeleteCluster(ctx, k, DefaultNetworkName(k)); err != nil {
			t.Fatal(err)
		}
		route("after " + DefaultNetworkName(k) + " went")
	}
}

// A management node joined to workload networks is no router: a workload node that routes the
// management side's subnets, a Service's cluster IP and another workload network through the
// management node's address on its network reaches nothing, not even the node itself (its
// filter table accepting everything first, as kube-proxy's rules may), while the management
// node and its pods still open connections into the workload network. A restarted node loses
// its rules, and gets them back (with its own routes, whichever interface its own network now
// has) at the next check of a network it is on; leaving a network takes that network's rules
// away.
func TestManagementNodeIsNoRouterOnTheEngine(t *testing.T) {
	t.Parallel()
	rt := dockerenv.Engine(t)
	dockerenv.RequireImages(t, rt, dockerenv.NodeImage())
	ctx := context.Background()
	// The clusters first, so their clean-ups (which remove their networks) run last.
	_, _, a := engineCluster(t)
	_, _, b := engineCluster(t)
	netA, netB := DefaultNetworkName(a), DefaultNetworkName(b)
	home := userNetwork(t, rt, "zz-dockyard-test-home-")
	id := strings.TrimPrefix(home, "zz-dockyard-test-home-")
	kind := map[string]string{kindClusterLabel: "mgmt-" + id}
	m := NewManager(rt, ManagerOptions{ManagementNodes: kind})

	const serve = `socat TCP-LISTEN:8080,fork,reuseaddr SYSTEM:'echo ok' &`
	run := func(name string, labels map[string]string, network string, unconfined bool, script string, ports ...container.PortMapping) {
		t.Helper()
		labels = maps.Clone(labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[engineTestLabel] = ""
		if err := rt.CreateContainer(ctx, container.ContainerSpec{
			Name: name, Image: dockerenv.NodeImage(), Labels: labels, Network: network, Ports: ports,
			Entrypoint: []string{"sh", "-c", script + "\nexec sleep infinity"},
			Security:   container.SecuritySpec{CapAdd: []string{"NET_ADMIN"}, Unconfined: unconfined},
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := rt.RemoveContainer(context.Background(), name); err != nil {
				t.Errorf("removing %s: %v", name, err)
			}
		})
		if err := rt.StartContainer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	address := func(name, network string) string {
		t.Helper()
		c, err := rt.InspectContainer(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if a := c.Networks[network].IPv4; a != "" {
			return a
		}
		t.Fatalf("%s has no address on %s: %v", name, network, c.Networks)
		return ""
	}
	subnet := func(network string) string {
		t.Helper()
		n, err := rt.InspectNetwork(ctx, network)
		if err != nil {
			t.Fatal(err)
		}
		return n.Subnets[0]
	}
	sh := func(name, script string) (string, int) {
		t.Helper()
		var out bytes.Buffer
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		code, err := rt.Exec(cctx, name, container.ExecOptions{Cmd: []string{"sh", "-c", script}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("%s: %s: %v", name, script, err)
		}
		return out.String(), code
	}
	must := func(name, script string) string {
		t.Helper()
		out, code := sh(name, script)
		if code != 0 {
			t.Fatalf("%s: %s: exit code %d: %s", name, script, code, out)
		}
		return out
	}
	// answers reports whether a TCP connection from a container gets the listener's "ok".
	answers := func(from, address string, port int) bool {
		t.Helper()
		out, _ := sh(from, fmt.Sprintf("socat -T 3 -u TCP:%s:%d,connect-timeout=2 STDOUT", address, port))
		return strings.Contains(out, "ok")
	}

	// The management side: a pod-like container on the node's own network, whose route to the
	// workload networks goes through the node (as pods' routes go through their node), and the
	// node, which forwards, serves a port, sends cluster IP 10.96.0.1:443 to that port (as
	// kube-proxy does for the API server's Service), masquerades its pods' traffic leaving the
	// own network (as CNIs do), and accepts everything first in its filter table and in mangle
	// PREROUTING.
	pod := "dockyard-test-pod-" + id
	run(pod, nil, home, false, serve)
	podAddress := address(pod, home)
	node := "dockyard-test-mgmt-" + id
	run(node, map[string]string{kindClusterLabel: "mgmt-" + id, kindRoleLabel: string(RoleControlPlane)}, home, true, serve+`
sysctl -qw net.ipv4.ip_forward=1
iptables -t nat -A PREROUTING -d 10.96.0.1 -p tcp --dport 443 -j REDIRECT --to-ports 8080
iptables -t nat -A POSTROUTING -s `+subnet(home)+` ! -d `+subnet(home)+` -j MASQUERADE
iptables -I INPUT -j ACCEPT
iptables -I FORWARD -j ACCEPT
iptables -t mangle -I PREROUTING -j ACCEPT`,
		// Published on the host, as a management node's API server is.
		container.PortMapping{ContainerPort: 8080, Protocol: "tcp", HostIP: "127.0.0.1"})
	// set up waits for the node's start script, whose rules must not land ahead of Dockyard's.
	setUp := func() {
		t.Helper()
		dockerenv.WaitFor(t, 30*time.Second, "the management node's start script", func() error {
			if out, code := sh(node, "iptables -t mangle -C PREROUTING -j ACCEPT"); code != 0 {
				return errors.New(out)
			}
			return nil
		})
	}
	setUp()

	for _, k := range []ClusterKey{a, b} {
		if _, err := m.EnsureNetwork(ctx, k, NetworkSpec{Name: DefaultNetworkName(k)}); err != nil {
			t.Fatal(err)
		}
	}
	// A workload node of cluster a (root: it may route as it likes) and one of cluster b, both
	// answering too; b's routes a's subnet back through the management node.
	w := "dockyard-test-wa-" + id
	run(w, a.MachineLabels("wa-"+id), netA, false, serve)
	wb := "dockyard-test-wb-" + id
	run(wb, b.MachineLabels("wb-"+id), netB, false, serve)
	wAddress, wbAddress := address(w, netA), address(wb, netB)

	// routeThrough points the workload side's routes at the management node's current
	// addresses (a restarted container may get others).
	var nodeHome, nodeA string
	routeThrough := func() {
		t.Helper()
		nodeHome, nodeA = address(node, home), address(node, netA)
		for _, dst := range []string{subnet(home), subnet(netB), "10.96.0.0/12"} {
			must(w, "ip route replace "+dst+" via "+nodeA)
		}
		must(wb, "ip route replace "+subnet(netA)+" via "+address(node, netB))
		must(pod, "ip route replace "+subnet(netA)+" via "+nodeHome)
	}
	// reached lists what the workload node of cluster a reaches through the management node.
	reached := func() []string {
		t.Helper()
		var got []string
		for _, p := range []struct {
			what, address string
			port          int
		}{
			{"a pod on the management node's own network", podAddress, 8080},
			{"a Service's cluster IP", "10.96.0.1", 443},
			{"a node on another workload network", wbAddress, 8080},
			{"the management node on its workload-network address", nodeA, 8080},
			{"the management node on its own-network address", nodeHome, 8080},
		} {
			if answers(w, p.address, p.port) {
				got = append(got, p.what)
			}
		}
		return got
	}
	// outbound checks that the management node and its pod reach the workload node.
	outbound := func(when string) {
		t.Helper()
		if !answers(node, wAddress, 8080) {
			t.Errorf("%s: the management node no longer reaches a workload node", when)
		}
		if !answers(pod, wAddress, 8080) {
			t.Errorf("%s: a pod of the management node no longer reaches a workload node", when)
		}
		if t.Failed() {
			out, _ := sh(node, "ip -o addr; ip rule; ip route show table all | grep -v local; iptables-save; conntrack -L")
			t.Logf("management node:\n%s", out)
			out, _ = sh(pod, "ip -o addr; ip route; ip neigh")
			t.Logf("pod:\n%s", out)
		}
	}

	routeThrough()
	if got := reached(); len(got) > 0 {
		t.Errorf("a workload node reaches through the management node: %v", got)
	}
	outbound("isolated")
	// The engine publishes the node's port through the network that sorts first, a workload
	// network here: the host still reaches it (as it reaches a management cluster's API server).
	hostReaches := func(when string) {
		t.Helper()
		c, err := rt.InspectContainer(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		var hostPort int
		for _, p := range c.Ports {
			if p.ContainerPort == 8080 {
				hostPort = p.HostPort
			}
		}
		dockerenv.WaitFor(t, 10*time.Second, when+": the host reaching the management node's published port", func() error {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", hostPort), 2*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			got, _ := io.ReadAll(conn)
			if !strings.Contains(string(got), "ok") {
				return errors.Errorf("127.0.0.1:%d answered %q", hostPort, got)
			}
			return nil
		})
	}
	hostReaches("isolated")
	t.Logf("raw table:\n%s", must(node, "iptables -t raw -S "+isolationChain))

	// A restart loses the rules (and the own routes); the engine may then name the node's own
	// network's interface anything: restart until it is not eth0, so the own routes cannot
	// follow eth0.
	for i := 0; ; i++ {
		if err := rt.SignalContainer(ctx, node, "SIGKILL"); err != nil {
			t.Fatal(err)
		}
		dockerenv.WaitFor(t, 30*time.Second, "the management node to stop", func() error {
			c, err := rt.InspectContainer(ctx, node)
			if err == nil && c.Running {
				err = errors.New("still running")
			}
			return err
		})
		if err := rt.StartContainer(ctx, node); err != nil {
			t.Fatal(err)
		}
		setUp()
		if eth0 := must(node, "ip -4 -o addr show dev eth0"); !strings.Contains(eth0, " "+address(node, home)+"/") || i == 5 {
			t.Logf("restarted %d times; eth0 is %s", i+1, strings.TrimSpace(eth0))
			break
		}
	}
	routeThrough()
	if got := reached(); len(got) != 5 {
		t.Errorf("a restarted management node without its rules: the workload node reaches only %v, want all 5 (are the probes working?)", got)
	}
	// The periodic check of a cluster network settles the restarted node.
	if _, err := m.EnsureNetwork(ctx, a, NetworkSpec{Name: netA}); err != nil {
		t.Fatal(err)
	}
	if got := reached(); len(got) > 0 {
		t.Errorf("after a restart and a check: a workload node reaches through the management node: %v", got)
	}
	outbound("isolated again")
	hostReaches("isolated again")
	if got := must(node, "ip -4 route get 10.96.0.2"); !strings.Contains(got, " src "+nodeHome+" ") {
		t.Errorf("after a restart: a cluster IP goes %q, want from %s (the node's own network)", strings.TrimSpace(got), nodeHome)
	}

	// Leaving b's network takes its interface's rules away, in both families; a's stay.
	iface := func(addr string) string {
		t.Helper()
		return strings.TrimSpace(must(node, "ip -4 -o addr | awk '$4 ~ \"^"+addr+"/\" { print $2 }'"))
	}
	ifA, ifB := iface(nodeA), iface(address(node, netB))
	if err := m.DeleteCluster(ctx, b, netB); err != nil {
		t.Fatal(err)
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"raw", "mangle"} {
			rules := must(node, ipt+" -t "+table+" -S "+isolationChain)
			if !strings.Contains(rules, "-i "+ifA+" ") || strings.Contains(rules, "-i "+ifB+" ") {
				t.Errorf("%s -t %s after leaving %s (%s), still on %s (%s):\n%s", ipt, table, netB, ifB, netA, ifA, rules)
			}
			if chain := must(node, ipt+" -t "+table+" -S PREROUTING"); !strings.HasPrefix(chain, "-P PREROUTING ACCEPT\n-A PREROUTING -j "+isolationChain+"\n") {
				t.Errorf("%s -t %s: PREROUTING does not jump to %s first:\n%s", ipt, table, isolationChain, chain)
			}
		}
	}
	if got := reached(); len(got) > 0 {
		t.Errorf("after leaving another network: a workload node reaches through the management node: %v", got)
	}

	// An administrator opens one port of the management nodes to workload nodes
	// (--management-ports-open-to-workloads): workload nodes connect to it on the node's
	// address in their network, and still to nothing else.
	opened := NewManager(rt, ManagerOptions{ManagementNodes: kind, ManagementPortsOpenToWorkloads: []int{8080}})
	if _, err := opened.EnsureNetwork(ctx, a, NetworkSpec{Name: netA}); err != nil {
		t.Fatal(err)
	}
	if got, want := reached(), []string{"the management node on its workload-network address"}; !slices.Equal(got, want) {
		t.Errorf("with port 8080 open to workloads: a workload node reaches %v, want only %v\n%s", got, want, must(node, "iptables -t mangle -S "+isolationChain))
	}
	outbound("with a port open")
}
