package capie2e

import (
	"context"
	"regexp"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// specNamespace matches the namespaces Cluster API's shared specs make their clusters in:
// "<spec name>-<six random characters>" (framework.SetupSpecNamespace).
var specNamespace = regexp.MustCompile(`^(quick-start|md-scale|md-rollout|md-remediation|kcp-remediation|kcp-adoption|machine-pool|node-drain|clusterclass-changes|clusterclass-rollout|self-hosted|cluster-deletion|k8s-upgrade-and-conformance|kubeadm-join-old-nodes)-[a-z0-9]{6}$`)

// SpecClusters returns what the shared specs' workload clusters, and the management cluster
// named mgmtName (when not empty), have on the engine: after a suite, a leak; before one, what
// an interrupted run left.
func SpecClusters(ctx context.Context, engine runtimes.Config, mgmtName string) ([]docker.ClusterResources, error) {
	nodes, done, err := connect(engine)
	if err != nil {
		return nil, err
	}
	defer done()
	all, err := nodes.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	var out []docker.ClusterResources
	for _, c := range all {
		if specNamespace.MatchString(c.Cluster.Namespace) || (mgmtName != "" && c.Cluster.Namespace == "" && c.Cluster.Name == mgmtName) {
			out = append(out, c)
		}
	}
	return out, nil
}

// RemoveClusters removes listed clusters from the engine.
func RemoveClusters(ctx context.Context, engine runtimes.Config, clusters []docker.ClusterResources) error {
	nodes, done, err := connect(engine)
	if err != nil {
		return err
	}
	defer done()
	var errs []error
	for _, c := range clusters {
		errs = append(errs, nodes.RemoveCluster(ctx, c))
	}
	return kerrors.NewAggregate(errs)
}

// connect reaches an engine (the environment's when empty) through Dockyard's node layer.
func connect(engine runtimes.Config) (*docker.Manager, func(), error) {
	if engine.Name == "" {
		engine = runtimes.FromEnv()
	}
	rt, err := runtimes.New(engine)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "connecting to %s", engine)
	}
	return docker.NewManager(rt, docker.ManagerOptions{}), func() { _ = rt.Close() }, nil
}
