// Package conformance holds behaviour every container.Runtime must share, written once and run
// against each implementation: the real engines in their engine tests and the fake in its unit
// tests, so a fake never promises what an engine does not do. Only tests import it.
package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Subject is a runtime under test and how to run a long-lived container on it.
type Subject struct {
	Runtime container.Runtime
	// Image the engine has locally; Entrypoint and Cmd keep a container of it running.
	Image      string
	Entrypoint []string
	Cmd        []string
	// Labels go on everything the suite creates, so the caller can sweep it away.
	Labels map[string]string
	// Prefix starts every name the suite uses.
	Prefix string
	// NoIPv6 says the runtime has no dual-stack networks (Dockyard's containerd runtime): the
	// DualStack behaviour then checks that it refuses them, and anything with an IPv6 address.
	NoIPv6 bool
	// NotApplicable names the behaviours of Run that the engine cannot have by design, each with
	// the reason (an engine whose containers are Pods publishes no host ports); Run says so for
	// each instead of running it, and fails on a name it does not have.
	NotApplicable map[string]string
	// NoHostCgroups says the engine cannot see the cgroups of the hosts its containers run on
	// (Kubernetes publishes none): Info then wants the cgroup version empty.
	NoHostCgroups bool
	// PullsWhereRun says images are pulled on the host a container starts on, after it was
	// created (Kubernetes): creating a container of an image no host has is then not refused.
	PullsWhereRun bool
	// Balances says the engine balances traffic itself (Runtime.Balancer is not nil); Zoned
	// says its hosts may have zones. Engines of one host do neither.
	Balances, Zoned bool
	// CutsUnreadStdinOutput says the engine may cut a command's output short when the command
	// exits with its stdin unread (Podman's service resets the stream and writes its own
	// error): Exec still owes the exit code, but not the command's whole stderr.
	CutsUnreadStdinOutput bool
}

// Capabilities checks what an engine adds beyond one host: Balancer answers the same each time,
// nil unless the subject balances; Zones are sorted, without duplicates, none on an engine of
// one host. A front (when the engine balances) is made once under its name, found, and removed;
// removing it again is not an error, and a removed or unknown front is ErrNotFound.
func Capabilities(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	b := s.Runtime.Balancer()
	if (b != nil) != s.Balances || (s.Runtime.Balancer() != nil) != (b != nil) {
		t.Errorf("Balancer() is %v (twice: %v), want a balancer: %v", b, s.Runtime.Balancer(), s.Balances)
	}
	zones, err := s.Runtime.Zones(ctx)
	if err != nil {
		t.Errorf("Zones: %v", err)
	}
	if !slices.IsSorted(zones) || len(slices.Compact(slices.Clone(zones))) != len(zones) {
		t.Errorf("zones %v are not sorted and unique", zones)
	}
	if !s.Zoned && len(zones) > 0 {
		t.Errorf("an engine of one host has zones %v", zones)
	}
	if b == nil {
		return
	}
	name := s.Prefix + "-front"
	spec := container.FrontSpec{Name: name, Labels: s.Labels, Select: map[string]string{"conformance-front": name}, Port: 6443}
	f, err := b.EnsureFront(ctx, spec)
	if err != nil {
		t.Fatalf("EnsureFront: %v", err)
	}
	again, err := b.EnsureFront(ctx, spec)
	if err != nil || again.Name != f.Name || again.Port != f.Port {
		t.Errorf("EnsureFront again: %+v, %v; want the front made first (%+v)", again, err, f)
	}
	if got, err := b.InspectFront(ctx, name); err != nil || got.Name != name || got.Port != 6443 {
		t.Errorf("InspectFront: %+v, %v", got, err)
	}
	if _, err := b.FrontHosts(ctx); err != nil {
		t.Errorf("FrontHosts: %v", err)
	}
	for i := range 2 {
		if err := b.RemoveFront(ctx, name); err != nil {
			t.Errorf("RemoveFront (%d): %v", i+1, err)
		}
	}
	if _, err := b.InspectFront(ctx, name); !container.IsNotFound(err) {
		t.Errorf("InspectFront of a removed front: %v, want ErrNotFound", err)
	}
}

// NetworkAttachments checks ConnectNetwork and DisconnectNetwork: a container joins a second
// network with an address there, joining twice or leaving twice is not an error, and an
// unknown container or network is ErrNotFound when connecting but not when disconnecting.
func NetworkAttachments(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	first, second, name := s.Prefix+"-net-a", s.Prefix+"-net-b", s.Prefix+"-attach"
	for _, n := range []string{first, second} {
		if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: n, Labels: s.Labels}); err != nil {
			t.Fatal(err)
		}
	}
	spec := container.ContainerSpec{
		Name: name, Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd, Labels: s.Labels, Network: first,
	}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name); err != nil {
		t.Fatal(err)
	}

	for range 2 { // connecting twice is not an error
		if err := rt.ConnectNetwork(ctx, second, name); err != nil {
			t.Fatalf("connecting %s to %s: %v", name, second, err)
		}
	}
	requireAttached(ctx, t, rt, second, name, true)
	requireAttached(ctx, t, rt, first, name, true)

	if err := rt.ConnectNetwork(ctx, second, s.Prefix+"-missing"); !container.IsNotFound(err) {
		t.Errorf("connecting a missing container: want ErrNotFound, got %v", err)
	}
	if err := rt.ConnectNetwork(ctx, s.Prefix+"-missing-net", name); !container.IsNotFound(err) {
		t.Errorf("connecting to a missing network: want ErrNotFound, got %v", err)
	}

	for range 2 { // leaving twice is not an error
		if err := rt.DisconnectNetwork(ctx, second, name); err != nil {
			t.Fatalf("disconnecting %s from %s: %v", name, second, err)
		}
	}
	requireAttached(ctx, t, rt, second, name, false)
	requireAttached(ctx, t, rt, first, name, true)
	if err := rt.DisconnectNetwork(ctx, second, s.Prefix+"-missing"); err != nil {
		t.Errorf("disconnecting a missing container: %v", err)
	}
	if err := rt.RemoveNetwork(ctx, second); err != nil {
		t.Errorf("removing the network the container left: %v", err)
	}
}

func requireAttached(ctx context.Context, t *testing.T, rt container.Runtime, network, name string, want bool) {
	t.Helper()
	c, err := rt.InspectContainer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	ep, ok := c.Networks[network]
	if ok != want {
		t.Fatalf("container %s on network %s: %v, want %v (networks %v)", name, network, ok, want, c.Networks)
	}
	if want && ep.IPv4 == "" && ep.IPv6 == "" {
		t.Errorf("container %s has no address on %s: %+v", name, network, ep)
	}
	n, err := rt.InspectNetwork(ctx, network)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Contains(n.Containers, name); got != want {
		t.Errorf("network %s lists %v; %s attached: %v, want %v", network, n.Containers, name, got, want)
	}
}

// FixedAddresses checks networks with a configured subnet and containers with fixed addresses:
// the subnet the engine picks for a network that names none can be configured on a new one; a
// container keeps its fixed address when it is killed and started again, and gets it back when
// it is recreated; a second container asking for an address in use does not start; containers
// without a fixed address get one from the network's range; InspectContainer reports the
// hostname.
func FixedAddresses(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	name := s.Prefix + "-fixed"
	subnet := chosenSubnet(ctx, t, s)
	upper := netip.PrefixFrom(nthAddr(subnet, 1<<(31-subnet.Bits())), subnet.Bits()+1)
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{
		Name: name, Labels: s.Labels, Subnet: subnet.String(), Gateway: nthAddr(subnet, 1).String(), IPRange: upper.String(),
	}); err != nil {
		t.Fatalf("creating a network with subnet %s and range %s: %v", subnet, upper, err)
	}
	fixed := nthAddr(subnet, 10).String()
	fixedAndRangedAddresses(ctx, t, s, name, fixed, upper)
	restartKeepsAddress(ctx, t, rt, name, fixed)
	addressGivenBack(ctx, t, s, name, fixed)
}

// chosenSubnet returns the IPv4 subnet the engine picks for a network that names none, of /24
// or larger, from a network it creates and removes.
func chosenSubnet(ctx context.Context, t *testing.T, s Subject) netip.Prefix {
	t.Helper()
	rt := s.Runtime
	probe := s.Prefix + "-probe"
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: probe, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
	n, err := rt.InspectNetwork(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.RemoveNetwork(ctx, probe); err != nil {
		t.Fatal(err)
	}
	var subnet netip.Prefix
	for _, sn := range n.Subnets {
		if p, err := netip.ParsePrefix(sn); err == nil && p.Addr().Is4() {
			subnet = p.Masked()
		}
	}
	if !subnet.IsValid() || subnet.Bits() > 24 {
		t.Fatalf("the engine chose subnets %v: want an IPv4 one of /24 or larger", n.Subnets)
	}
	return subnet
}

// runOn creates a container on a network, at ip when it is not empty, with a hostname of its
// name, and starts it.
func runOn(ctx context.Context, t *testing.T, s Subject, network, cname, ip string) error {
	spec := container.ContainerSpec{Name: cname, Hostname: cname + "-host", Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd,
		Labels: s.Labels, Network: network, IPv4Address: ip}
	if err := s.Runtime.CreateContainer(ctx, spec); err != nil {
		t.Fatalf("creating %s: %v", cname, err)
	}
	return s.Runtime.StartContainer(ctx, cname)
}

// addressOn returns a container's IPv4 address on a network, and checks the hostname runOn
// gave it.
func addressOn(ctx context.Context, t *testing.T, rt container.Runtime, network, cname string) string {
	c, err := rt.InspectContainer(ctx, cname)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hostname != cname+"-host" {
		t.Errorf("container %s has hostname %q, want %q", cname, c.Hostname, cname+"-host")
	}
	return c.Networks[network].IPv4
}

// fixedAndRangedAddresses checks that a container gets its fixed address, and one without a
// fixed address one from the network's range.
func fixedAndRangedAddresses(ctx context.Context, t *testing.T, s Subject, name, fixed string, upper netip.Prefix) {
	t.Helper()
	if err := runOn(ctx, t, s, name, name+"-a", fixed); err != nil {
		t.Fatalf("starting a container with the fixed address %s: %v", fixed, err)
	}
	if got := addressOn(ctx, t, s.Runtime, name, name+"-a"); got != fixed {
		t.Errorf("container has %s, want its fixed address %s", got, fixed)
	}
	if err := runOn(ctx, t, s, name, name+"-b", ""); err != nil {
		t.Fatal(err)
	}
	if got, err := netip.ParseAddr(addressOn(ctx, t, s.Runtime, name, name+"-b")); err != nil || !upper.Contains(got) {
		t.Errorf("a container without a fixed address got %v (%v), want one in %s", got, err, upper)
	}
}

// restartKeepsAddress checks that the container with the fixed address keeps it when it is
// killed and started again.
func restartKeepsAddress(ctx context.Context, t *testing.T, rt container.Runtime, name, fixed string) {
	t.Helper()
	if err := rt.SignalContainer(ctx, name+"-a", "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	waitStopped(ctx, t, rt, name+"-a")
	if err := rt.StartContainer(ctx, name+"-a"); err != nil {
		t.Fatalf("starting the killed container again: %v", err)
	}
	if got := addressOn(ctx, t, rt, name, name+"-a"); got != fixed {
		t.Errorf("after a restart the container has %s, want %s", got, fixed)
	}
}

// addressGivenBack checks that a second container asking for the fixed address in use does not
// start, and starts with it once the container that had it is removed.
func addressGivenBack(ctx context.Context, t *testing.T, s Subject, name, fixed string) {
	t.Helper()
	rt := s.Runtime
	if err := runOn(ctx, t, s, name, name+"-c", fixed); err == nil {
		t.Errorf("a second container started with %s, which another one has", fixed)
	}
	if err := rt.RemoveContainer(ctx, name+"-a"); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, name+"-c"); err != nil {
		t.Fatalf("starting a container on an address that was given back: %v", err)
	}
	if got := addressOn(ctx, t, rt, name, name+"-c"); got != fixed {
		t.Errorf("the recreated container has %s, want %s", got, fixed)
	}
}

// DualStack checks dual-stack networks: a network with configured IPv4 and IPv6 subnets gives a
// container its fixed address in each family, keeps both when it is killed and started again,
// lists both subnets, and gives containers without fixed addresses IPv6 ones from its range.
// A runtime without IPv6 networks refuses them, and fixed IPv6 addresses, with an error.
func DualStack(t *testing.T, s Subject) {
	t.Helper()
	ctx := context.Background()
	rt := s.Runtime
	name := s.Prefix + "-dual"
	// A ULA subnet no other test uses: fd00:d0c:<random 16 bits>::/64.
	v6 := netip.MustParsePrefix(fmt.Sprintf("fd00:d0c:%x::/64", time.Now().UnixNano()&0xffff))
	v6Upper := netip.PrefixFrom(nthAddr(v6, 1<<16), 112) // a range well inside it
	spec := container.NetworkSpec{Name: name, Labels: s.Labels, Subnet: "10.213.0.0/24", Gateway: "10.213.0.1", IPRange: "10.213.0.128/25",
		IPv6Subnet: v6.String(), IPv6Gateway: nthAddr(v6, 1).String(), IPv6Range: v6Upper.String()}
	if s.NoIPv6 {
		if err := rt.CreateNetwork(ctx, spec); err == nil || !strings.Contains(err.Error(), "IPv6") {
			t.Errorf("creating a dual-stack network: %v, want an error about IPv6", err)
		}
		err := rt.CreateContainer(ctx, container.ContainerSpec{Name: name + "-a", Image: s.Image, Labels: s.Labels, IPv6Address: nthAddr(v6, 10).String()})
		if err == nil || !strings.Contains(err.Error(), "IPv6") {
			t.Errorf("creating a container with a fixed IPv6 address: %v, want an error about IPv6", err)
		}
		return
	}
	if err := rt.CreateNetwork(ctx, spec); err != nil {
		t.Fatalf("creating a dual-stack network: %v", err)
	}
	n, err := rt.InspectNetwork(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.Subnets, "10.213.0.0/24") || !slices.Contains(n.Subnets, v6.String()) {
		t.Errorf("network lists subnets %v, want 10.213.0.0/24 and %s", n.Subnets, v6)
	}
	run := func(cname, ip4, ip6 string) {
		t.Helper()
		spec := container.ContainerSpec{Name: cname, Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd,
			Labels: s.Labels, Network: name, IPv4Address: ip4, IPv6Address: ip6}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatalf("creating %s: %v", cname, err)
		}
		if err := rt.StartContainer(ctx, cname); err != nil {
			t.Fatalf("starting %s: %v", cname, err)
		}
	}
	endpoint := func(cname string) container.Endpoint {
		t.Helper()
		c, err := rt.InspectContainer(ctx, cname)
		if err != nil {
			t.Fatal(err)
		}
		return c.Networks[name]
	}
	want := container.Endpoint{IPv4: "10.213.0.10", IPv6: nthAddr(v6, 10).String()}
	run(name+"-a", want.IPv4, want.IPv6)
	if got := endpoint(name + "-a"); got != want {
		t.Errorf("container has %+v, want its fixed addresses %+v", got, want)
	}
	run(name+"-b", "", "")
	if got, err := netip.ParseAddr(endpoint(name + "-b").IPv6); err != nil || !v6Upper.Contains(got) {
		t.Errorf("a container without fixed addresses got IPv6 %v (%v), want one in %s", got, err, v6Upper)
	}
	if err := rt.SignalContainer(ctx, name+"-a", "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	waitStopped(ctx, t, rt, name+"-a")
	if err := rt.StartContainer(ctx, name+"-a"); err != nil {
		t.Fatalf("starting the killed container again: %v", err)
	}
	if got := endpoint(name + "-a"); got != want {
		t.Errorf("after a restart the container has %+v, want %+v", got, want)
	}
}

// nthAddr is the address n after a prefix's first.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

func waitStopped(ctx context.Context, t *testing.T, rt container.Runtime, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := rt.InspectContainer(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still runs 30s after SIGKILL", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Events checks the event stream: a container carrying the labels is seen starting, dying and
// being removed, in that order; a container without them is not seen; a network's removal is
// seen; ending the context ends the stream.
func Events(t *testing.T, s Subject) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := s.Runtime
	network, name, stranger := s.Prefix+"-ev-net", s.Prefix+"-ev", s.Prefix+"-ev-stranger"
	events, errs := rt.Events(ctx, s.Labels)
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: network, Labels: s.Labels}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{{name, s.Labels}, {stranger, nil}} {
		spec := container.ContainerSpec{Name: c.name, Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd, Labels: c.labels, Network: network}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, c.name); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.SignalContainer(ctx, name, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	waitStopped(ctx, t, rt, name)
	for _, n := range []string{name, stranger} {
		if err := rt.RemoveContainer(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.RemoveNetwork(ctx, network); err != nil {
		t.Fatal(err)
	}

	want := []string{"container start " + name, "container die " + name, "container destroy " + name, "network destroy " + network}
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case e := <-events:
			if e.Name == stranger {
				t.Errorf("an event of a container without the labels: %+v", e)
			}
			if e.Name != name && e.Name != network {
				continue // the engine's other business
			}
			got = append(got, e.Type+" "+e.Action+" "+e.Name)
		case err := <-errs:
			t.Fatalf("the stream ended: %v (events so far %v)", err, got)
		case <-timeout:
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	cancel()
	select {
	case <-errs:
	case <-time.After(10 * time.Second):
		t.Error("the stream did not end with its context")
	}
}
