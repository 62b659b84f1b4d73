package images

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/dockyard-dev/dockyard/test/ci"
)

// cniConfigScript writes images/cni/dockyard-cni-config to dir and returns its path.
func cniConfigScript(t *testing.T, dir string) string {
	t.Helper()
	script, err := Files.ReadFile("cni/dockyard-cni-config")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "dockyard-cni-config")
	if err := os.WriteFile(p, script, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCNIConfigNetworkOf: the sidecar's network_of and network_of6 (pure bash) give the network
// of an address/length as net/netip does (IPv6 in the canonical form), from any spelling of the
// address; an IPv6 address that is not one is refused.
func TestCNIConfigNetworkOf(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		ci.Missing(t, "no bash")
	}
	type tc struct{ fn, in, want string }
	cases := []tc{
		{"network_of", "10.244.3.1/24", "10.244.3.0/24"},
		{"network_of", "10.244.3.1/0", "0.0.0.0/0"},
		{"network_of", "10.244.3.1/32", "10.244.3.1/32"},
		{"network_of6", "fd00:10:244:1::1/64", "fd00:10:244:1::/64"},
		{"network_of6", "FD00:0010:0244:0001:0000:0000:0000:0001/64", "fd00:10:244:1::/64"},
		{"network_of6", "fd00:10:244:ff::1/56", "fd00:10:244::/56"},
		{"network_of6", "::1/128", "::1/128"},
		{"network_of6", "::/0", "::/0"},
		{"network_of6", "1:2:3:4:5:6:7:8/0", "::/0"},
		{"network_of6", "1:0:0:2:0:0:0:3/128", "1:0:0:2::3/128"},
		{"network_of6", "1:2::3:4:5:6:7/128", "1:2:0:3:4:5:6:7/128"},
		{"network_of6", "fd00::1:2/120", "fd00::1:0/120"},
	}
	for _, bad := range []string{"bad::1::2/64", "1:2:3/64", "1:2:3:4:5:6:7:8:9/64", ":1::/64", "12345::/64", "fd00::/129", "fd00::", "fd00::/x", "::ffff:10.0.0.1/128", "1:2:3:4:5:6:7:/64"} {
		cases = append(cases, tc{"network_of6", bad, "error"})
	}
	// Random addresses, zero groups frequent (so runs of them are compressed in every place),
	// in the canonical, the expanded and an upper-case spelling, at every length.
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		var b [16]byte
		for g := 0; g < 8; g++ {
			if rnd.IntN(2) == 0 {
				v := rnd.Uint32()
				b[2*g], b[2*g+1] = byte(v>>8), byte(v)
			}
		}
		a := netip.AddrFrom16(b)
		if a.Is4In6() {
			continue // net/netip writes those with a dotted quad
		}
		in := []string{a.String(), a.StringExpanded(), strings.ToUpper(a.String())}[i%3]
		bits := rnd.IntN(129)
		cases = append(cases, tc{"network_of6", fmt.Sprintf("%s/%d", in, bits), netip.PrefixFrom(a, bits).Masked().String()})
		var b4 [4]byte
		for j := range b4 {
			b4[j] = byte(rnd.Uint32())
		}
		bits = rnd.IntN(33)
		cases = append(cases, tc{"network_of", fmt.Sprintf("%s/%d", netip.AddrFrom4(b4), bits), netip.PrefixFrom(netip.AddrFrom4(b4), bits).Masked().String()})
	}
	// One bash for all: source the script (which then only defines its functions) and print
	// one line per case.
	var driver strings.Builder
	driver.WriteString("source \"$1\"\nset +o errexit\n")
	for _, c := range cases {
		fmt.Fprintf(&driver, "%s '%s' || echo error\n", c.fn, c.in)
	}
	dir := t.TempDir()
	out, err := exec.Command("bash", "-c", driver.String(), "driver", cniConfigScript(t, dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(cases) {
		t.Fatalf("%d lines for %d cases:\n%s", len(got), len(cases), out)
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("%s %s = %s, want %s", c.fn, c.in, got[i], c.want)
		}
	}
}

// conflist is what the test reads of the sidecar's configuration.
type conflist struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []struct {
		Type      string `json:"type"`
		Bridge    string `json:"bridge"`
		IsGateway bool   `json:"isGateway"`
		MTU       int    `json:"mtu"`
		IPAM      struct {
			Type   string `json:"type"`
			Ranges [][]struct {
				Subnet  string `json:"subnet"`
				Gateway string `json:"gateway"`
			} `json:"ranges"`
			Routes []struct {
				Dst string `json:"dst"`
			} `json:"routes"`
		} `json:"ipam"`
	} `json:"plugins"`
}

// syncBuffer is a process's output, read while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// cniConfigRun is the sidecar running against a subnet.env and a CNI configuration directory
// of a test.
type cniConfigRun struct {
	subnetEnv, conf string
	cmd             *exec.Cmd
	output          *syncBuffer
}

func startCNIConfig(t *testing.T) *cniConfigRun {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		ci.Missing(t, "no bash")
	}
	dir := t.TempDir()
	r := &cniConfigRun{
		subnetEnv: filepath.Join(dir, "run", "subnet.env"),
		conf:      filepath.Join(dir, "net.d", "10-dockyard-flannel.conflist"),
		output:    &syncBuffer{},
	}
	r.cmd = exec.Command("bash", cniConfigScript(t, dir))
	r.cmd.Env = append(os.Environ(), "FLANNEL_SUBNET_FILE="+r.subnetEnv, "CNI_CONF_DIR="+filepath.Dir(r.conf), "CHECK_INTERVAL_SECONDS=0.02")
	r.cmd.Stdout, r.cmd.Stderr = r.output, r.output
	if err := os.MkdirAll(filepath.Dir(r.subnetEnv), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			// TERM and INT end the sidecar cleanly (the kubelet stops it with TERM).
			if err != nil {
				t.Errorf("dockyard-cni-config exited with %v on SIGINT\n%s", err, r.output)
			}
		case <-time.After(10 * time.Second):
			_ = r.cmd.Process.Kill()
			t.Errorf("dockyard-cni-config did not stop on SIGINT")
		}
	})
	return r
}

// writeEnv replaces subnet.env the way flannel does (a new file moved in place).
func (r *cniConfigRun) writeEnv(t *testing.T, lines ...string) {
	t.Helper()
	tmp := r.subnetEnv + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.subnetEnv); err != nil {
		t.Fatal(err)
	}
}

// waitConf waits for the configuration to be other than previous and returns it.
func (r *cniConfigRun) waitConf(t *testing.T, previous string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(r.conf); err == nil && string(b) != previous {
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no new %s; output:\n%s", r.conf, r.output)
	return ""
}

// noConf asserts that the sidecar, given many of its intervals, writes nothing new.
func (r *cniConfigRun) noConf(t *testing.T, previous, why string) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	b, err := os.ReadFile(r.conf)
	if (err == nil) != (previous != "") || string(b) != previous {
		t.Errorf("%s; yet the configuration is now:\n%s\noutput:\n%s", why, b, r.output)
	}
}

type wantRange struct{ subnet, gateway string }

// checkConf checks a configuration: a conflist the CNI library loads, the bridge on cni0 as the
// pods' gateway with host-local giving one range per family (each range's subnet a network,
// without host bits, as host-local requires, its gateway the lease's address, inside it) and a
// default route per family, then portmap.
func checkConf(t *testing.T, text string, mtu int, ranges ...wantRange) {
	t.Helper()
	if _, err := libcni.ConfListFromBytes([]byte(text)); err != nil {
		t.Errorf("not a CNI configuration list: %v\n%s", err, text)
	}
	var c conflist
	if err := json.Unmarshal([]byte(text), &c); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, text)
	}
	if c.CNIVersion != "1.0.0" || c.Name != "dockyard-flannel" || len(c.Plugins) != 2 || c.Plugins[1].Type != "portmap" {
		t.Fatalf("want bridge and portmap, version 1.0.0, named dockyard-flannel:\n%s", text)
	}
	br := c.Plugins[0]
	if br.Type != "bridge" || br.Bridge != "cni0" || !br.IsGateway || br.MTU != mtu || br.IPAM.Type != "host-local" {
		t.Errorf("want the bridge cni0 as gateway, mtu %d, host-local:\n%s", mtu, text)
	}
	var got []wantRange
	for _, set := range br.IPAM.Ranges {
		if len(set) != 1 {
			t.Errorf("want one range per range set:\n%s", text)
			continue
		}
		got = append(got, wantRange{set[0].Subnet, set[0].Gateway})
		subnet, err := netip.ParsePrefix(set[0].Subnet)
		if err != nil || subnet != subnet.Masked() {
			t.Errorf("range subnet %q is not a network (%v)", set[0].Subnet, err)
			continue
		}
		gw, err := netip.ParseAddr(set[0].Gateway)
		if err != nil || !subnet.Contains(gw) {
			t.Errorf("range gateway %q is not in %s (%v)", set[0].Gateway, subnet, err)
		}
	}
	if !reflect.DeepEqual(got, ranges) {
		t.Errorf("ranges %v, want %v", got, ranges)
	}
	var routes, wantRoutes []string
	for _, r := range br.IPAM.Routes {
		routes = append(routes, r.Dst)
	}
	for _, r := range ranges {
		if strings.Contains(r.subnet, ":") {
			wantRoutes = append(wantRoutes, "::/0")
		} else {
			wantRoutes = append(wantRoutes, "0.0.0.0/0")
		}
	}
	if !reflect.DeepEqual(routes, wantRoutes) {
		t.Errorf("routes %v, want %v", routes, wantRoutes)
	}
}

// TestCNIConfigRender: the sidecar renders the node's configuration for flannel's leases, as
// flannel writes subnet.env for an IPv4, an IPv6 and a dual-stack network.
func TestCNIConfigRender(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		mtu  int
		want []wantRange
	}{
		{"ipv4", []string{"FLANNEL_NETWORK=10.244.0.0/16", "FLANNEL_SUBNET=10.244.3.1/24", "FLANNEL_MTU=1500", "FLANNEL_IPMASQ=true"},
			1500, []wantRange{{"10.244.3.0/24", "10.244.3.1"}}},
		{"ipv6", []string{"FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1/64", "FLANNEL_MTU=1480", "FLANNEL_IPMASQ=true"},
			1480, []wantRange{{"fd00:10:244:3::/64", "fd00:10:244:3::1"}}},
		{"dual-stack", []string{"FLANNEL_NETWORK=10.244.0.0/16", "FLANNEL_SUBNET=10.244.3.1/24", "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1/64", "FLANNEL_MTU=1500", "FLANNEL_IPMASQ=true"},
			1500, []wantRange{{"10.244.3.0/24", "10.244.3.1"}, {"fd00:10:244:3::/64", "fd00:10:244:3::1"}}},
		// A /48 cut into /120s: the lease's network ends within a group.
		{"ipv6-small-subnets", []string{"FLANNEL_IPV6_NETWORK=fd00:100:96::/48", "FLANNEL_IPV6_SUBNET=fd00:100:96::1:301/120"},
			1500, []wantRange{{"fd00:100:96::1:300/120", "fd00:100:96::1:301"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startCNIConfig(t)
			r.writeEnv(t, tc.env...)
			checkConf(t, r.waitConf(t, ""), tc.mtu, tc.want...)
		})
	}
}

// TestCNIConfigWaitsForEveryFamily: the sidecar writes nothing while a family flannel announces
// (its network in subnet.env) has no lease, or a lease is malformed; it follows the leases
// when they change.
func TestCNIConfigWaitsForEveryFamily(t *testing.T) {
	r := startCNIConfig(t)
	r.noConf(t, "", "no subnet.env yet")
	r.writeEnv(t, "FLANNEL_NETWORK=10.244.0.0/16", "FLANNEL_SUBNET=10.244.3.1/24", "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_MTU=1500")
	r.noConf(t, "", "subnet.env has no IPv6 lease for its IPv6 network")
	r.writeEnv(t, "FLANNEL_NETWORK=10.244.0.0/16", "FLANNEL_SUBNET=10.244.3.1", "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1/64")
	r.noConf(t, "", "subnet.env has an IPv4 lease without a length")
	r.writeEnv(t, "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1::1/64")
	r.noConf(t, "", "subnet.env has a malformed IPv6 lease")
	r.writeEnv(t, "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1/64", "FLANNEL_NETWORK=10.244.0.0/16", "FLANNEL_SUBNET=10.244.3.1/24")
	dual := r.waitConf(t, "")
	checkConf(t, dual, 1500, wantRange{"10.244.3.0/24", "10.244.3.1"}, wantRange{"fd00:10:244:3::/64", "fd00:10:244:3::1"})
	// The same leases written again: nothing to do.
	r.writeEnv(t, "FLANNEL_NETWORK=10.244.0.0/16", "FLANNEL_SUBNET=10.244.3.1/24", "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:3::1/64")
	r.noConf(t, dual, "the leases did not change")
	if !strings.Contains(r.output.String(), "wrote "+r.conf+" for pod subnets 10.244.3.0/24 (gateway 10.244.3.1) fd00:10:244:3::/64 (gateway fd00:10:244:3::1), mtu 1500\n") {
		t.Errorf("the sidecar does not say what it wrote:\n%s", r.output)
	}
	if n := strings.Count(r.output.String(), "wrote "); n != 1 {
		t.Errorf("wrote the configuration %d times, want once:\n%s", n, r.output)
	}
	// Another node's leases (a new lease after flannel was reconfigured), IPv6 only.
	r.writeEnv(t, "FLANNEL_IPV6_NETWORK=fd00:10:244::/56", "FLANNEL_IPV6_SUBNET=fd00:10:244:7::1/64", "FLANNEL_MTU=1450")
	checkConf(t, r.waitConf(t, dual), 1450, wantRange{"fd00:10:244:7::/64", "fd00:10:244:7::1"})
}
