// Package policy is what the manager's administrator lets the objects of a namespace ask of the
// engine's host: which host paths node containers may bind-mount, which images may run as nodes
// and load balancers, which images the engine may copy into a namespace's nodes, on which host
// addresses and ports nodes may publish ports, which networks not made by Dockyard clusters may
// join, and which subnets the networks Dockyard makes may take. Node containers run with nearly
// every capability and no confinement, so whoever may create Dockyard's objects is trusted only
// as far as this policy says. The webhooks refuse objects outside it, naming the field and the
// flag, and the node layer checks it again before it calls the engine, for objects admitted
// before the policy changed.
package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
)

// Flags that set the policy, named in every refusal.
const (
	HostPathsFlag             = "--allowed-host-paths"
	ImageRepositoriesFlag     = "--allowed-image-repositories"
	LoadImageRepositoriesFlag = "--allowed-load-image-repositories"
	ListenAddressesFlag       = "--allowed-listen-addresses"
	MinHostPortFlag           = "--min-host-port"
	NetworksFlag              = "--allowed-networks"
	SubnetPoolsFlag           = "--allowed-subnet-pools"
	ReservedSubnetsFlag       = "--reserved-subnets"
	// ManagementInfrastructureFlag lists the namespaces whose clusters may run their nodes as
	// Pods of the management cluster.
	ManagementInfrastructureFlag = "--allowed-management-infrastructure-namespaces"
	// HostEngineFlag lists the namespaces whose clusters may run their nodes on the manager's
	// own engine.
	HostEngineFlag = "--allowed-host-engine-namespaces"
	// InMemoryFlag lists the namespaces whose clusters may run their nodes in the manager's
	// memory (the in-memory engine).
	InMemoryFlag = "--allowed-in-memory-namespaces"
	// InfrastructureServersFlag lists the API servers of infrastructure clusters a namespace's
	// kubeconfig Secrets may name.
	InfrastructureServersFlag = "--allowed-infrastructure-servers"
)

// AnyNamespace in a list of namespaces allows every namespace.
const AnyNamespace = "*"

// AnyHTTPSServer, as an entry of InfrastructureServers, allows every API server reached over
// https; http is only ever allowed by name.
const AnyHTTPSServer = "https://*"

// hostPathsVariable says how clusterctl users set HostPathsFlag.
const hostPathsVariable = "; clusterctl init sets it from DOCKYARD_ALLOWED_HOST_PATHS"

// AnyRepository in an image repository list allows every image.
const AnyRepository = "*"

// NamespacePlaceholder in a repository of LoadImageRepositories stands for the namespace of the
// object that asks for the image: "localhost/<namespace>/" lets a cluster in namespace team-a
// load localhost/team-a/app:dev, and no other team's images.
const NamespacePlaceholder = "<namespace>"

// Defaults of the flags.
var (
	// DefaultImageRepositories are kind's node and load balancer images and the images Dockyard
	// builds on the machine (make images).
	DefaultImageRepositories = []string{"docker.io/kindest/node", "docker.io/kindest/haproxy", "localhost/dockyard/"}
	// DefaultLoadImageRepositories lets a namespace load the images named after it, and nothing
	// else: no other team's build, no image of the manager's own.
	DefaultLoadImageRepositories = []string{"localhost/" + NamespacePlaceholder + "/"}
	// DefaultListenAddresses keep published ports on the host's loopback.
	DefaultListenAddresses = []string{"127.0.0.1", "::1"}
	// DefaultSubnetPools are the private ranges (RFC 1918, and unique local IPv6 addresses).
	DefaultSubnetPools = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"}
	// DefaultHostEngineNamespaces lets every namespace run nodes on the manager's engine.
	DefaultHostEngineNamespaces = []string{AnyNamespace}
	// DefaultInMemoryNamespaces lets every namespace run nodes in the manager's memory: they
	// reach nothing of a host, and cost the manager memory and CPU only.
	DefaultInMemoryNamespaces = []string{AnyNamespace}
	// DefaultInfrastructureServers lets every namespace name any API server reached over https.
	DefaultInfrastructureServers = []string{AnyHTTPSServer}
)

// DefaultMinHostPort keeps the host's privileged ports (80, 443, ...) for its administrator.
const DefaultMinHostPort = 1024

// Config is the policy as the manager's flags give it, before it is checked.
type Config struct {
	HostPaths             []string
	ImageRepositories     []string
	LoadImageRepositories []string
	ListenAddresses       []string
	MinHostPort           int
	Networks              []string
	SubnetPools           []string
	// ReservedSubnets are ranges clusters' subnets must not overlap: the management cluster's
	// pod and Service ranges, the host's routes. The manager adds what it finds itself.
	ReservedSubnets []string
	// ManagementInfrastructureNamespaces may run their clusters' nodes as Pods of the
	// management cluster; "*" allows every namespace.
	ManagementInfrastructureNamespaces []string
	// HostEngineNamespaces may run their clusters' nodes on the manager's engine; "*" allows
	// every namespace.
	HostEngineNamespaces []string
	// InMemoryNamespaces may run their clusters' nodes in the manager's memory; "*" allows
	// every namespace.
	InMemoryNamespaces []string
	// InfrastructureServers are the API servers kubeconfig Secrets may name, each
	// "[NAMESPACE=]SCHEME://HOST[:PORT]" (HOST * for any host; no namespace for every one).
	InfrastructureServers []string
}

// DefaultConfig is the configuration of a manager started without the flags.
func DefaultConfig() Config {
	return Config{
		ImageRepositories:     DefaultImageRepositories,
		LoadImageRepositories: DefaultLoadImageRepositories,
		ListenAddresses:       DefaultListenAddresses,
		MinHostPort:           DefaultMinHostPort,
		SubnetPools:           DefaultSubnetPools,
		HostEngineNamespaces:  DefaultHostEngineNamespaces,
		InMemoryNamespaces:    DefaultInMemoryNamespaces,
		InfrastructureServers: DefaultInfrastructureServers,
	}
}

// Policy is what objects may ask of the engine's host. It does not change once made.
type Policy struct {
	// HostPaths may be bind-mounted into node containers: a mount's host path must be one of
	// them or below one. Empty allows no mount.
	HostPaths []string
	// ImageRepositories node and load balancer images may come from: a repository name
	// ("docker.io/kindest/node") or a prefix ending in "/" ("localhost/dockyard/"), normalized
	// the way the engine does ("kindest/node" is "docker.io/kindest/node"); AnyRepository
	// allows every image.
	ImageRepositories []string
	// LoadImageRepositories the engine may copy images from into nodes (loadImages,
	// preLoadImages), written like ImageRepositories, where NamespacePlaceholder stands for the
	// namespace asking.
	LoadImageRepositories []string
	// ListenAddresses host addresses nodes may publish ports on.
	ListenAddresses []netip.Addr
	// MinHostPort is the lowest host port a node may publish a port on (0, the engine's
	// choice, is always allowed).
	MinHostPort int
	// Networks not made by Dockyard for the cluster that clusters may join.
	Networks []string
	// SubnetPools hold every subnet of a network Dockyard makes.
	SubnetPools []netip.Prefix
	// ReservedSubnets no subnet of a network Dockyard makes may overlap.
	ReservedSubnets []netip.Prefix
	// ManagementInfrastructureNamespaces are the namespaces whose clusters may run their nodes
	// as Pods of the management cluster (privileged Pods, in the cluster's namespace): "*"
	// allows every one; empty allows none.
	ManagementInfrastructureNamespaces []string
	// HostEngineNamespaces are the namespaces whose clusters may run their nodes on the
	// manager's own engine, where their bootstrap commands are root on its host: "*" allows
	// every one; empty allows none (each must name an infrastructure cluster).
	HostEngineNamespaces []string
	// InMemoryNamespaces are the namespaces whose clusters may run their nodes in the
	// manager's memory (spec.infrastructure.inMemory): "*" allows every one; empty allows none.
	InMemoryNamespaces []string
	// InfrastructureServers are the API servers of infrastructure clusters each namespace's
	// kubeconfig Secrets may name.
	InfrastructureServers []ServerPattern
}

// ServerPattern is an entry of InfrastructureServersFlag: the API servers of a namespace (every
// namespace when empty) with a scheme, a host (any when "*") and a port (the scheme's when 0).
type ServerPattern struct {
	Namespace, Scheme, Host string
	Port                    int
}

func (s ServerPattern) String() string {
	out := s.Scheme + "://" + s.Host
	if s.Port != 0 {
		out += ":" + strconv.Itoa(s.Port)
	}
	if s.Namespace != "" {
		out = s.Namespace + "=" + out
	}
	return out
}

// Default is the policy of a manager started without the flags.
func Default() *Policy {
	p, err := New(DefaultConfig())
	if err != nil {
		panic(fmt.Sprintf("the default policy is invalid: %v", err)) // a programming error, caught by the tests
	}
	return p
}

// New checks and normalizes a policy's entries; an entry that is invalid is an error naming its
// flag.
func New(c Config) (*Policy, error) {
	p := &Policy{MinHostPort: c.MinHostPort}
	for _, h := range trimmed(c.HostPaths) {
		if !path.IsAbs(h) || path.Clean(h) != h {
			return nil, errors.Errorf("%s: %q must be an absolute, clean path", HostPathsFlag, h)
		}
		p.HostPaths = append(p.HostPaths, h)
	}
	var err error
	if p.ImageRepositories, err = repositories(c.ImageRepositories, ImageRepositoriesFlag, false); err != nil {
		return nil, err
	}
	if p.LoadImageRepositories, err = repositories(c.LoadImageRepositories, LoadImageRepositoriesFlag, true); err != nil {
		return nil, err
	}
	for _, a := range trimmed(c.ListenAddresses) {
		addr, err := netip.ParseAddr(a)
		if err != nil || addr.Zone() != "" {
			return nil, errors.Errorf("%s: %q is not an IP address", ListenAddressesFlag, a)
		}
		p.ListenAddresses = append(p.ListenAddresses, addr)
	}
	if c.MinHostPort < 0 || c.MinHostPort > 65535 {
		return nil, errors.Errorf("%s: %d is not a port", MinHostPortFlag, c.MinHostPort)
	}
	p.Networks = trimmed(c.Networks)
	if p.SubnetPools, err = prefixes(c.SubnetPools, SubnetPoolsFlag); err != nil {
		return nil, err
	}
	if p.ReservedSubnets, err = prefixes(c.ReservedSubnets, ReservedSubnetsFlag); err != nil {
		return nil, err
	}
	p.ManagementInfrastructureNamespaces = trimmed(c.ManagementInfrastructureNamespaces)
	p.HostEngineNamespaces = trimmed(c.HostEngineNamespaces)
	p.InMemoryNamespaces = trimmed(c.InMemoryNamespaces)
	for _, e := range trimmed(c.InfrastructureServers) {
		sp, err := parseServerPattern(e)
		if err != nil {
			return nil, errors.Errorf("%s: %q %v", InfrastructureServersFlag, e, err)
		}
		p.InfrastructureServers = append(p.InfrastructureServers, sp)
	}
	return p, nil
}

// parseServerPattern reads "[NAMESPACE=]SCHEME://HOST[:PORT]".
func parseServerPattern(e string) (ServerPattern, error) {
	var sp ServerPattern
	if ns, rest, ok := strings.Cut(e, "="); ok {
		sp.Namespace, e = ns, rest
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" {
		return sp, errors.New("is not [NAMESPACE=]https://HOST[:PORT] (or http://; HOST * for any)")
	}
	sp.Scheme, sp.Host = u.Scheme, u.Hostname()
	if port := u.Port(); port != "" {
		if sp.Port, err = strconv.Atoi(port); err != nil || sp.Port < 1 || sp.Port > 65535 {
			return sp, errors.New("has no valid port")
		}
	}
	return sp, nil
}

// WithReservedSubnets returns a copy of the policy that also reserves subnets (what the manager
// found of the management cluster and the host).
func (p *Policy) WithReservedSubnets(subnets ...netip.Prefix) *Policy {
	c := *p
	c.ReservedSubnets = slices.Clone(p.ReservedSubnets)
	for _, s := range subnets {
		if s = s.Masked(); !slices.Contains(c.ReservedSubnets, s) {
			c.ReservedSubnets = append(c.ReservedSubnets, s)
		}
	}
	return &c
}

func trimmed(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// repositories normalizes repository names and prefixes the way the engine names images.
func repositories(in []string, flag string, placeholder bool) ([]string, error) {
	var out []string
	for _, r := range trimmed(in) {
		if r == AnyRepository {
			out = append(out, r)
			continue
		}
		check := r
		if placeholder {
			// Any valid path component stands in for the namespace while the entry is checked.
			check = strings.ReplaceAll(r, NamespacePlaceholder, "namespace")
		}
		// A prefix is normalized with a last component added, so "team/" is docker.io's user
		// team, not the official image docker.io/library/team.
		if strings.HasSuffix(check, "/") {
			check += "x"
		}
		named, err := reference.ParseNormalizedNamed(check)
		if err != nil || reference.TrimNamed(named).String() != named.String() {
			return nil, errors.Errorf("%s: %q is not a repository name (nor a prefix ending in /)", flag, r)
		}
		// Normalizing only ever adds "docker.io/" or "docker.io/library/" in front.
		added := strings.TrimSuffix(named.Name(), check)
		name := added + r
		out = append(out, name)
	}
	return out, nil
}

func prefixes(in []string, flag string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range trimmed(in) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, errors.Errorf("%s: %q is not a subnet in CIDR notation", flag, s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// CheckHostPath returns an error unless a node container may bind-mount hostPath. The path is
// cleaned first, so "/tmp/.." is "/"; symbolic links on the host are not resolved, so allowed
// paths must not hold links a tenant can write.
func (p *Policy) CheckHostPath(hostPath string) error {
	clean := path.Clean(hostPath)
	for _, allowed := range p.HostPaths {
		if clean == allowed || allowed == "/" || strings.HasPrefix(clean, allowed+"/") {
			return nil
		}
	}
	if len(p.HostPaths) == 0 {
		return refusedf("host path %s may not be mounted: the manager allows no host path (%s%s)", hostPath, HostPathsFlag, hostPathsVariable)
	}
	return refusedf("host path %s may not be mounted: the manager allows %s and paths below them (%s%s)",
		hostPath, strings.Join(p.HostPaths, ", "), HostPathsFlag, hostPathsVariable)
}

// CheckImage returns an error unless nodes and load balancers may run image ref.
func (p *Policy) CheckImage(ref string) error {
	repo, err := repositoryOf(ref)
	if err != nil {
		return err
	}
	if matchRepository(p.ImageRepositories, repo, "") {
		return nil
	}
	return refusedf("image %s may not run as a node or load balancer: its repository %s is not among %s (%s)",
		ref, repo, strings.Join(p.ImageRepositories, ", "), ImageRepositoriesFlag)
}

// CheckLoadImage returns an error unless the engine may copy image ref into the nodes of a
// cluster in namespace.
func (p *Policy) CheckLoadImage(ref, namespace string) error {
	repo, err := repositoryOf(ref)
	if err != nil {
		return err
	}
	if matchRepository(p.LoadImageRepositories, repo, namespace) {
		return nil
	}
	allowed := make([]string, 0, len(p.LoadImageRepositories))
	for _, r := range p.LoadImageRepositories {
		allowed = append(allowed, strings.ReplaceAll(r, NamespacePlaceholder, namespace))
	}
	if len(allowed) == 0 {
		return refusedf("image %s may not be loaded into nodes: the manager allows loading no image from the engine (%s)", ref, LoadImageRepositoriesFlag)
	}
	return refusedf("image %s may not be loaded into the nodes of namespace %s: its repository %s is not among %s (%s)",
		ref, namespace, repo, strings.Join(allowed, ", "), LoadImageRepositoriesFlag)
}

func repositoryOf(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", refusedf("image %s is not a valid reference: %v", ref, err)
	}
	return named.Name(), nil
}

func matchRepository(allowed []string, repo, namespace string) bool {
	for _, a := range allowed {
		if namespace != "" {
			a = strings.ReplaceAll(a, NamespacePlaceholder, namespace)
		} else if strings.Contains(a, NamespacePlaceholder) {
			continue
		}
		if a == AnyRepository || repo == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(repo, a)) {
			return true
		}
	}
	return false
}

// CheckPort returns an error unless a node may publish a port on the host's listenAddress
// (127.0.0.1 when empty) and hostPort (0: the engine picks a free one).
func (p *Policy) CheckPort(listenAddress string, hostPort int) error {
	if listenAddress == "" {
		listenAddress = "127.0.0.1"
	}
	addr, err := netip.ParseAddr(listenAddress)
	if err != nil {
		return refusedf("listen address %s is not an IP address", listenAddress)
	}
	if !slices.Contains(p.ListenAddresses, addr) {
		allowed := make([]string, 0, len(p.ListenAddresses))
		for _, a := range p.ListenAddresses {
			allowed = append(allowed, a.String())
		}
		return refusedf("listen address %s may not be used: the manager allows %s (%s)", listenAddress, orNone(allowed), ListenAddressesFlag)
	}
	if hostPort != 0 && hostPort < p.MinHostPort {
		return refusedf("host port %d may not be used: the manager allows host ports from %d on, or 0 for one the engine picks (%s)",
			hostPort, p.MinHostPort, MinHostPortFlag)
	}
	return nil
}

// CheckManagementInfrastructure returns an error unless a cluster of a namespace may run its
// nodes as Pods of the management cluster: they are privileged, so only namespaces the
// administrator trusts with the management cluster's hosts may.
func (p *Policy) CheckManagementInfrastructure(namespace string) error {
	if slices.Contains(p.ManagementInfrastructureNamespaces, AnyRepository) || slices.Contains(p.ManagementInfrastructureNamespaces, namespace) {
		return nil
	}
	return refusedf("spec.infrastructure.kubernetes names no kubeconfigSecret, so the nodes would be privileged Pods of the management cluster, "+
		"which the manager allows the namespaces %s and not %s (%s)", orNone(p.ManagementInfrastructureNamespaces), namespace, ManagementInfrastructureFlag)
}

// CheckHostEngine returns an error unless a cluster of a namespace may run its nodes on the
// manager's own engine, where root in a node (what the cluster's bootstrap commands get) is
// root on the engine's host.
func (p *Policy) CheckHostEngine(namespace string) error {
	if slices.Contains(p.HostEngineNamespaces, AnyNamespace) || slices.Contains(p.HostEngineNamespaces, namespace) {
		return nil
	}
	return refusedf("spec.infrastructure is empty, so the nodes would run on the manager's engine, which the manager allows the namespaces %s and not %s (%s): "+
		"name an infrastructure cluster in spec.infrastructure.kubernetes", orNone(p.HostEngineNamespaces), namespace, HostEngineFlag)
}

// CheckInMemory returns an error unless a cluster of a namespace may run its nodes in the
// manager's memory.
func (p *Policy) CheckInMemory(namespace string) error {
	if slices.Contains(p.InMemoryNamespaces, AnyNamespace) || slices.Contains(p.InMemoryNamespaces, namespace) {
		return nil
	}
	return refusedf("spec.infrastructure.inMemory runs the nodes in the manager's memory, which the manager allows the namespaces %s and not %s (%s)",
		orNone(p.InMemoryNamespaces), namespace, InMemoryFlag)
}

// CheckInfrastructureServer returns an error unless a kubeconfig Secret of a namespace may name
// server, the API server of an infrastructure cluster: its scheme, host and port must match an
// entry for the namespace or for every namespace. A server without a scheme is refused (the
// client would pick one from its TLS settings).
func (p *Policy) CheckInfrastructureServer(namespace, server string) error {
	u, err := url.Parse(server)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return refusedf("the kubeconfig's server %q is not a URL with a scheme (https://HOST[:PORT])", server)
	}
	port := 0
	if s := u.Port(); s != "" {
		port, _ = strconv.Atoi(s)
	}
	defaultPort := map[string]int{"https": 443, "http": 80}
	for _, sp := range p.InfrastructureServers {
		if sp.Namespace != "" && sp.Namespace != AnyNamespace && sp.Namespace != namespace {
			continue
		}
		if sp.Scheme != u.Scheme || (sp.Host != "*" && !strings.EqualFold(sp.Host, u.Hostname())) {
			continue
		}
		want := sp.Port
		if want == 0 && sp.Host != "*" {
			want = defaultPort[sp.Scheme]
		}
		if got := cmp.Or(port, defaultPort[u.Scheme]); want == 0 || want == got {
			return nil
		}
	}
	allowed := make([]string, 0, len(p.InfrastructureServers))
	for _, sp := range p.InfrastructureServers {
		allowed = append(allowed, sp.String())
	}
	return refusedf("the kubeconfig's server %s may not be used by namespace %s: the manager allows %s (%s)",
		u.Scheme+"://"+u.Host, namespace, orNone(allowed), InfrastructureServersFlag)
}

// CheckNetwork returns an error unless a cluster may join network name, which exists and which
// Dockyard did not make for it (the engine's host, none and bridge networks included).
func (p *Policy) CheckNetwork(name string) error {
	if slices.Contains(p.Networks, name) {
		return nil
	}
	return refusedf("network %s may not be joined: Dockyard did not make it for the cluster, and the manager allows %s (%s)",
		name, orNone(p.Networks), NetworksFlag)
}

// CheckSubnet returns an error unless a network Dockyard makes may take subnet: inside one of
// the pools, and overlapping neither a reserved range nor one of the ranges in use given
// (the management cluster's, the engine's networks, the host's routes at the time), nor a
// special-purpose one (loopback, link-local, multicast).
func (p *Policy) CheckSubnet(subnet string, inUse ...netip.Prefix) error {
	s, err := netip.ParsePrefix(subnet)
	if err != nil {
		return refusedf("subnet %s is not in CIDR notation", subnet)
	}
	s = s.Masked()
	addr := s.Addr()
	if addr.IsLoopback() || addr.IsLinkLocalUnicast() || addr.IsMulticast() || addr.IsUnspecified() ||
		s.Overlaps(linkLocal4) || s.Overlaps(linkLocal6) {
		return refusedf("subnet %s overlaps a special-purpose range (loopback, link-local, multicast)", subnet)
	}
	inPool := false
	for _, pool := range p.SubnetPools {
		if pool.Bits() <= s.Bits() && pool.Contains(addr) {
			inPool = true
			break
		}
	}
	if !inPool {
		pools := make([]string, 0, len(p.SubnetPools))
		for _, pool := range p.SubnetPools {
			pools = append(pools, pool.String())
		}
		return refusedf("subnet %s is outside the pools the manager allows, %s (%s)", subnet, orNone(pools), SubnetPoolsFlag)
	}
	for _, r := range p.ReservedSubnets {
		if s.Overlaps(r) {
			return refusedf("subnet %s overlaps %s, which the manager keeps reserved (%s)", subnet, r, ReservedSubnetsFlag)
		}
	}
	for _, r := range inUse {
		if s.Overlaps(r) {
			return refusedf("subnet %s overlaps %s, which is in use by the management cluster, the engine or the engine's host", subnet, r)
		}
	}
	return nil
}

var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
)

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// RefusedError says the policy does not allow something; its message names the flag.
type RefusedError struct{ msg string }

func (e *RefusedError) Error() string { return e.msg }

// Refusedf returns a RefusedError; other layers (the registry's owners) use it for refusals of
// the same kind.
func Refusedf(format string, args ...any) error {
	return &RefusedError{msg: fmt.Sprintf(format, args...)}
}

func refusedf(format string, args ...any) error { return Refusedf(format, args...) }

// IsRefused reports whether err is (or wraps) a refusal of the policy.
func IsRefused(err error) bool {
	var r *RefusedError
	return errors.As(err, &r)
}
