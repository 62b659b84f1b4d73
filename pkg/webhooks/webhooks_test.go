package webhooks

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	"github.com/dockyard-dev/dockyard/test/envtest"
)

const testLBImage = "localhost/dockyard/haproxy:test"

var env *envtest.Environment

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	env, err = envtest.Start(ctx, envtest.Options{
		Setup: func(_ context.Context, mgr ctrl.Manager) error {
			// The policy of a manager whose administrator allows mounting the engine's socket,
			// loading the CNI and pause images, and joining the network "shared"; the management
			// cluster's Services are on 10.96.0.0/12.
			cfg := policy.DefaultConfig()
			cfg.HostPaths = []string{"/var/run/docker.sock"}
			cfg.LoadImageRepositories = append(cfg.LoadImageRepositories, "localhost/dockyard/flannel", "registry.k8s.io/pause")
			cfg.Networks = []string{"shared"}
			cfg.ReservedSubnets = []string{"10.96.0.0/12"}
			p, err := policy.New(cfg)
			if err != nil {
				return err
			}
			return SetupWithManager(mgr, Options{DefaultLoadBalancerImage: testLBImage, Policy: p, Environment: Environment{Registries: testRegistries{}, SubnetsInUse: testSubnetsInUse}})
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test environment: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the test environment: %v\n", err)
	}
	os.Exit(code)
}

func namespace(t *testing.T) string {
	t.Helper()
	ns, err := env.CreateNamespace(context.Background(), "webhooks")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// expectRejected asserts that the API server rejected a request as invalid and that the
// message names every given field path.
func expectRejected(t *testing.T, err error, fields ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected the API server to reject the object (fields %v), but it was accepted", fields)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
		t.Fatalf("expected an Invalid error naming %v, got: %v", fields, err)
	}
	for _, f := range fields {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("rejection message does not name %q:\n%v", f, err)
		}
	}
}

func validMachineSpec() infrav1.DockyardMachineSpec {
	cpu, mem := resource.MustParse("1500m"), resource.MustParse("2Gi")
	return infrav1.DockyardMachineSpec{
		Image:            "localhost/dockyard/node:v1.34.4",
		PreLoadImages:    []string{"localhost/dockyard/flannel:v0.28.4", "registry.k8s.io/pause:3.10.1"},
		ExtraMounts:      []infrav1.Mount{{HostPath: "/var/run/docker.sock", ContainerPath: "/var/run/docker.sock", ReadOnly: true}},
		BootstrapTimeout: &metav1.Duration{Duration: 10 * time.Minute},
		Resources:        infrav1.NodeResources{CPU: &cpu, Memory: &mem},
	}
}

func validClusterSpec() infrav1.DockyardClusterSpec {
	return infrav1.DockyardClusterSpec{
		FailureDomains: []clusterv1.FailureDomain{
			{Name: "fd1", ControlPlane: ptrTo(true), Attributes: map[string]string{"rack": "a"}},
			{Name: "fd2"},
		},
		LoadBalancer: infrav1.LoadBalancerSpec{ConfigTemplateRef: &infrav1.ConfigMapReference{Name: "my-haproxy"}},
		Network:      infrav1.NetworkSpec{Name: "my-net"},
	}
}

func ptrTo[T any](v T) *T { return &v }

// testSubnetsInUse says the engine's host routes 172.30.0.0/16.
func testSubnetsInUse(context.Context) ([]netip.Prefix, error) {
	return []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}, nil
}

// testRegistries knows two local registries: team-a-registry serves namespaces whose name
// starts with "webhooks" (the tests'), team-b-registry serves team-b only; any other is not on
// the engine, and "broken" cannot be looked at.
type testRegistries struct{}

func (testRegistries) CheckRegistryNamespace(_ context.Context, name, namespace string) error {
	switch {
	case name == "broken":
		return errors.New("the engine does not answer")
	case name == "team-a-registry" && strings.HasPrefix(namespace, "webhooks"):
		return nil
	case name == "team-b-registry":
		return policy.Refusedf("local registry %s serves namespaces team-b, not %s", name, namespace)
	}
	return nil
}

func TestEveryKindAcceptsAValidSample(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)

	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns}, Spec: validClusterSpec()}
	dct := &infrav1.DockyardClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct1", Namespace: ns},
		Spec: infrav1.DockyardClusterTemplateSpec{Template: infrav1.DockyardClusterTemplateResource{
			ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"team": "a"}},
			Spec:       validClusterSpec(),
		}}}
	dm := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: ns}, Spec: validMachineSpec()}
	dmt := &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mt1", Namespace: ns},
		Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{Spec: validMachineSpec()}}}

	for _, obj := range []client.Object{dc, dct, dm, dmt} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("creating a valid %T: %v", obj, err)
		}
	}

	// The defaulting webhooks filled the endpoint port and the load balancer image of the
	// cluster, and the image of the template: its clusters' ports are theirs to default (a
	// ClusterClass patch may make them in-memory clusters, whose port the manager chooses).
	if dc.Spec.ControlPlaneEndpoint.Port != infrav1.DefaultAPIServerPort || dc.Spec.LoadBalancer.Image != testLBImage {
		t.Errorf("DockyardCluster defaults: got port %d image %q", dc.Spec.ControlPlaneEndpoint.Port, dc.Spec.LoadBalancer.Image)
	}
	if got := dct.Spec.Template.Spec; got.ControlPlaneEndpoint.Port != 0 || got.LoadBalancer.Image != testLBImage {
		t.Errorf("DockyardClusterTemplate defaults: got port %d image %q, want no port and the image", got.ControlPlaneEndpoint.Port, got.LoadBalancer.Image)
	}

	// Status fields of the contract are accepted through the status subresource.
	dc.Status = infrav1.DockyardClusterStatus{
		Initialization: infrav1.DockyardClusterInitializationStatus{Provisioned: ptrTo(true)},
		FailureDomains: dc.Spec.FailureDomains,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: infrav1.ReadyReason,
			LastTransitionTime: metav1.Now()}},
	}
	if err := env.Client.Status().Update(ctx, dc); err != nil {
		t.Fatalf("updating DockyardCluster status: %v", err)
	}
	dm.Status = infrav1.DockyardMachineStatus{
		Initialization: infrav1.DockyardMachineInitializationStatus{Provisioned: ptrTo(true)},
		Addresses:      clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: "c1-m1"}, {Type: clusterv1.MachineInternalIP, Address: "192.0.2.10"}},
		FailureDomain:  "fd1",
	}
	if err := env.Client.Status().Update(ctx, dm); err != nil {
		t.Fatalf("updating DockyardMachine status: %v", err)
	}
	// The providerID can be set once.
	dm.Spec.ProviderID = infrav1.ProviderIDPrefix + "c1-m1"
	if err := env.Client.Update(ctx, dm); err != nil {
		t.Fatalf("setting providerID: %v", err)
	}
}

func TestDockyardClusterRejectsInvalidSpecs(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	tests := []struct {
		name   string
		mutate func(*infrav1.DockyardClusterSpec)
		fields []string
	}{
		{"duplicate failure domain names", func(s *infrav1.DockyardClusterSpec) {
			s.FailureDomains = append(s.FailureDomains, clusterv1.FailureDomain{Name: "fd1"})
		}, []string{"spec.failureDomains[2]"}},
		{"invalid load balancer image", func(s *infrav1.DockyardClusterSpec) {
			s.LoadBalancer.Image = "Not An Image"
		}, []string{"spec.loadBalancer.image"}},
		{"invalid image to load", func(s *infrav1.DockyardClusterSpec) {
			s.LoadImages = []string{"app:dev", "App:Dev"}
		}, []string{"spec.loadImages[1]"}},
		{"load balancer image from another repository", func(s *infrav1.DockyardClusterSpec) {
			s.LoadBalancer.Image = "registry.example.internal/haproxy:2"
		}, []string{"spec.loadBalancer.image", "--allowed-image-repositories"}},
		{"invalid network name", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Name = "-bad name"
		}, []string{"spec.network.name"}},
		{"endpoint port out of range", func(s *infrav1.DockyardClusterSpec) {
			s.ControlPlaneEndpoint.Port = 70000
		}, []string{"spec.controlPlaneEndpoint.port"}},
		{"load balancer host port out of range", func(s *infrav1.DockyardClusterSpec) {
			s.LoadBalancer.HostPort = 70000
		}, []string{"spec.loadBalancer.hostPort"}},
		{"existing network together with a network to create", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Existing.Name = "shared"
		}, []string{"spec.network", "set one or the other"}},
		{"existing network together with subnets", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "shared"}, Subnets: []string{"10.200.0.0/24"}}
		}, []string{"spec.network", "set one or the other"}},
		{"invalid existing network name", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "bad name"}}
		}, []string{"spec.network.existing.name"}},
		{"subnet that is no CIDR", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"10.200.0.0"}
		}, []string{"spec.network.subnets[0]", "CIDR"}},
		{"subnet with host bits", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"10.200.0.1/24"}
		}, []string{"spec.network.subnets[0]", "10.200.0.0/24"}},
		{"subnet too small to split", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"10.200.0.0/29"}
		}, []string{"spec.network.subnets[0]", "/28 or larger"}},
		{"IPv6 subnet too small", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"10.200.0.0/24", "fd00:10::/120"}
		}, []string{"spec.network.subnets[1]", "/112 or larger"}},
		{"two IPv6 subnets", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"fd00:10::/64", "fd00:11::/64"}
		}, []string{"spec.network.subnets[1]", "at most one subnet per IP family"}},
		{"two IPv4 subnets", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"10.200.0.0/24", "10.201.0.0/24"}
		}, []string{"spec.network.subnets[1]", "at most one subnet per IP family"}},
		{"three subnets", func(s *infrav1.DockyardClusterSpec) {
			s.Network.Subnets = []string{"10.200.0.0/24", "10.201.0.0/24", "10.202.0.0/24"}
		}, []string{"spec.network.subnets", "must have at most 2 items"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := validClusterSpec()
			tt.mutate(&spec)
			obj := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d", i), Namespace: ns}, Spec: spec}
			expectRejected(t, env.Client.Create(ctx, obj), tt.fields...)
		})
	}
}

func TestDockyardClusterImmutableFields(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: validClusterSpec()}
	if err := env.Client.Create(ctx, dc); err != nil {
		t.Fatal(err)
	}
	// Dockyard fills the endpoint host once; that is allowed.
	dc.Spec.ControlPlaneEndpoint.Host = "192.0.2.10"
	if err := env.Client.Update(ctx, dc); err != nil {
		t.Fatalf("setting the endpoint host: %v", err)
	}

	moved := dc.DeepCopy()
	moved.Spec.ControlPlaneEndpoint.Host = "192.0.2.11"
	expectRejected(t, env.Client.Update(ctx, moved), "spec.controlPlaneEndpoint", "immutable")

	// An update that does not say the endpoint (a whole object replaced from the manifest the
	// user wrote, as Cluster API's KCP adoption spec does) keeps it.
	replaced := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, ResourceVersion: dc.ResourceVersion},
		Spec: validClusterSpec()}
	replaced.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{}
	if err := env.Client.Update(ctx, replaced); err != nil {
		t.Fatalf("replacing the object without its endpoint: %v", err)
	}
	if ep := replaced.Spec.ControlPlaneEndpoint; ep.Host != "192.0.2.10" || ep.Port != infrav1.DefaultAPIServerPort {
		t.Errorf("the endpoint after a replace without it: %+v, want the one set before", ep)
	}
	dc = replaced

	renet := dc.DeepCopy()
	renet.Spec.Network.Name = "other-net"
	expectRejected(t, env.Client.Update(ctx, renet), "spec.network", "immutable")

	resubnet := dc.DeepCopy()
	resubnet.Spec.Network.Subnets = []string{"10.200.0.0/24"}
	expectRejected(t, env.Client.Update(ctx, resubnet), "spec.network", "immutable")

	// Neither can a cluster on Dockyard's own network move to an existing one, nor back.
	own := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns}}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	toShared := own.DeepCopy()
	toShared.Spec.Network.Existing.Name = "shared"
	expectRejected(t, env.Client.Update(ctx, toShared), "spec.network", "immutable")

	shared := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Spec: infrav1.DockyardClusterSpec{Network: infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "shared"}}}}
	if err := env.Client.Create(ctx, shared); err != nil {
		t.Fatal(err)
	}
	toOwn := shared.DeepCopy()
	toOwn.Spec.Network = infrav1.NetworkSpec{}
	expectRejected(t, env.Client.Update(ctx, toOwn), "spec.network", "immutable")
}

// spec.loadBalancer.hostPort is set once (by the user at creation, or by Dockyard with the
// port the engine picked) and kept: the load balancer is published there and the kubeconfig
// written at creation names it.
func TestDockyardClusterHostPortIsKeptOnceSet(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: validClusterSpec()}
	if err := env.Client.Create(ctx, dc); err != nil {
		t.Fatal(err)
	}
	// Dockyard writes the port the engine picked; that is allowed.
	dc.Spec.LoadBalancer.HostPort = 32768
	if err := env.Client.Update(ctx, dc); err != nil {
		t.Fatalf("setting the host port: %v", err)
	}

	moved := dc.DeepCopy()
	moved.Spec.LoadBalancer.HostPort = 32769
	expectRejected(t, env.Client.Update(ctx, moved), "spec.loadBalancer.hostPort", "immutable", "32768")

	// An update that does not say it (the object replaced from its manifest) keeps it.
	replaced := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns, ResourceVersion: dc.ResourceVersion},
		Spec: validClusterSpec()}
	if err := env.Client.Update(ctx, replaced); err != nil {
		t.Fatalf("replacing the object without its host port: %v", err)
	}
	if replaced.Spec.LoadBalancer.HostPort != 32768 {
		t.Errorf("host port after a replace without it: %d, want 32768", replaced.Spec.LoadBalancer.HostPort)
	}

	// One the user sets at creation is kept the same way.
	chosen := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "chosen", Namespace: ns}, Spec: validClusterSpec()}
	chosen.Spec.LoadBalancer.HostPort = 16443
	if err := env.Client.Create(ctx, chosen); err != nil {
		t.Fatalf("creating a cluster with a host port: %v", err)
	}
	rechosen := chosen.DeepCopy()
	rechosen.Spec.LoadBalancer.HostPort = 16444
	expectRejected(t, env.Client.Update(ctx, rechosen), "spec.loadBalancer.hostPort", "immutable")
}

// The network variants a user writes are accepted as written, and an empty existing name (what
// a clusterctl variable left unset renders) is the same as none.
// A cluster whose nodes are Pods of an infrastructure cluster cannot ask for what belongs to
// the container engine's host, and cannot move to another infrastructure.
func TestDockyardClusterOnKubernetes(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	onKubernetes := func() infrav1.DockyardClusterSpec {
		s := validClusterSpec()
		s.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
		return s
	}
	for name, tc := range map[string]struct {
		mutate func(*infrav1.DockyardClusterSpec)
		says   string
	}{
		"a subnet":         {func(s *infrav1.DockyardClusterSpec) { s.Network.Subnets = []string{"10.200.0.0/24"} }, "spec.network"},
		"a host port":      {func(s *infrav1.DockyardClusterSpec) { s.LoadBalancer.HostPort = 6443 }, "spec.loadBalancer.hostPort"},
		"a local registry": {func(s *infrav1.DockyardClusterSpec) { s.Registry = "team-a-registry" }, "spec.registry"},
	} {
		spec := onKubernetes()
		tc.mutate(&spec)
		dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "k-", Namespace: ns}, Spec: spec}
		t.Run(name, func(t *testing.T) { expectRejected(t, env.Client.Create(ctx, dc), tc.says) })
	}
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "on-kubernetes", Namespace: ns}, Spec: onKubernetes()}
	if err := env.Client.Create(ctx, dc); err != nil {
		t.Fatalf("a cluster on a Kubernetes infrastructure was refused: %v", err)
	}
	dc.Spec.Infrastructure.Kubernetes.KubeconfigSecret = "other"
	expectRejected(t, env.Client.Update(ctx, dc), "spec.infrastructure", "immutable")
}

func TestDockyardClusterNetworkVariants(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for name, network := range map[string]infrav1.NetworkSpec{
		"existing": {Existing: infrav1.ExistingNetworkSpec{Name: "shared"}},
		"created":  {Name: "custom", Subnets: []string{"10.200.0.0/24"}},
		"subnet":   {Subnets: []string{"192.168.200.0/28"}},
		"dual":     {Subnets: []string{"10.200.0.0/24", "fd00:100::/64"}},
		"ipv6":     {Subnets: []string{"fd00:100::/112"}},
		"default":  {},
	} {
		dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: infrav1.DockyardClusterSpec{Network: network}}
		if err := env.Client.Create(ctx, dc); err != nil {
			t.Errorf("network %s (%+v) rejected: %v", name, network, err)
			continue
		}
		if !reflect.DeepEqual(dc.Spec.Network, network) {
			t.Errorf("network %s stored as %+v, want %+v", name, dc.Spec.Network, network)
		}
	}

	// What the default flavor renders when DOCKYARD_NETWORK is empty.
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": "DockyardCluster",
		"metadata": map[string]any{"name": "from-flavor", "namespace": ns},
		"spec":     map[string]any{"network": map[string]any{"existing": map[string]any{"name": ""}}},
	}}
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("an empty spec.network.existing.name was rejected: %v", err)
	}
	dc := &infrav1.DockyardCluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "from-flavor"}, dc); err != nil {
		t.Fatal(err)
	}
	if got := dc.Spec.Network.NetworkName(); got != "" {
		t.Errorf("an empty existing name selects network %q, want Dockyard's default", got)
	}
}

func TestDockyardMachineRejectsInvalidSpecs(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	tests := []struct {
		name   string
		mutate func(*infrav1.DockyardMachineSpec)
		fields []string
	}{
		{"relative host path", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts[0].HostPath = "var/run/docker.sock"
		}, []string{"spec.extraMounts[0].hostPath", "absolute"}},
		{"relative container path", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts[0].ContainerPath = "data"
		}, []string{"spec.extraMounts[0].containerPath", "absolute"}},
		{"duplicate container path", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts = append(s.ExtraMounts, infrav1.Mount{HostPath: "/tmp/x", ContainerPath: "/var/run/docker.sock/"})
		}, []string{"spec.extraMounts[1].containerPath", "Duplicate"}},
		{"reserved container path", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts[0].ContainerPath = "/var"
		}, []string{"spec.extraMounts[0].containerPath", "mounted by Dockyard"}},
		{"cpu too small", func(s *infrav1.DockyardMachineSpec) {
			q := resource.MustParse("1m")
			s.Resources.CPU = &q
		}, []string{"spec.resources.cpu"}},
		{"memory too small", func(s *infrav1.DockyardMachineSpec) {
			q := resource.MustParse("100Mi")
			s.Resources.Memory = &q
		}, []string{"spec.resources.memory"}},
		{"invalid image", func(s *infrav1.DockyardMachineSpec) {
			s.Image = "dockyard/Node:v1.34.4"
		}, []string{"spec.image"}},
		{"invalid preload image", func(s *infrav1.DockyardMachineSpec) {
			s.PreLoadImages[1] = "bad image"
		}, []string{"spec.preLoadImages[1]"}},
		{"bootstrap timeout too short", func(s *infrav1.DockyardMachineSpec) {
			s.BootstrapTimeout = &metav1.Duration{Duration: 5 * time.Second}
		}, []string{"spec.bootstrapTimeout"}},
		{"negative bootstrap timeout", func(s *infrav1.DockyardMachineSpec) {
			s.BootstrapTimeout = &metav1.Duration{Duration: -time.Minute}
		}, []string{"spec.bootstrapTimeout"}},
		// What the manager's policy does not allow: the host's root, however spelled, and any
		// other path; images from other repositories; another provider's IDs.
		{"the host's root", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts[0].HostPath = "/"
		}, []string{"spec.extraMounts[0].hostPath", "may not be mounted", "--allowed-host-paths", "DOCKYARD_ALLOWED_HOST_PATHS"}},
		{"the host's root through ..", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts[0].HostPath = "/tmp/.."
		}, []string{"spec.extraMounts[0].hostPath", "--allowed-host-paths"}},
		{"a path out of the allowed one", func(s *infrav1.DockyardMachineSpec) {
			s.ExtraMounts[0].HostPath = "/var/run/docker.sock/../../../etc"
		}, []string{"spec.extraMounts[0].hostPath", "--allowed-host-paths"}},
		{"an image from another repository", func(s *infrav1.DockyardMachineSpec) {
			s.Image = "alpine:3"
		}, []string{"spec.image", "docker.io/library/alpine", "--allowed-image-repositories"}},
		{"another provider's ID", func(s *infrav1.DockyardMachineSpec) {
			s.ProviderID = "aws:///x"
		}, []string{"spec.providerID", infrav1.ProviderIDPrefix}},
		{"a container port twice", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 30080}, {ContainerPort: 30080, Protocol: "TCP", HostPort: 8081}}
		}, []string{"spec.ports[1].containerPort", "Duplicate", "30080/TCP"}},
		{"a host port twice", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 80, HostPort: 8080}, {ContainerPort: 443, HostPort: 8080, ListenAddress: "127.0.0.1"}}
		}, []string{"spec.ports[1].hostPort", "127.0.0.1:8080/TCP"}},
		{"a listen address that is no address", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 80, ListenAddress: "localhost"}}
		}, []string{"spec.ports[0].listenAddress", "IP address"}},
		{"a container port out of range", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 70000}}
		}, []string{"spec.ports[0].containerPort"}},
		{"an unknown protocol", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 80, Protocol: "tcp"}}
		}, []string{"spec.ports[0].protocol"}},
		{"a search domain that is no domain", func(s *infrav1.DockyardMachineSpec) {
			s.DNSSearch = &[]string{"example.com", "not a domain"}
		}, []string{"spec.dnsSearch[1]", "DNS domain"}},
		{"a containerd patch that is not TOML", func(s *infrav1.DockyardMachineSpec) {
			s.ContainerdConfigPatches = []string{"[debug]\nlevel = \"debug\"", "[plugins"}
		}, []string{"spec.containerdConfigPatches[1]", "TOML"}},
		{"a containerd JSON 6902 patch that is none", func(s *infrav1.DockyardMachineSpec) {
			s.ContainerdConfigPatchesJSON6902 = []string{"op: add"}
		}, []string{"spec.containerdConfigPatchesJSON6902[0]", "JSON 6902"}},
		{"a search domain twice", func(s *infrav1.DockyardMachineSpec) {
			s.DNSSearch = &[]string{"example.com", "example.com"}
		}, []string{"spec.dnsSearch[1]", "Duplicate"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := validMachineSpec()
			tt.mutate(&spec)
			obj := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d", i), Namespace: ns}, Spec: spec}
			expectRejected(t, env.Client.Create(ctx, obj), tt.fields...)
		})
	}
}

// The faults a DockyardMachine's annotations inject are checked when it is created and when the
// annotations change: a service Dockyard cannot stop, a boot delay that is no duration.
func TestDockyardMachineFaultAnnotations(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dm := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{Name: "faults", Namespace: ns,
		Annotations: map[string]string{infrav1.StopAnnotation: "kubelet,sshd"}}, Spec: validMachineSpec()}
	expectRejected(t, env.Client.Create(ctx, dm), "metadata.annotations[dockyard.x-k8s.io/stop]", `"sshd"`, "kubelet")
	dm.Annotations = map[string]string{infrav1.BootDelayAnnotation: "soon"}
	expectRejected(t, env.Client.Create(ctx, dm), "metadata.annotations[dockyard.x-k8s.io/boot-delay]", "45s")

	dm.Annotations = map[string]string{infrav1.NetworkDelayAnnotation: "1m"}
	expectRejected(t, env.Client.Create(ctx, dm), "metadata.annotations[dockyard.x-k8s.io/network-delay]", "at most 10s")

	dm.Annotations = map[string]string{infrav1.StopAnnotation: "kubelet, etcd", infrav1.BootDelayAnnotation: "30s", infrav1.NetworkDelayAnnotation: "200ms"}
	if err := env.Client.Create(ctx, dm); err != nil {
		t.Fatalf("valid faults refused: %v", err)
	}
	dm.Annotations[infrav1.StopAnnotation] = "kube-proxy"
	expectRejected(t, env.Client.Update(ctx, dm), "metadata.annotations[dockyard.x-k8s.io/stop]", `"kube-proxy"`)
}

// An unparsable quantity cannot be built with the Go types; send it as unstructured.
func TestDockyardMachineRejectsMalformedQuantity(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(),
		"kind":       "DockyardMachine",
		"metadata":   map[string]any{"name": "bad-quantity", "namespace": ns},
		"spec":       map[string]any{"resources": map[string]any{"memory": "2 gigs"}},
	}}
	expectRejected(t, env.Client.Create(ctx, u), "spec.resources.memory")
}

func TestDockyardMachineImmutableFields(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dm := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: ns}, Spec: validMachineSpec()}
	if err := env.Client.Create(ctx, dm); err != nil {
		t.Fatal(err)
	}
	reimage := dm.DeepCopy()
	reimage.Spec.Image = "localhost/dockyard/node:v1.34.5"
	expectRejected(t, env.Client.Update(ctx, reimage), "spec.image", "immutable")

	dm.Spec.ProviderID = infrav1.ProviderIDPrefix + "m"
	if err := env.Client.Update(ctx, dm); err != nil {
		t.Fatalf("setting providerID the first time: %v", err)
	}
	reid := dm.DeepCopy()
	reid.Spec.ProviderID = infrav1.ProviderIDPrefix + "other"
	expectRejected(t, env.Client.Update(ctx, reid), "spec.providerID", "immutable")

	reports := dm.DeepCopy()
	reports.Spec.Ports = []infrav1.PortMapping{{ContainerPort: 80, HostPort: 8080}}
	expectRejected(t, env.Client.Update(ctx, reports), "spec.ports", "immutable")

	repatch := dm.DeepCopy()
	repatch.Spec.ContainerdConfigPatches = []string{"[debug]\nlevel = \"debug\""}
	expectRejected(t, env.Client.Update(ctx, repatch), "spec.containerdConfigPatches", "immutable")
	repatch = dm.DeepCopy()
	repatch.Spec.ContainerdConfigPatchesJSON6902 = []string{"[]"}
	expectRejected(t, env.Client.Update(ctx, repatch), "spec.containerdConfigPatchesJSON6902", "immutable")

	research := dm.DeepCopy()
	research.Spec.DNSSearch = &[]string{}
	expectRejected(t, env.Client.Update(ctx, research), "spec.dnsSearch", "immutable")
}

func TestTemplatesAreImmutableExceptTopologyDryRun(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	dmt := &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mt", Namespace: ns},
		Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{Spec: validMachineSpec()}}}
	dct := &infrav1.DockyardClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct", Namespace: ns},
		Spec: infrav1.DockyardClusterTemplateSpec{Template: infrav1.DockyardClusterTemplateResource{Spec: validClusterSpec()}}}
	for _, obj := range []client.Object{dmt, dct} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	changedMachine := dmt.DeepCopy()
	changedMachine.Spec.Template.Spec.PreLoadImages = []string{"registry.k8s.io/pause:3.10.1"}
	changedCluster := dct.DeepCopy()
	changedCluster.Spec.Template.Spec.Network.Name = "another"

	for _, obj := range []client.Object{changedMachine, changedCluster} {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			expectRejected(t, env.Client.Update(ctx, obj.DeepCopyObject().(client.Object)), "spec.template.spec", "immutable")
			// A plain dry-run is still rejected...
			expectRejected(t, env.Client.Update(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll), "spec.template.spec")
			// ...but the topology controller's dry-run (marked by its annotation) is tolerated.
			dry := obj.DeepCopyObject().(client.Object)
			dry.SetAnnotations(map[string]string{clusterv1.TopologyDryRunAnnotation: ""})
			if err := env.Client.Update(ctx, dry, client.DryRunAll); err != nil {
				t.Fatalf("topology dry-run rejected: %v", err)
			}
		})
	}
}

func TestTemplatesRejectInvalidSpecs(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	mspec := validMachineSpec()
	mspec.ExtraMounts[0].HostPath = "relative"
	dmt := &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mt", Namespace: ns},
		Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{Spec: mspec}}}
	expectRejected(t, env.Client.Create(ctx, dmt), "spec.template.spec.extraMounts[0].hostPath")

	cspec := validClusterSpec()
	cspec.LoadBalancer.Image = "Bad Image"
	dct := &infrav1.DockyardClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: "ct", Namespace: ns},
		Spec: infrav1.DockyardClusterTemplateSpec{Template: infrav1.DockyardClusterTemplateResource{Spec: cspec}}}
	expectRejected(t, env.Client.Create(ctx, dct), "spec.template.spec.loadBalancer.image")

	badMeta := &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mt2", Namespace: ns},
		Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{
			ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"bad key!": "x"}},
			Spec:       validMachineSpec(),
		}}}
	expectRejected(t, env.Client.Create(ctx, badMeta), "spec.template.metadata.labels")

	rootMount := validMachineSpec()
	rootMount.ExtraMounts[0].HostPath = "/"
	rootMount.Image = "alpine:3"
	dmt3 := &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "mt3", Namespace: ns},
		Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{Spec: rootMount}}}
	expectRejected(t, env.Client.Create(ctx, dmt3), "spec.template.spec.extraMounts[0].hostPath", "spec.template.spec.image", "--allowed-host-paths")
}

// Tightening the policy must not block updates of objects admitted before (Cluster API keeps
// updating their labels and owner references): only what changes is checked.
func TestPolicyChecksOnlyWhatChanges(t *testing.T) {
	strict := policy.Default()
	// Mounts the engine's socket and preloads two images, which the default policy refuses.
	old := validMachineSpec()
	old.Ports = []infrav1.PortMapping{{ContainerPort: 80, HostPort: 80, ListenAddress: "0.0.0.0"}}
	updated := old.DeepCopy()
	if errs := checkMachinePolicy(strict, "ns", &old, updated, nil); len(errs) != 0 {
		t.Errorf("unchanged fields were refused: %v", errs)
	}
	updated.ExtraMounts = append(updated.ExtraMounts, infrav1.Mount{HostPath: "/etc", ContainerPath: "/host-etc"})
	if errs := checkMachinePolicy(strict, "ns", &old, updated, nil); len(errs) != 1 || !strings.Contains(errs[0].Error(), "/etc") {
		t.Errorf("an added mount was not refused: %v", errs)
	}
	if errs := checkMachinePolicy(strict, "ns", nil, &old, nil); len(errs) != 4 {
		t.Errorf("a new object's mount, two images and port were not all refused: %v", errs)
	}
	oldCluster := infrav1.DockyardClusterSpec{LoadImages: []string{"app:dev"}, Network: infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "host"}}}
	updatedCluster := oldCluster.DeepCopy()
	updatedCluster.LoadImages = append(updatedCluster.LoadImages, "localhost/ns/app:dev")
	if errs := checkClusterPolicy(context.Background(), strict, Environment{Registries: testRegistries{}}, "ns", &oldCluster, updatedCluster, nil); len(errs) != 0 {
		t.Errorf("unchanged fields of a cluster were refused: %v", errs)
	}
}

// What a team with rights in one namespace could ask to reach outside it, each refused by the
// webhooks with the field and the flag named.
func TestPolicyRefusesWhatReachesOutsideTheNamespace(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	clusters := []struct {
		name   string
		mutate func(*infrav1.DockyardClusterSpec)
		says   []string
	}{
		{"another team's images and the manager's own", func(s *infrav1.DockyardClusterSpec) {
			s.LoadImages = []string{"quay.io/jetstack/cert-manager-controller:v1.11.5", "localhost/dockyard/manager:v0.1.0"}
		}, []string{"spec.loadImages[0]", "spec.loadImages[1]", "--allowed-load-image-repositories", "localhost/" + ns + "/"}},
		{"the load balancer on a privileged host port", func(s *infrav1.DockyardClusterSpec) {
			s.LoadBalancer.HostPort = 443
		}, []string{"spec.loadBalancer.hostPort", "--min-host-port"}},
		{"the host's network", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "host"}}
		}, []string{"spec.network.existing.name", "--allowed-networks"}},
		{"a network of the engine's by the name Dockyard creates", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Name: "bridge"}
		}, []string{"spec.network.name", "the engine's own"}},
		{"another cluster's network", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Name: "dockyard-dev.team-b"}
		}, []string{"spec.network.name", "dockyard-*"}},
		{"the management cluster's Service range", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Subnets: []string{"10.96.0.0/24"}}
		}, []string{"spec.network.subnets[0]", "10.96.0.0/12", "reserved", "--reserved-subnets"}},
		{"a public range", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Subnets: []string{"8.8.8.0/24"}}
		}, []string{"spec.network.subnets[0]", "--allowed-subnet-pools"}},
		{"a subnet the engine's host routes", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Subnets: []string{"172.30.5.0/24"}}
		}, []string{"spec.network.subnets[0]", "172.30.0.0/16", "in use"}},
		{"link-local", func(s *infrav1.DockyardClusterSpec) {
			s.Network = infrav1.NetworkSpec{Subnets: []string{"169.254.0.0/24"}}
		}, []string{"spec.network.subnets[0]", "link-local"}},
		{"another team's registry", func(s *infrav1.DockyardClusterSpec) {
			s.Registry = "team-b-registry"
		}, []string{"spec.registry", "team-b"}},
		{"a registry the engine cannot tell about", func(s *infrav1.DockyardClusterSpec) {
			s.Registry = "broken"
		}, []string{"spec.registry", "does not answer"}},
		{"nodes as privileged Pods of the management cluster", func(s *infrav1.DockyardClusterSpec) {
			s.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{}
		}, []string{"spec.infrastructure.kubernetes.kubeconfigSecret", "--allowed-management-infrastructure-namespaces"}},
	}
	for i, tc := range clusters {
		t.Run(tc.name, func(t *testing.T) {
			spec := validClusterSpec()
			tc.mutate(&spec)
			dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", i), Namespace: ns}, Spec: spec}
			expectRejected(t, env.Client.Create(ctx, dc), tc.says...)
			dct := &infrav1.DockyardClusterTemplate{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ct-%d", i), Namespace: ns},
				Spec: infrav1.DockyardClusterTemplateSpec{Template: infrav1.DockyardClusterTemplateResource{Spec: spec}}}
			expectRejected(t, env.Client.Create(ctx, dct), "spec.template.spec."+strings.TrimPrefix(tc.says[0], "spec."))
		})
	}
	// What the namespace may use is accepted: its own images, its registry, a private subnet,
	// an allowed network.
	ok := validClusterSpec()
	ok.LoadImages = []string{"localhost/" + ns + "/app:dev"}
	ok.Registry = "team-a-registry"
	ok.Network = infrav1.NetworkSpec{Subnets: []string{"10.200.0.0/24"}}
	if err := env.Client.Create(ctx, &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "allowed", Namespace: ns}, Spec: ok}); err != nil {
		t.Errorf("what the policy allows was refused: %v", err)
	}
	shared := validClusterSpec()
	shared.Network = infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "shared"}}
	if err := env.Client.Create(ctx, &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Spec: shared}); err != nil {
		t.Errorf("an allowed network was refused: %v", err)
	}
	// Adding a refused image to a cluster admitted before is refused too.
	added := &infrav1.DockyardCluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "allowed"}, added); err != nil {
		t.Fatal(err)
	}
	added.Spec.LoadImages = append(added.Spec.LoadImages, "localhost/dockyard/manager:v0.1.0")
	expectRejected(t, env.Client.Update(ctx, added), "spec.loadImages[1]", "--allowed-load-image-repositories")

	machines := []struct {
		name   string
		mutate func(*infrav1.DockyardMachineSpec)
		says   []string
	}{
		{"a kubelet on every interface", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 10250, HostPort: 8080, ListenAddress: "0.0.0.0"}}
		}, []string{"spec.ports[0].listenAddress", "0.0.0.0", "--allowed-listen-addresses"}},
		{"etcd on ::", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 2379, ListenAddress: "::"}}
		}, []string{"spec.ports[0].listenAddress", "--allowed-listen-addresses"}},
		{"a privileged host port", func(s *infrav1.DockyardMachineSpec) {
			s.Ports = []infrav1.PortMapping{{ContainerPort: 10250, HostPort: 80}}
		}, []string{"spec.ports[0].hostPort", "--min-host-port"}},
		{"another team's image preloaded", func(s *infrav1.DockyardMachineSpec) {
			s.PreLoadImages = []string{"localhost/team-b/app:dev"}
		}, []string{"spec.preLoadImages[0]", "--allowed-load-image-repositories"}},
	}
	for i, tc := range machines {
		t.Run(tc.name, func(t *testing.T) {
			spec := validMachineSpec()
			tc.mutate(&spec)
			dm := &infrav1.DockyardMachine{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Namespace: ns}, Spec: spec}
			expectRejected(t, env.Client.Create(ctx, dm), tc.says...)
			inner := "spec.template.spec." + strings.TrimPrefix(tc.says[0], "spec.")
			dmt := &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mt-%d", i), Namespace: ns},
				Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{Spec: spec}}}
			expectRejected(t, env.Client.Create(ctx, dmt), inner)
			// A MachinePool's template is a machine's spec, checked the same.
			pool := &infrav1.DockyardMachinePool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i), Namespace: ns},
				Spec: infrav1.DockyardMachinePoolSpec{Template: spec}}
			expectRejected(t, env.Client.Create(ctx, pool), "spec.template."+strings.TrimPrefix(tc.says[0], "spec."))
			poolTemplate := &infrav1.DockyardMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pt-%d", i), Namespace: ns},
				Spec: infrav1.DockyardMachinePoolTemplateSpec{Template: infrav1.DockyardMachinePoolTemplateResource{Spec: infrav1.DockyardMachinePoolSpec{Template: spec}}}}
			expectRejected(t, env.Client.Create(ctx, poolTemplate), "spec.template.spec.template."+strings.TrimPrefix(tc.says[0], "spec."))
		})
	}
	// A pool's image and mounts are held to the policy as a machine's are.
	bad := validMachineSpec()
	bad.Image, bad.ExtraMounts[0].HostPath = "alpine:3", "/"
	pool := &infrav1.DockyardMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "bad-pool", Namespace: ns}, Spec: infrav1.DockyardMachinePoolSpec{Template: bad}}
	expectRejected(t, env.Client.Create(ctx, pool), "spec.template.image", "spec.template.extraMounts[0].hostPath", "--allowed-image-repositories")
	good := &infrav1.DockyardMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "good-pool", Namespace: ns}, Spec: infrav1.DockyardMachinePoolSpec{Template: validMachineSpec()}}
	if err := env.Client.Create(ctx, good); err != nil {
		t.Fatalf("a valid pool was refused: %v", err)
	}
	// Its template may change (the pool rolls out), but not to what the policy refuses.
	good.Spec.Template.Ports = []infrav1.PortMapping{{ContainerPort: 30080, HostPort: 30080}}
	if err := env.Client.Update(ctx, good); err != nil {
		t.Errorf("an allowed change of a pool's template was refused: %v", err)
	}
	good.Spec.Template.Ports = append(good.Spec.Template.Ports, infrav1.PortMapping{ContainerPort: 30443, HostPort: 443})
	expectRejected(t, env.Client.Update(ctx, good), "spec.template.ports[1].hostPort", "--min-host-port")
}

// A namespace the administrator keeps off the manager's engine cannot make a DockyardCluster
// (nor a template of one) that names no infrastructure cluster; one that names one is admitted.
func TestHostEngineRefusedToANamespace(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.HostEngineNamespaces = []string{"platform"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	onHost := validClusterSpec()
	errs := checkClusterPolicy(context.Background(), p, Environment{}, "team-a", nil, &onHost, field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Field != "spec.infrastructure" || !strings.Contains(errs[0].Error(), policy.HostEngineFlag) {
		t.Errorf("team-a on the host's engine: %v, want one refusal of spec.infrastructure naming %s", errs, policy.HostEngineFlag)
	}
	if errs := checkClusterPolicy(context.Background(), p, Environment{}, "platform", nil, &onHost, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("the namespace allowed on the host's engine was refused: %v", errs)
	}
	elsewhere := validClusterSpec()
	elsewhere.Infrastructure.Kubernetes = &infrav1.KubernetesInfrastructure{KubeconfigSecret: "infra"}
	if errs := checkClusterPolicy(context.Background(), p, Environment{}, "team-a", nil, &elsewhere, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("team-a naming an infrastructure cluster was refused: %v", errs)
	}
	// An object admitted before the policy changed is not refused when it is updated.
	if errs := checkClusterPolicy(context.Background(), p, Environment{}, "team-a", &onHost, onHost.DeepCopy(), field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("an update of a cluster admitted before was refused: %v", errs)
	}
}

// An in-memory cluster is checked against the policy's namespaces for the manager's memory, not
// the host engine's; it cannot name what is the engine host's (an existing network, a host port,
// a registry, images to load), and its endpoint's port is left to the controller.
func TestInMemoryClusters(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.HostEngineNamespaces = nil
	cfg.InMemoryNamespaces = []string{"scale"}
	p, err := policy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inMemory := validClusterSpec()
	inMemory.Infrastructure.InMemory = &infrav1.InMemoryInfrastructure{}
	if errs := checkClusterPolicy(context.Background(), p, Environment{}, "scale", nil, &inMemory, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("an in-memory cluster where the policy allows it, off the host's engine: %v", errs)
	}
	errs := checkClusterPolicy(context.Background(), p, Environment{}, "team-a", nil, &inMemory, field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Field != "spec.infrastructure.inMemory" || !strings.Contains(errs[0].Error(), policy.InMemoryFlag) {
		t.Errorf("an in-memory cluster in team-a: %v, want one refusal of spec.infrastructure.inMemory naming %s", errs, policy.InMemoryFlag)
	}

	hostish := inMemory.DeepCopy()
	hostish.Network.Name, hostish.Network.Subnets = "", nil
	hostish.Network.Existing.Name = "kind"
	hostish.LoadBalancer.HostPort = 30443
	hostish.Registry = "shared"
	hostish.LoadImages = []string{"localhost/scale/app:v1"}
	var fields []string
	for _, e := range validateClusterSpec(hostish, field.NewPath("spec")) {
		fields = append(fields, e.Field)
	}
	if want := []string{"spec.network.existing.name", "spec.loadBalancer.hostPort", "spec.registry", "spec.loadImages"}; !slices.Equal(fields, want) {
		t.Errorf("an in-memory cluster naming the engine host's things: refused %v, want %v", fields, want)
	}

	defaulted := inMemory.DeepCopy()
	defaultClusterSpec(defaulted, "lb")
	if defaulted.ControlPlaneEndpoint.Port != 0 {
		t.Errorf("an in-memory cluster's endpoint port was defaulted to %d; the controller fills it with its API server's", defaulted.ControlPlaneEndpoint.Port)
	}
}
