package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/cmd/tools/mgmt"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/repository/embedded"
	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
)

// globals are the flags every command shares: the engine, and where the management cluster is.
type globals struct {
	runtime runtimes.Config
	// managementName is the management cluster in containers; managementKubeconfig, when set,
	// is another management cluster (kind, or any with Cluster API and Dockyard installed).
	managementName, managementKubeconfig string
	// stateDir holds the kubeconfigs dockyard writes and the clusterctl repository it carries;
	// config is clusterctl's configuration, empty for that repository's.
	stateDir, config string
}

func (g *globals) register(cmd *cobra.Command) {
	home, _ := os.UserHomeDir()
	g.runtime = runtimes.FromEnv()
	fs := cmd.PersistentFlags()
	fs.StringVar(&g.runtime.Name, "container-runtime", g.runtime.Name, "container engine: docker, podman or containerd ($"+runtimes.RuntimeEnv+")")
	fs.StringVar(&g.runtime.Endpoint, "container-runtime-endpoint", g.runtime.Endpoint, "the engine's address; empty: its default ($"+runtimes.EndpointEnv+")")
	fs.StringVar(&g.managementName, "management-name", mgmt.DefaultName, "the management cluster in containers (its node container is <name>-control-plane)")
	fs.StringVar(&g.managementKubeconfig, "management-kubeconfig", "", "use the management cluster of this kubeconfig instead (Cluster API and Dockyard installed)")
	fs.StringVar(&g.stateDir, "kubeconfig-dir", filepath.Join(home, ".dockyard"), "where dockyard writes kubeconfigs")
	fs.StringVar(&g.config, "clusterctl-config", "", "clusterctl configuration naming the providers' repositories; empty: the repository dockyard carries for its own version, written to <kubeconfig-dir>/repository/<version> (make release-manifests writes one for a checkout: out/clusterctl.yaml)")
}

// engine connects to the container engine through the node layer; close it after use.
func (g *globals) engine(ctx context.Context) (*docker.Manager, func(), error) {
	return g.connect(ctx, docker.ManagerOptions{})
}

// connect connects to the container engine through a node layer of the options.
func (g *globals) connect(ctx context.Context, opts docker.ManagerOptions) (*docker.Manager, func(), error) {
	name, err := runtimes.Parse(g.runtime.Name)
	if err != nil {
		return nil, nil, err
	}
	g.runtime.Name = name
	rt, err := runtimes.New(g.runtime)
	if err != nil {
		return nil, nil, err
	}
	nodes := docker.NewManager(rt, opts)
	if _, err := nodes.HostInfo(ctx); err != nil {
		_ = rt.Close()
		return nil, nil, errors.Wrapf(err, "no container engine answers (%s; make quickstart starts one)", g.runtime)
	}
	return nodes, func() { _ = rt.Close() }, nil
}

// clusterNodes connects to the engine like engine, and returns the node layer of the engine a
// cluster's nodes run on: the Kubernetes cluster its DockyardCluster names
// (spec.infrastructure.kubernetes), resolved as the manager does, with the user's own
// credentials; the engine's without a management cluster that answers, or a DockyardCluster.
func (g *globals) clusterNodes(ctx context.Context, ref clusterRef) (*docker.Manager, func(), error) {
	host, done, err := g.engine(ctx)
	if err != nil {
		return nil, nil, err
	}
	m, err := g.management(ctx)
	if err != nil {
		return host, done, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", m.kubeconfig)
	if err != nil {
		return host, done, nil
	}
	list := &infrav1.DockyardClusterList{}
	if err := m.client.List(ctx, list, client.InNamespace(ref.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: ref.Name}); err != nil || len(list.Items) != 1 {
		return host, done, nil
	}
	if err := reachable(&list.Items[0]); err != nil {
		done()
		return nil, nil, errors.Wrapf(err, "cluster %s", ref)
	}
	nodes, err := infrastructure.New(host, infrastructure.Options{Secrets: m.client, Management: cfg}).For(ctx, &list.Items[0])
	if err != nil {
		done()
		return nil, nil, errors.Wrapf(err, "the infrastructure of cluster %s", ref)
	}
	return nodes, done, nil
}

// clusterctlConfig is the path of clusterctl's configuration: --clusterctl-config, or the
// repository the command carries, written out for clusterctl's library (which reads files) once
// per run: the path it wrote is kept as the configuration.
func (g *globals) clusterctlConfig() (string, error) {
	if g.config != "" {
		if _, err := os.Stat(g.config); err != nil {
			return "", errors.Wrap(err, "--clusterctl-config")
		}
		return g.config, nil
	}
	r, err := embedded.Repository()
	if err != nil {
		return "", err
	}
	version, err := r.Version()
	if err != nil {
		return "", err
	}
	config, err := r.Write(filepath.Join(g.stateDir, "repository", version))
	if err != nil {
		return "", errors.Wrap(err, "writing the clusterctl repository dockyard carries")
	}
	g.config = config
	return config, nil
}

func (g *globals) kubeconfigPath(name string) string {
	return filepath.Join(g.stateDir, name+".kubeconfig")
}

// managementCluster is a connection to the management cluster.
type managementCluster struct {
	client client.Client
	// kubeconfig is a file clusterctl's library reads.
	kubeconfig string
}

// management connects to the management cluster: --management-kubeconfig's, or the one in
// containers (its kubeconfig, read from its node, is written to the kubeconfig directory).
func (g *globals) management(ctx context.Context) (*managementCluster, error) {
	path := g.managementKubeconfig
	if path == "" {
		nodes, done, err := g.engine(ctx)
		if err != nil {
			return nil, err
		}
		defer done()
		mc, err := mgmt.Get(ctx, nodes, g.managementName)
		if err != nil {
			return nil, errors.Wrapf(err, "management cluster %s (dockyard quickstart or dockyard create management makes it)", g.managementName)
		}
		path = g.kubeconfigPath(mc.Name)
		if err := writeKubeconfig(path, mc.Kubeconfig); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the management cluster's kubeconfig %s", path)
	}
	c, err := client.New(cfg, client.Options{Scheme: dyscheme.New()})
	if err != nil {
		return nil, errors.Wrap(err, "connecting to the management cluster")
	}
	return &managementCluster{client: c, kubeconfig: path}, nil
}

func writeKubeconfig(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return errors.Wrapf(err, "creating %s", filepath.Dir(path))
	}
	return errors.Wrapf(os.WriteFile(path, content, 0o600), "writing %s", path)
}

// clusterRef is a workload cluster named on the command line as [NAMESPACE/]NAME.
type clusterRef struct {
	Namespace, Name string
}

func parseClusterRef(s, namespace string) (clusterRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = namespace, s
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return clusterRef{}, errors.Errorf("cluster %q: want NAME or NAMESPACE/NAME", s)
	}
	return clusterRef{Namespace: ns, Name: name}, nil
}

// cluster names a workload cluster (NAME in namespace, or NAMESPACE/NAME) and connects to the
// management cluster where its objects are.
func (g *globals) cluster(ctx context.Context, name, namespace string) (clusterRef, *managementCluster, error) {
	ref, err := parseClusterRef(name, namespace)
	if err != nil {
		return clusterRef{}, nil, err
	}
	m, err := g.management(ctx)
	return ref, m, err
}

func (r clusterRef) String() string { return r.Namespace + "/" + r.Name }

func (r clusterRef) key() docker.ClusterKey {
	return docker.ClusterKey{Namespace: r.Namespace, Name: r.Name}
}

func (r clusterRef) objectKey() client.ObjectKey {
	return client.ObjectKey{Namespace: r.Namespace, Name: r.Name}
}

// reachable refuses a cluster whose nodes this command cannot reach: an in-memory cluster's
// nodes exist only in the manager's memory.
func reachable(dc *infrav1.DockyardCluster) error {
	if dc.Spec.Infrastructure.InMemory != nil {
		return errors.New("its nodes run in the manager's memory (spec.infrastructure.inMemory): there are no containers to reach, only its API server at spec.controlPlaneEndpoint, with the kubeconfig Cluster API keeps")
	}
	return nil
}
