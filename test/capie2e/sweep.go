package capie2e

import (
	"context"
	"regexp"
	"time"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// specNamespace matches the namespaces Cluster API's shared specs make their clusters in:
// "<spec name>-<six random characters>" (framework.SetupSpecNamespace), and the clusterctl
// upgrade spec's "clusterctl-upgrade", which its management cluster's providers make clusters in.
var specNamespace = regexp.MustCompile(`^((quick-start|md-scale|md-rollout|md-remediation|kcp-remediation|kcp-adoption|k8s-conformance|machine-pool|node-drain|clusterclass-changes|clusterclass-rollout|self-hosted|cluster-deletion|k8s-upgrade-and-conformance|kubeadm-join-old-nodes|clusterctl-upgrade)-[a-z0-9]{6}|clusterctl-upgrade)$`)

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
	rt, done, err := connectRuntime(engine)
	if err != nil {
		return nil, nil, err
	}
	return docker.NewManager(rt, docker.ManagerOptions{}), done, nil
}

// connectRuntime reaches an engine (the environment's when empty).
func connectRuntime(engine runtimes.Config) (container.Runtime, func(), error) {
	if engine.Name == "" {
		engine = runtimes.FromEnv()
	}
	rt, err := runtimes.New(engine)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "connecting to %s", engine)
	}
	return rt, func() { _ = rt.Close() }, nil
}

// networkLabel marks an engine network the suite made, so only those are removed.
const networkLabel = "dev.dockyard.test/capie2e-network"

// EnsureNetwork makes the engine network name when it does not exist, labelled as the suite's;
// it tells whether it made it. One that exists (a kind user's) is used as it is.
func EnsureNetwork(ctx context.Context, engine runtimes.Config, name string) (bool, error) {
	rt, done, err := connectRuntime(engine)
	if err != nil {
		return false, err
	}
	defer done()
	_, err = rt.InspectNetwork(ctx, name)
	if err == nil {
		return false, nil
	}
	if !container.IsNotFound(err) {
		return false, errors.Wrapf(err, "inspecting network %s", name)
	}
	if err := rt.CreateNetwork(ctx, container.NetworkSpec{Name: name, Labels: map[string]string{networkLabel: "true"}}); err != nil {
		return false, errors.Wrapf(err, "creating network %s", name)
	}
	return true, nil
}

// RemoveNetwork removes the engine network name if the suite made it (EnsureNetwork), and
// nothing else.
func RemoveNetwork(ctx context.Context, engine runtimes.Config, name string) error {
	rt, done, err := connectRuntime(engine)
	if err != nil {
		return err
	}
	defer done()
	n, err := rt.InspectNetwork(ctx, name)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return errors.Wrapf(err, "inspecting network %s", name)
	}
	if n.Labels[networkLabel] != "true" {
		return nil
	}
	return errors.Wrapf(rt.RemoveNetwork(ctx, name), "removing network %s", name)
}

// PrivilegedContainersAllowed tells whether the engine starts privileged containers, by starting
// one of image that runs true. Cluster API's kubetest runs Kubernetes' conformance image
// privileged (its container runtime always asks for it), which engines on hosts without every
// capability (CAP_SYS_RESOURCE) refuse: "unable to apply caps: operation not permitted".
func PrivilegedContainersAllowed(ctx context.Context, engine runtimes.Config, image string) (bool, error) {
	rt, done, err := connectRuntime(engine)
	if err != nil {
		return false, err
	}
	defer done()
	name := "dockyard-capie2e-privilege-probe"
	if err := rt.RemoveContainer(ctx, name); err != nil {
		return false, err
	}
	spec := container.ContainerSpec{Name: name, Image: image, Entrypoint: []string{"true"},
		Labels: map[string]string{networkLabel: "probe"}, Security: container.SecuritySpec{Privileged: true}}
	if err := rt.CreateContainer(ctx, spec); err != nil {
		return false, errors.Wrap(err, "creating the privilege probe")
	}
	defer func() { _ = rt.RemoveContainer(context.WithoutCancel(ctx), name) }()
	return rt.StartContainer(ctx, name) == nil, nil
}

// ConnectManagementNodes has Dockyard's node layer attach the node containers of the Dockyard
// cluster mgmt, which hosts providers, to the engine network of the cluster workload once that
// network exists (within timeout), as the manager running in mgmt attaches them, with the same
// routes and isolation on those nodes. The clusterctl upgrade spec needs it for Dockyard v0.1.0,
// whose manager did not find its own node's container in a cluster Dockyard made
// ("<node>.<namespace>") and so attached nothing.
func ConnectManagementNodes(ctx context.Context, engine runtimes.Config, mgmt, workload docker.ClusterKey, timeout time.Duration) error {
	rt, done, err := connectRuntime(engine)
	if err != nil {
		return err
	}
	defer done()
	network := docker.DefaultNetworkName(workload)
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		_, err := rt.InspectNetwork(ctx, network)
		if container.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return errors.Wrapf(err, "waiting for the network %s of cluster %s", network, workload)
	}
	nodes := docker.NewManager(rt, docker.ManagerOptions{ManagementNodes: mgmt.ClusterLabels()})
	_, err = nodes.EnsureNetwork(ctx, workload, docker.NetworkSpec{Name: network})
	return errors.Wrapf(err, "attaching the nodes of cluster %s to network %s", mgmt, network)
}
