package policy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestHostPaths(t *testing.T) {
	p, err := New(Config{HostPaths: []string{"/var/run/docker.sock", "/srv/dockyard"}})
	if err != nil {
		t.Fatal(err)
	}
	for path, allowed := range map[string]bool{
		"/var/run/docker.sock":      true,
		"/srv/dockyard":             true,
		"/srv/dockyard/cache":       true,
		"/srv/dockyard/../../etc":   false,
		"/srv/dockyard-other":       false,
		"/":                         false,
		"/tmp/..":                   false,
		"/var/run":                  false,
		"/var/run/docker.sock/../x": false,
	} {
		err := p.CheckHostPath(path)
		if (err == nil) != allowed {
			t.Errorf("%s: allowed=%v, want %v (%v)", path, err == nil, allowed, err)
		}
		if err != nil && !strings.Contains(err.Error(), HostPathsFlag) {
			t.Errorf("%s: the refusal does not name the flag: %v", path, err)
		}
	}
}

func TestNoHostPathByDefault(t *testing.T) {
	p, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/var/run/docker.sock", "/tmp/.."} {
		if err := p.CheckHostPath(path); err == nil || !strings.Contains(err.Error(), "allows no host path") {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestImages(t *testing.T) {
	p, err := New(Config{ImageRepositories: append(DefaultImageRepositories, "registry.example.internal/nodes/")})
	if err != nil {
		t.Fatal(err)
	}
	for ref, allowed := range map[string]bool{
		"kindest/node:v1.34.4":                         true,
		"docker.io/kindest/node:v1.34.4":               true,
		"kindest/haproxy:v20230606-42a2262b":           true,
		"localhost/dockyard/node:v1.34.4":              true,
		"localhost/dockyard/haproxy:latest":            true,
		"registry.example.internal/nodes/debian:12":    true,
		"kindest/node-evil:v1":                         false,
		"localhost/dockyardx/node:v1":                  false,
		"alpine:3":                                     false,
		"registry.example.internal/nodes":              false,
		"kindest2/node:v1":                             false,
		"evil.example/kindest/node:v1.34.4":            false,
		"docker.io/library/ubuntu@sha256:" + sha256hex: false,
	} {
		err := p.CheckImage(ref)
		if (err == nil) != allowed {
			t.Errorf("%s: allowed=%v, want %v (%v)", ref, err == nil, allowed, err)
		}
		if err != nil && !strings.Contains(err.Error(), ImageRepositoriesFlag) {
			t.Errorf("%s: the refusal does not name the flag: %v", ref, err)
		}
	}
	any, err := New(Config{ImageRepositories: []string{AnyRepository}})
	if err != nil {
		t.Fatal(err)
	}
	if err := any.CheckImage("alpine:3"); err != nil {
		t.Errorf("%s allows every image: %v", AnyRepository, err)
	}
}

const sha256hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestBadEntriesAreRefused(t *testing.T) {
	for _, tc := range []struct{ paths, repos []string }{
		{paths: []string{"relative/path"}},
		{paths: []string{"/tmp/../etc"}},
		{repos: []string{"kindest/node:v1.34.4"}},
		{repos: []string{"Not A Repo"}},
	} {
		if _, err := New(Config{HostPaths: tc.paths, ImageRepositories: tc.repos}); err == nil {
			t.Errorf("%v %v: accepted", tc.paths, tc.repos)
		}
	}
}

func TestDefaultPolicyIsValid(t *testing.T) {
	p := Default()
	if len(p.ListenAddresses) != 2 || p.MinHostPort != DefaultMinHostPort || len(p.SubnetPools) != 4 {
		t.Errorf("default policy: %+v", p)
	}
}

func TestBadEntriesOfEveryFlagAreRefused(t *testing.T) {
	for flag, c := range map[string]Config{
		LoadImageRepositoriesFlag: {LoadImageRepositories: []string{"localhost/<namespace>/App"}},
		ListenAddressesFlag:       {ListenAddresses: []string{"localhost"}},
		MinHostPortFlag:           {MinHostPort: 70000},
		SubnetPoolsFlag:           {SubnetPools: []string{"10.0.0.0"}},
		ReservedSubnetsFlag:       {ReservedSubnets: []string{"10.96.0.0/33"}},
		ImageRepositoriesFlag:     {ImageRepositories: []string{"localhost/<namespace>/"}},
	} {
		_, err := New(c)
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("%+v: %v, want a refusal naming %s", c, err, flag)
		}
	}
}

// Images copied into nodes: by default only those named after the namespace that asks; never
// another team's, nor the manager's own.
func TestLoadImages(t *testing.T) {
	p := Default()
	for _, tc := range []struct {
		ref, namespace string
		allowed        bool
	}{
		{"localhost/team-a/app:dev", "team-a", true},
		{"localhost/team-a/tools/debug:1", "team-a", true},
		{"localhost/team-b/app:dev", "team-a", false},
		{"localhost/team-a-evil/app:dev", "team-a", false},
		{"localhost/dockyard/manager:v0.1.0", "team-a", false},
		{"quay.io/jetstack/cert-manager-controller:v1.11.5", "team-a", false},
		{"app:dev", "default", false},
		{"localhost/default/app:dev", "default", true},
	} {
		err := p.CheckLoadImage(tc.ref, tc.namespace)
		if (err == nil) != tc.allowed {
			t.Errorf("%s in %s: allowed=%v, want %v (%v)", tc.ref, tc.namespace, err == nil, tc.allowed, err)
		}
		if err != nil && (!strings.Contains(err.Error(), LoadImageRepositoriesFlag) || !IsRefused(err)) {
			t.Errorf("%s: the refusal does not name the flag: %v", tc.ref, err)
		}
	}
	// The placeholder is normalized like the rest; * allows any image.
	q, err := New(Config{LoadImageRepositories: []string{"<namespace>/", "quay.io/jetstack/cert-manager-controller"}})
	if err != nil {
		t.Fatal(err)
	}
	if q.LoadImageRepositories[0] != "docker.io/<namespace>/" {
		t.Errorf("normalized to %q", q.LoadImageRepositories[0])
	}
	for ref, allowed := range map[string]bool{
		"team-a/app:dev": true, "docker.io/team-a/app": true, "team-b/app": false,
		"quay.io/jetstack/cert-manager-controller:v1.11.5": true,
	} {
		if err := q.CheckLoadImage(ref, "team-a"); (err == nil) != allowed {
			t.Errorf("%s: allowed=%v, want %v (%v)", ref, err == nil, allowed, err)
		}
	}
	none, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.CheckLoadImage("localhost/a/b", "a"); err == nil || !strings.Contains(err.Error(), "no image") {
		t.Errorf("an empty list allowed or said %v", err)
	}
	anyImage, err := New(Config{LoadImageRepositories: []string{AnyRepository}})
	if err != nil {
		t.Fatal(err)
	}
	if err := anyImage.CheckLoadImage("alpine:3", "x"); err != nil {
		t.Error(err)
	}
}

func TestPorts(t *testing.T) {
	p := Default()
	for _, tc := range []struct {
		address string
		port    int
		allowed bool
		flag    string
	}{
		{"", 0, true, ""},
		{"127.0.0.1", 8080, true, ""},
		{"::1", 30080, true, ""},
		{"", 1024, true, ""},
		{"0.0.0.0", 8080, false, ListenAddressesFlag},
		{"::", 0, false, ListenAddressesFlag},
		{"192.0.2.10", 8080, false, ListenAddressesFlag},
		{"127.0.0.1", 80, false, MinHostPortFlag},
		{"", 1023, false, MinHostPortFlag},
	} {
		err := p.CheckPort(tc.address, tc.port)
		if (err == nil) != tc.allowed {
			t.Errorf("%s:%d: allowed=%v, want %v (%v)", tc.address, tc.port, err == nil, tc.allowed, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s:%d: the refusal does not name %s: %v", tc.address, tc.port, tc.flag, err)
		}
	}
	open, err := New(Config{ListenAddresses: []string{"0.0.0.0"}, MinHostPort: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.CheckPort("0.0.0.0", 80); err != nil {
		t.Errorf("an administrator's allowance: %v", err)
	}
}

func TestNetworks(t *testing.T) {
	p := Default()
	for _, n := range []string{"host", "none", "bridge", "kind", "dockyard-mgmt", "shared"} {
		if err := p.CheckNetwork(n); err == nil || !strings.Contains(err.Error(), NetworksFlag) {
			t.Errorf("%s: %v", n, err)
		}
	}
	q, err := New(Config{Networks: []string{"shared"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.CheckNetwork("shared"); err != nil {
		t.Error(err)
	}
	if err := q.CheckNetwork("host"); err == nil {
		t.Error("host allowed by a list that does not name it")
	}
}

func TestSubnets(t *testing.T) {
	p := Default().WithReservedSubnets(netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.244.0.0/16"))
	for _, tc := range []struct {
		subnet  string
		extra   []netip.Prefix
		allowed bool
		says    string
	}{
		{"10.100.0.0/24", nil, false, "10.96.0.0/12"},
		{"10.200.0.0/24", nil, true, ""},
		{"192.168.200.0/28", nil, true, ""},
		{"fd00:100::/64", nil, true, ""},
		{"10.96.0.0/24", nil, false, "10.96.0.0/12"},
		{"10.0.0.0/8", nil, false, "10.96.0.0/12"},
		{"10.244.1.0/24", nil, false, "10.244.0.0/16"},
		{"169.254.0.0/24", nil, false, "link-local"},
		{"127.0.0.0/24", nil, false, "loopback"},
		{"fe80::/64", nil, false, "link-local"},
		{"8.8.8.0/24", nil, false, SubnetPoolsFlag},
		{"2001:db8::/64", nil, false, SubnetPoolsFlag},
		{"172.18.0.0/16", []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16")}, false, "172.18.0.0/16"},
		{"172.19.0.0/16", []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16")}, true, ""},
		{"not a subnet", nil, false, "CIDR"},
	} {
		err := p.CheckSubnet(tc.subnet, tc.extra...)
		if (err == nil) != tc.allowed {
			t.Errorf("%s: allowed=%v, want %v (%v)", tc.subnet, err == nil, tc.allowed, err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: the refusal does not say %q: %v", tc.subnet, tc.says, err)
		}
	}
	if len(Default().ReservedSubnets) != 0 {
		t.Error("WithReservedSubnets changed the policy it was called on")
	}
}

// The host's engine is every namespace's by default; an administrator can keep teams off it,
// so that their nodes (root on the host when on its engine) run on infrastructure clusters only.
func TestHostEngine(t *testing.T) {
	if err := Default().CheckHostEngine("team-a"); err != nil {
		t.Errorf("by default every namespace may use the host's engine: %v", err)
	}
	p, err := New(Config{HostEngineNamespaces: []string{"platform"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckHostEngine("platform"); err != nil {
		t.Errorf("a listed namespace: %v", err)
	}
	for _, cfg := range []Config{{HostEngineNamespaces: []string{"platform"}}, {}} {
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.CheckHostEngine("team-a"); !IsRefused(err) || !strings.Contains(err.Error(), HostEngineFlag) ||
			!strings.Contains(err.Error(), "spec.infrastructure") {
			t.Errorf("%+v: team-a on the host's engine: %v, want a refusal naming the field and %s", cfg, err, HostEngineFlag)
		}
	}
}

// Which API servers a namespace's kubeconfig Secrets may name: https anywhere by default, http
// never unless named, a server without a scheme never.
func TestInfrastructureServers(t *testing.T) {
	for _, tc := range []struct {
		entries   []string
		namespace string
		server    string
		allowed   bool
	}{
		{DefaultInfrastructureServers, "team-a", "https://infra.example:6443", true},
		{DefaultInfrastructureServers, "team-a", "https://10.0.0.1", true},
		{DefaultInfrastructureServers, "team-a", "http://infra.example:6443", false},
		{DefaultInfrastructureServers, "team-a", "infra.example:6443", false},
		{DefaultInfrastructureServers, "team-a", "HTTPS://infra.example", true},
		{[]string{"http://infra.example:8080"}, "team-a", "http://infra.example:8080", true},
		{[]string{"http://infra.example:8080"}, "team-a", "http://infra.example:8081", false},
		{[]string{"https://infra.example"}, "team-a", "https://infra.example:443", true},
		{[]string{"https://infra.example"}, "team-a", "https://infra.example:6443", false},
		{[]string{"https://*:6443"}, "team-a", "https://anything:6443", true},
		{[]string{"https://*:6443"}, "team-a", "https://anything:443", false},
		{[]string{"team-a=https://infra-a.example:6443", "team-b=https://infra-b.example:6443"}, "team-a", "https://infra-a.example:6443", true},
		{[]string{"team-a=https://infra-a.example:6443", "team-b=https://infra-b.example:6443"}, "team-a", "https://infra-b.example:6443", false},
		{[]string{"*=https://shared.example:6443"}, "team-c", "https://shared.example:6443", true},
		{nil, "team-a", "https://infra.example:6443", false},
	} {
		p, err := New(Config{InfrastructureServers: tc.entries})
		if err != nil {
			t.Fatal(err)
		}
		err = p.CheckInfrastructureServer(tc.namespace, tc.server)
		if (err == nil) != tc.allowed {
			t.Errorf("%v, %s naming %s: allowed=%v, want %v (%v)", tc.entries, tc.namespace, tc.server, err == nil, tc.allowed, err)
		}
		if err != nil && (!IsRefused(err) || !strings.Contains(err.Error(), InfrastructureServersFlag) && !strings.Contains(err.Error(), "scheme")) {
			t.Errorf("%s: the refusal names neither the flag nor the scheme: %v", tc.server, err)
		}
	}
	for _, bad := range []string{"infra.example", "ftp://infra.example", "https://", "https://infra.example/path", "https://u:p@infra.example", "https://infra.example:99999"} {
		if _, err := New(Config{InfrastructureServers: []string{bad}}); err == nil || !strings.Contains(err.Error(), InfrastructureServersFlag) {
			t.Errorf("entry %q: %v, want an error naming %s", bad, err, InfrastructureServersFlag)
		}
	}
}

// The manager's memory is every namespace's by default (its nodes reach no host); an
// administrator can keep namespaces off it.
func TestInMemory(t *testing.T) {
	if err := Default().CheckInMemory("team-a"); err != nil {
		t.Errorf("by default every namespace may run nodes in memory: %v", err)
	}
	p, err := New(Config{InMemoryNamespaces: []string{"scale"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckInMemory("scale"); err != nil {
		t.Errorf("a listed namespace: %v", err)
	}
	if err := p.CheckInMemory("team-a"); !IsRefused(err) || !strings.Contains(err.Error(), InMemoryFlag) ||
		!strings.Contains(err.Error(), "spec.infrastructure.inMemory") {
		t.Errorf("team-a in memory: %v, want a refusal naming the field and %s", err, InMemoryFlag)
	}
}
