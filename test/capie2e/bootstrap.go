package capie2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"sigs.k8s.io/cluster-api/test/framework/bootstrap"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"

	"github.com/dockyard-dev/dockyard/cmd/tools/mgmt"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
)

// ClusterProviderInput describes the bootstrap (management) cluster of a suite.
type ClusterProviderInput struct {
	// Name of the management cluster; its node container is <Name>-control-plane.
	Name string
	// KubernetesVersion of the node image.
	KubernetesVersion string
	// NodeImage is the node image; localhost/dockyard/node:<KubernetesVersion> when empty.
	NodeImage string
	// Images are copied from the engine into the node, as kind's provider loads them: a
	// missing mustLoad image fails Create, a missing tryLoad one is skipped.
	Images []clusterctl.ContainerImage
	// Engine is the container engine; the environment's (DOCKYARD_CONTAINER_RUNTIME, Docker by
	// default) when empty.
	Engine runtimes.Config
	// LogFolder receives the management node's logs on Dispose.
	LogFolder string
	// Zones give the management cluster one worker per zone (mgmt.Options.Zones): the
	// infrastructure cluster of the kubernetes flavor's clusters.
	Zones []string
	// NetworkPolicyImage, when set, makes the management cluster enforce NetworkPolicies
	// (mgmt.Options.NetworkPolicyImage); Images must hold it.
	NetworkPolicyImage string
	// APIServerEnv are environment variables of the management cluster's API server
	// (mgmt.Options.APIServerEnv), e.g. GOGC for specs of thousands of in-memory Machines.
	APIServerEnv map[string]string
}

// ClusterProvider makes and disposes of a management cluster in a node container on the local
// engine: Cluster API's bootstrap.ClusterProvider, the part kind plays for CAPD. Its node
// mounts the engine's socket, so Dockyard's manager runs in it as a pod, and its API server
// enforces owner references' permissions, as the kind clusters of Cluster API's suite do.
type ClusterProvider struct {
	in             ClusterProviderInput
	kubeconfigPath string
}

var _ bootstrap.ClusterProvider = &ClusterProvider{}

// NewClusterProvider returns a provider; Create makes the cluster.
func NewClusterProvider(in ClusterProviderInput) *ClusterProvider {
	gomega.Expect(in.Name).ToNot(gomega.BeEmpty(), "a management cluster needs a name")
	gomega.Expect(in.KubernetesVersion).ToNot(gomega.BeEmpty(), "a management cluster needs a Kubernetes version")
	if in.NodeImage == "" {
		in.NodeImage = "localhost/dockyard/node:" + in.KubernetesVersion
	}
	if in.Engine.Name == "" {
		in.Engine = runtimes.FromEnv()
	}
	return &ClusterProvider{in: in}
}

// nodes connects to the engine; close it after use.
func (p *ClusterProvider) nodes(ctx context.Context) (*docker.Manager, func()) {
	nodes, done, err := connect(p.in.Engine)
	gomega.Expect(err).ToNot(gomega.HaveOccurred())
	_, err = nodes.HostInfo(ctx)
	gomega.Expect(err).ToNot(gomega.HaveOccurred(), "no container engine answers at %s", p.in.Engine)
	return nodes, done
}

// Create makes the management cluster (or finishes one an interrupted run left) and writes its
// kubeconfig to a temporary file.
func (p *ClusterProvider) Create(ctx context.Context) {
	nodes, done := p.nodes(ctx)
	defer done()
	var images []string
	for _, img := range p.in.Images {
		ok, err := nodes.ImageExists(ctx, img.Name)
		gomega.Expect(err).ToNot(gomega.HaveOccurred())
		switch {
		case ok:
			images = append(images, img.Name)
		case img.LoadBehavior == clusterctl.TryLoadImage:
			fmt.Fprintf(ginkgo.GinkgoWriter, "image %s is not on the engine: not loaded (tryLoad)\n", img.Name)
		default:
			ginkgo.Fail(fmt.Sprintf("image %s is not on %s (build it: make component-images images)", img.Name, p.in.Engine))
		}
	}
	c, err := mgmt.Create(ctx, nodes, mgmt.Options{
		Name: p.in.Name, NodeImage: p.in.NodeImage, KubernetesVersion: p.in.KubernetesVersion, Images: images,
		AdmissionPlugins: []string{"OwnerReferencesPermissionEnforcement"}, Zones: p.in.Zones, NetworkPolicyImage: p.in.NetworkPolicyImage,
		APIServerEnv: p.in.APIServerEnv,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(ginkgo.GinkgoWriter, format+"\n", args...)
		},
	})
	gomega.Expect(err).ToNot(gomega.HaveOccurred(), "creating the management cluster %s", p.in.Name)
	f, err := os.CreateTemp("", "dockyard-e2e-"+p.in.Name+"-*.kubeconfig")
	gomega.Expect(err).ToNot(gomega.HaveOccurred())
	_, err = f.Write(c.Kubeconfig)
	gomega.Expect(err).ToNot(gomega.HaveOccurred())
	gomega.Expect(f.Close()).To(gomega.Succeed())
	p.kubeconfigPath = f.Name()
}

// GetKubeconfigPath returns the kubeconfig's path, empty before Create.
func (p *ClusterProvider) GetKubeconfigPath() string { return p.kubeconfigPath }

// CollectLogs writes the management node's logs into dir.
func (p *ClusterProvider) CollectLogs(ctx context.Context, dir string) error {
	nodes, done := p.nodes(ctx)
	defer done()
	node, err := mgmt.FindNode(ctx, nodes, p.in.Name)
	if err != nil || node == nil {
		return err
	}
	return collectInto(dir, func(out *logdir.Dir) error { return node.CollectLogs(ctx, out) })
}

// Dispose collects the management node's logs into the log folder, then removes the cluster
// from the engine (node, volume, network) and its kubeconfig file.
func (p *ClusterProvider) Dispose(ctx context.Context) {
	if p.in.LogFolder != "" {
		if err := p.CollectLogs(ctx, filepath.Join(p.in.LogFolder, mgmt.NodeName(p.in.Name))); err != nil {
			fmt.Fprintf(ginkgo.GinkgoWriter, "collecting the logs of the management cluster %s: %v\n", p.in.Name, err)
		}
	}
	nodes, done := p.nodes(ctx)
	defer done()
	gomega.Expect(mgmt.Delete(ctx, nodes, p.in.Name)).To(gomega.Succeed())
	if p.kubeconfigPath != "" {
		_ = os.Remove(p.kubeconfigPath)
	}
}
