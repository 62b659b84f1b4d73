package webhooks

import (
	"context"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/patch"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

var (
	// minNodeCPU is the smallest CPU limit a container engine accepts (Docker: 0.01 CPUs).
	minNodeCPU = resource.MustParse("10m")
	// minNodeMemory is the smallest memory limit a node can boot with: systemd, containerd and
	// kubelet together need about 180Mi on a worker.
	minNodeMemory = resource.MustParse("256Mi")

	// reservedContainerPaths are mounted by Dockyard itself in every node container.
	reservedContainerPaths = sets.New("/", "/var", "/run", "/tmp", "/lib/modules")

	// reservedNetworkNames are the engine's own networks, which spec.network.name (a network
	// Dockyard creates) may not name.
	reservedNetworkNames = sets.New("host", "none", "bridge", "default", "podman")
)

// validateClusterSpec checks a DockyardCluster spec (also inside a template).
func validateClusterSpec(spec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	seen := sets.New[string]()
	for i, fd := range spec.FailureDomains {
		p := fldPath.Child("failureDomains").Index(i).Child("name")
		if seen.Has(fd.Name) {
			allErrs = append(allErrs, field.Duplicate(p, fd.Name))
		}
		seen.Insert(fd.Name)
	}

	if spec.LoadBalancer.Image != "" {
		allErrs = append(allErrs, validateImageRef(spec.LoadBalancer.Image, fldPath.Child("loadBalancer", "image"))...)
	}
	for i, img := range spec.LoadImages {
		allErrs = append(allErrs, validateImageRef(img, fldPath.Child("loadImages").Index(i))...)
	}
	allErrs = append(allErrs, validateNetwork(&spec.Network, fldPath.Child("network"))...)
	allErrs = append(allErrs, validateLoadBalancerHostPort(spec, fldPath)...)
	allErrs = append(allErrs, validateInfrastructure(spec, fldPath)...)
	return allErrs
}

// validateInfrastructure checks what a cluster whose nodes are Pods cannot have: networks,
// subnets and host ports are the engine host's, and a registry on the engine's host is not one
// the infrastructure cluster's nodes reach.
func validateInfrastructure(spec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	if spec.Infrastructure.InMemory != nil {
		return validateInMemory(spec, fldPath)
	}
	if spec.Infrastructure.Kubernetes == nil {
		return nil
	}
	var allErrs field.ErrorList
	why := "is the container engine host's; spec.infrastructure.kubernetes runs the nodes as Pods, whose network the infrastructure cluster gives"
	if spec.Network.Existing.Name != "" || len(spec.Network.Subnets) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("network"), why))
	}
	if spec.LoadBalancer.HostPort != 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("loadBalancer", "hostPort"), why+"; the endpoint is a Service"))
	}
	if spec.Registry != "" {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("registry"), "is a registry on the container engine's host, which the infrastructure cluster's nodes do not reach; "+
			"push images to a registry they pull from (dockyard push images)"))
	}
	return allErrs
}

// validateInMemory checks what a cluster whose nodes are in the manager's memory cannot have:
// an engine's network, a host port, a registry or images, which are the engine host's.
func validateInMemory(spec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	why := "is the container engine host's; spec.infrastructure.inMemory runs the nodes in the manager's memory"
	if spec.Network.Existing.Name != "" {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("network", "existing", "name"), why))
	}
	if spec.LoadBalancer.HostPort != 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("loadBalancer", "hostPort"), why+", and its API server listens on the manager's --in-memory-address"))
	}
	if spec.Registry != "" {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("registry"), why+", which runs no image"))
	}
	if len(spec.LoadImages) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("loadImages"), why+", which runs no image"))
	}
	return allErrs
}

// validateNetwork checks the network a cluster asks for: an existing one, or one Dockyard
// creates on subnets (one per family) it can split into fixed and engine addresses.
func validateNetwork(n *infrav1.NetworkSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if n.Existing.Name != "" && (n.Name != "" || len(n.Subnets) > 0) {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("existing"),
			"names a network that exists already; name and subnets describe the network Dockyard creates: set one or the other"))
	}
	if reservedNetworkNames.Has(n.Name) || strings.HasPrefix(n.Name, "dockyard-") {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), n.Name,
			"names a network Dockyard creates for the cluster: host, none and bridge are the engine's own and dockyard-* are Dockyard's; a network that exists already goes in spec.network.existing.name"))
	}
	families := map[bool]string{}
	for i, s := range n.Subnets {
		p := fldPath.Child("subnets").Index(i)
		prefix, err := netip.ParsePrefix(s)
		switch {
		case err != nil:
			allErrs = append(allErrs, field.Invalid(p, s, "must be a subnet in CIDR notation, for example 10.100.0.0/24"))
			continue
		case prefix.Masked() != prefix:
			allErrs = append(allErrs, field.Invalid(p, s, fmt.Sprintf("has host bits set; the subnet is %s", prefix.Masked())))
		case !prefix.Addr().Is4() && prefix.Bits() > 112:
			allErrs = append(allErrs, field.Invalid(p, s,
				"is too small: an IPv6 subnet must be a /112 or larger, its lower half holding a twin of every fixed IPv4 address"))
		case prefix.Addr().Is4() && prefix.Bits() > 28:
			allErrs = append(allErrs, field.Invalid(p, s,
				"is too small: Dockyard needs a /28 or larger, to give the lower half out as fixed addresses and leave the upper half to the engine"))
		}
		if other, ok := families[prefix.Addr().Is4()]; ok {
			allErrs = append(allErrs, field.Invalid(p, s, fmt.Sprintf("at most one subnet per IP family (%s is one already)", other)))
		}
		families[prefix.Addr().Is4()] = s
	}
	return allErrs
}

// validateClusterUpdate checks the fields of a DockyardCluster that may not change.
func validateClusterUpdate(oldSpec, newSpec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	oldEP, newEP := oldSpec.ControlPlaneEndpoint, newSpec.ControlPlaneEndpoint
	if oldEP.Host != "" && oldEP != newEP {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("controlPlaneEndpoint"),
			fmt.Sprintf("is immutable once set (was %s:%d): the workload cluster's certificates name it", oldEP.Host, oldEP.Port)))
	}
	if !equality.Semantic.DeepEqual(oldSpec.Network, newSpec.Network) {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("network"),
			"is immutable: the cluster's containers are attached to the network it named"))
	}
	allErrs = append(allErrs, validateLoadBalancerHostPortUpdate(oldSpec, newSpec, fldPath)...)
	if !equality.Semantic.DeepEqual(oldSpec.Infrastructure, newSpec.Infrastructure) {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("infrastructure"),
			"is immutable: the cluster's nodes run where it named"))
	}
	return allErrs
}

// validateMachineSpec checks a DockyardMachine spec (also inside a template).
func validateMachineSpec(spec *infrav1.DockyardMachineSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	if spec.Image != "" {
		allErrs = append(allErrs, validateImageRef(spec.Image, fldPath.Child("image"))...)
	}
	for i, img := range spec.PreLoadImages {
		allErrs = append(allErrs, validateImageRef(img, fldPath.Child("preLoadImages").Index(i))...)
	}

	containerPaths := sets.New[string]()
	for i, m := range spec.ExtraMounts {
		p := fldPath.Child("extraMounts").Index(i)
		allErrs = append(allErrs, validateAbsolutePath(m.HostPath, p.Child("hostPath"))...)
		allErrs = append(allErrs, validateAbsolutePath(m.ContainerPath, p.Child("containerPath"))...)
		clean := path.Clean(m.ContainerPath)
		if reservedContainerPaths.Has(clean) {
			allErrs = append(allErrs, field.Invalid(p.Child("containerPath"), m.ContainerPath,
				"is mounted by Dockyard in every node container; choose another path"))
		}
		if containerPaths.Has(clean) {
			allErrs = append(allErrs, field.Duplicate(p.Child("containerPath"), m.ContainerPath))
		}
		containerPaths.Insert(clean)
	}

	if spec.ProviderID != "" && !strings.HasPrefix(spec.ProviderID, infrav1.ProviderIDPrefix) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("providerID"), spec.ProviderID,
			fmt.Sprintf("must start with %s: Dockyard sets it to its node's ID and Cluster API matches Nodes by it", infrav1.ProviderIDPrefix)))
	}

	if spec.BootstrapTimeout != nil && spec.BootstrapTimeout.Duration <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("bootstrapTimeout"), spec.BootstrapTimeout.Duration.String(),
			"must be greater than zero"))
	}
	if spec.BootstrapTimeout != nil && spec.BootstrapTimeout.Duration > 0 && spec.BootstrapTimeout.Duration < 30*time.Second {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("bootstrapTimeout"), spec.BootstrapTimeout.Duration.String(),
			"must be at least 30s: kubeadm alone takes longer"))
	}

	allErrs = append(allErrs, validatePorts(spec.Ports, fldPath.Child("ports"))...)
	for i, p := range spec.ContainerdConfigPatches {
		if _, err := patch.TOML([]byte(p)); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("containerdConfigPatches").Index(i), p, err.Error()))
		}
	}
	for i, p := range spec.ContainerdConfigPatchesJSON6902 {
		if _, _, err := patch.JSON6902(p); err != nil {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("containerdConfigPatchesJSON6902").Index(i), p, err.Error()))
		}
	}
	if spec.DNSSearch != nil {
		seen := sets.New[string]()
		for i, d := range *spec.DNSSearch {
			p := fldPath.Child("dnsSearch").Index(i)
			for _, msg := range validation.IsDNS1123Subdomain(strings.TrimSuffix(d, ".")) {
				allErrs = append(allErrs, field.Invalid(p, d, "must be a DNS domain: "+msg))
			}
			if seen.Has(d) {
				allErrs = append(allErrs, field.Duplicate(p, d))
			}
			seen.Insert(d)
		}
	}

	if q := spec.Resources.CPU; q != nil && q.Cmp(minNodeCPU) < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("resources", "cpu"), q.String(),
			fmt.Sprintf("must be at least %s", minNodeCPU.String())))
	}
	if q := spec.Resources.Memory; q != nil && q.Cmp(minNodeMemory) < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("resources", "memory"), q.String(),
			fmt.Sprintf("must be at least %s: a node runs systemd, containerd and kubelet", minNodeMemory.String())))
	}
	return allErrs
}

// validatePorts checks a machine's port mappings: each container port and protocol once, each
// fixed host port, protocol and address once, addresses that are IP addresses.
func validatePorts(ports []infrav1.PortMapping, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	containerPorts, hostPorts := sets.New[string](), sets.New[string]()
	for i, pm := range ports {
		p := fldPath.Index(i)
		protocol := pm.Protocol
		if protocol == "" {
			protocol = "TCP"
		}
		key := fmt.Sprintf("%d/%s", pm.ContainerPort, protocol)
		if containerPorts.Has(key) {
			allErrs = append(allErrs, field.Duplicate(p.Child("containerPort"), key))
		}
		containerPorts.Insert(key)
		address := pm.ListenAddress
		if address == "" {
			address = "127.0.0.1"
		}
		if ip, err := netip.ParseAddr(address); err != nil || ip.Zone() != "" {
			allErrs = append(allErrs, field.Invalid(p.Child("listenAddress"), pm.ListenAddress, "must be an IP address of the engine's host, for example 127.0.0.1 or 0.0.0.0"))
		}
		if pm.HostPort == 0 {
			continue
		}
		hostKey := fmt.Sprintf("%s:%d/%s", address, pm.HostPort, protocol)
		if hostPorts.Has(hostKey) {
			allErrs = append(allErrs, field.Duplicate(p.Child("hostPort"), hostKey))
		}
		hostPorts.Insert(hostKey)
	}
	return allErrs
}

// validateMachineUpdate checks the fields of a DockyardMachine that may not change.
func validateMachineUpdate(oldSpec, newSpec *infrav1.DockyardMachineSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if oldSpec.Image != newSpec.Image {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("image"),
			"is immutable: the node container was created from it; roll out a new machine instead"))
	}
	if oldSpec.ProviderID != "" && oldSpec.ProviderID != newSpec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("providerID"), "is immutable once set"))
	}
	// Fields the engine or the node's first boot consumed: changing them needs a new node.
	for _, f := range []struct {
		name     string
		old, new any
		why      string
	}{
		{"ports", oldSpec.Ports, newSpec.Ports, "the engine publishes ports when it creates the node container"},
		{"containerdConfigPatches", oldSpec.ContainerdConfigPatches, newSpec.ContainerdConfigPatches,
			"they are merged into the node's containerd configuration before its bootstrap"},
		{"containerdConfigPatchesJSON6902", oldSpec.ContainerdConfigPatchesJSON6902, newSpec.ContainerdConfigPatchesJSON6902,
			"they are applied to the node's containerd configuration before its bootstrap"},
		{"dnsSearch", oldSpec.DNSSearch, newSpec.DNSSearch, "the engine writes the node's resolv.conf when it creates the node container"},
	} {
		if !equality.Semantic.DeepEqual(f.old, f.new) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(f.name), "is immutable: "+f.why+"; roll out a new machine instead"))
		}
	}
	return allErrs
}

func validateImageRef(ref string, fldPath *field.Path) field.ErrorList {
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return field.ErrorList{field.Invalid(fldPath, ref, fmt.Sprintf("is not a valid image reference: %v", err))}
	}
	return nil
}

// isImageRef is false for what validateImageRef reports, so policy checks do not report it twice.
func isImageRef(ref string) bool {
	_, err := reference.ParseNormalizedNamed(ref)
	return err == nil
}

func validateAbsolutePath(p string, fldPath *field.Path) field.ErrorList {
	if !path.IsAbs(p) {
		return field.ErrorList{field.Invalid(fldPath, p, "must be an absolute path")}
	}
	return nil
}

// checkMachinePolicy refuses what a DockyardMachine spec (of a machine in namespace) asks of the
// engine's host beyond the manager's policy: the node image, host paths to mount, images to
// load from the engine, host addresses and ports to publish on. With an old spec (an update) only
// what changes is checked, so tightening the policy never blocks updates of existing objects.
func checkMachinePolicy(p *policy.Policy, namespace string, oldSpec, newSpec *infrav1.DockyardMachineSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if newSpec.Image != "" && isImageRef(newSpec.Image) && (oldSpec == nil || oldSpec.Image != newSpec.Image) {
		if err := p.CheckImage(newSpec.Image); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("image"), err.Error()))
		}
	}
	mounted := sets.New[string]()
	loaded := sets.New[string]()
	published := sets.New[infrav1.PortMapping]()
	if oldSpec != nil {
		for _, m := range oldSpec.ExtraMounts {
			mounted.Insert(m.HostPath)
		}
		loaded.Insert(oldSpec.PreLoadImages...)
		published.Insert(oldSpec.Ports...)
	}
	for i, m := range newSpec.ExtraMounts {
		if mounted.Has(m.HostPath) {
			continue
		}
		if err := p.CheckHostPath(m.HostPath); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("extraMounts").Index(i).Child("hostPath"), err.Error()))
		}
	}
	allErrs = append(allErrs, checkLoadImages(p, namespace, loaded, newSpec.PreLoadImages, fldPath.Child("preLoadImages"))...)
	for i, pm := range newSpec.Ports {
		if published.Has(pm) {
			continue
		}
		if err := p.CheckPort(pm.ListenAddress, int(pm.HostPort)); err != nil {
			fld := fldPath.Child("ports").Index(i).Child("listenAddress")
			if strings.Contains(err.Error(), policy.MinHostPortFlag) {
				fld = fldPath.Child("ports").Index(i).Child("hostPort")
			}
			allErrs = append(allErrs, field.Forbidden(fld, err.Error()))
		}
	}
	return allErrs
}

// checkLoadImages refuses the images of a list, but those loaded already, that the policy does
// not let namespace load from the engine.
func checkLoadImages(p *policy.Policy, namespace string, loaded sets.Set[string], images []string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, img := range images {
		if loaded.Has(img) || !isImageRef(img) {
			continue
		}
		if err := p.CheckLoadImage(img, namespace); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Index(i), err.Error()))
		}
	}
	return allErrs
}

// checkClusterPolicy refuses what a DockyardCluster spec (of a cluster in namespace) asks beyond
// the manager's policy: the load balancer image, images to load into its nodes, a network it did
// not make, subnets (also against what env says is in use), a local registry that does not
// serve the namespace. On an update only what changes is checked.
func checkClusterPolicy(ctx context.Context, p *policy.Policy, env Environment, namespace string, oldSpec, newSpec *infrav1.DockyardClusterSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if img := newSpec.LoadBalancer.Image; img != "" && isImageRef(img) && (oldSpec == nil || oldSpec.LoadBalancer.Image != img) {
		if err := p.CheckImage(img); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("loadBalancer", "image"), err.Error()))
		}
	}
	if port := newSpec.LoadBalancer.HostPort; port != 0 && (oldSpec == nil || oldSpec.LoadBalancer.HostPort != port) {
		if err := p.CheckPort("127.0.0.1", int(port)); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("loadBalancer", "hostPort"), err.Error()))
		}
	}
	if newSpec.Infrastructure.Kubernetes == nil && newSpec.Infrastructure.InMemory == nil && oldSpec == nil {
		if err := p.CheckHostEngine(namespace); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("infrastructure"), err.Error()))
		}
	}
	if newSpec.Infrastructure.InMemory != nil && oldSpec == nil {
		if err := p.CheckInMemory(namespace); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("infrastructure", "inMemory"), err.Error()))
		}
	}
	if k := newSpec.Infrastructure.Kubernetes; k != nil && k.KubeconfigSecret == "" && oldSpec == nil {
		if err := p.CheckManagementInfrastructure(namespace); err != nil {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("infrastructure", "kubernetes", "kubeconfigSecret"), err.Error()))
		} else if k.Namespace != "" && k.Namespace != namespace {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("infrastructure", "kubernetes", "namespace"),
				"on the management cluster, a cluster's nodes run in its own namespace "+namespace))
		}
	}
	loaded := sets.New[string]()
	if oldSpec != nil {
		loaded.Insert(oldSpec.LoadImages...)
	}
	allErrs = append(allErrs, checkLoadImages(p, namespace, loaded, newSpec.LoadImages, fldPath.Child("loadImages"))...)
	if oldSpec == nil || !equality.Semantic.DeepEqual(oldSpec.Network, newSpec.Network) {
		n := &newSpec.Network
		if n.Existing.Name != "" {
			if err := p.CheckNetwork(n.Existing.Name); err != nil {
				allErrs = append(allErrs, field.Forbidden(fldPath.Child("network", "existing", "name"), err.Error()))
			}
		}
		var inUse []netip.Prefix
		if len(n.Subnets) > 0 && env.SubnetsInUse != nil {
			var err error
			if inUse, err = env.SubnetsInUse(ctx); err != nil {
				allErrs = append(allErrs, field.InternalError(fldPath.Child("network", "subnets"), err))
			}
		}
		for i, s := range n.Subnets {
			if _, err := netip.ParsePrefix(s); err != nil {
				continue // validateNetwork says so
			}
			if err := p.CheckSubnet(s, inUse...); err != nil {
				allErrs = append(allErrs, field.Forbidden(fldPath.Child("network", "subnets").Index(i), err.Error()))
			}
		}
	}
	if newSpec.Registry != "" && env.Registries != nil && (oldSpec == nil || oldSpec.Registry != newSpec.Registry) {
		if err := env.Registries.CheckRegistryNamespace(ctx, newSpec.Registry, namespace); policy.IsRefused(err) {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("registry"), err.Error()))
		} else if err != nil {
			allErrs = append(allErrs, field.InternalError(fldPath.Child("registry"), err))
		}
	}
	return allErrs
}

// Environment is what the cluster webhooks look up beyond the policy; a nil field is not
// looked up (the controllers still check it before they create anything).
type Environment struct {
	// Registries tells which namespaces the engine's local registries serve.
	Registries Registries
	// SubnetsInUse returns the subnets the management cluster and the engine's host use now.
	SubnetsInUse policy.SubnetsFunc
}

// Registries tells whether a local registry on the engine serves a namespace.
type Registries interface {
	// CheckRegistryNamespace returns a policy refusal (policy.IsRefused) when registry name
	// exists and does not serve namespace; nil when it serves it or does not exist (the
	// cluster waits for it); any other error when the engine cannot tell.
	CheckRegistryNamespace(ctx context.Context, name, namespace string) error
}

// validateFaultAnnotations checks the faults a DockyardMachine's annotations inject
// (infrav1.FaultsOf): the stop annotation names only services Dockyard can stop, the delays are
// durations.
func validateFaultAnnotations(annotations map[string]string) field.ErrorList {
	_, errs := infrav1.FaultsOf(annotations)
	return errs
}
