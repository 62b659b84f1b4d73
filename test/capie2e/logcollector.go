package capie2e

import (
	"context"
	"path/filepath"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
)

// LogCollector is Cluster API's framework.ClusterLogCollector for Dockyard: for each Machine,
// its node container's journal and the journals of kubelet, containerd and the bootstrap unit,
// the bootstrap output and state, the pods' log files, the console and the engine's inspect
// data (docker.Node.CollectLogs); for each cluster, its load balancers'. Every file is
// redacted and private (logdir.Dir). Use it with
// framework.WithMachineLogCollector(capie2e.LogCollector{}).
type LogCollector struct {
	// Engine is the container engine; the environment's (DOCKYARD_CONTAINER_RUNTIME, Docker by
	// default) when empty.
	Engine runtimes.Config
}

var _ framework.ClusterLogCollector = LogCollector{}

// CollectMachineLog writes the logs of a Machine's node container into outputPath.
func (l LogCollector) CollectMachineLog(ctx context.Context, c client.Client, m *clusterv1.Machine, outputPath string) error {
	nodes, done, err := connect(l.Engine)
	if err != nil {
		return err
	}
	defer done()
	return collectNode(ctx, nodes, docker.ClusterKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}, m.Spec.InfrastructureRef.Name, outputPath)
}

// CollectMachinePoolLog writes the logs of each instance of a MachinePool's DockyardMachinePool
// into outputPath/<instance>.
func (l LogCollector) CollectMachinePoolLog(ctx context.Context, c client.Client, mp *clusterv1.MachinePool, outputPath string) error {
	nodes, done, err := connect(l.Engine)
	if err != nil {
		return err
	}
	defer done()
	instances := &infrav1.DockyardMachineList{}
	if err := c.List(ctx, instances, client.InNamespace(mp.Namespace), client.MatchingLabels{
		clusterv1.ClusterNameLabel: mp.Spec.ClusterName, clusterv1.MachinePoolNameLabel: mp.Name,
	}); err != nil {
		return errors.Wrapf(err, "listing the instances of MachinePool %s/%s", mp.Namespace, mp.Name)
	}
	key := docker.ClusterKey{Namespace: mp.Namespace, Name: mp.Spec.ClusterName}
	var errs []error
	for i := range instances.Items {
		name := instances.Items[i].Name
		errs = append(errs, collectNode(ctx, nodes, key, name, filepath.Join(outputPath, name)))
	}
	return kerrors.NewAggregate(errs)
}

// CollectInfrastructureLogs writes the logs of a cluster's load balancer into
// outputPath/load-balancer and those of its Service load balancers into
// outputPath/service-load-balancers/<container>.
func (l LogCollector) CollectInfrastructureLogs(ctx context.Context, _ client.Client, c *clusterv1.Cluster, outputPath string) error {
	nodes, done, err := connect(l.Engine)
	if err != nil {
		return err
	}
	defer done()
	key := docker.ClusterKey{Namespace: c.Namespace, Name: c.Name}
	lb, err := nodes.FindLoadBalancer(ctx, key)
	if err != nil {
		return err
	}
	services, err := nodes.ServiceLoadBalancers(ctx, key)
	if err != nil {
		return err
	}
	var errs []error
	if lb != nil {
		errs = append(errs, collectInto(filepath.Join(outputPath, "load-balancer"), func(dir *logdir.Dir) error {
			return lb.CollectLogs(ctx, dir)
		}))
	}
	if len(services) > 0 {
		errs = append(errs, collectInto(filepath.Join(outputPath, "service-load-balancers"), func(dir *logdir.Dir) error {
			var errs []error
			for _, s := range services {
				sub, err := dir.Dir(s.Name)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				errs = append(errs, s.CollectLogs(ctx, sub))
				sub.Close()
			}
			return kerrors.NewAggregate(errs)
		}))
	}
	return kerrors.NewAggregate(errs)
}

// collectNode writes the logs of a machine's node, or a note saying it has none.
func collectNode(ctx context.Context, nodes *docker.Manager, key docker.ClusterKey, machine, dir string) error {
	node, err := nodes.FindNode(ctx, key, machine)
	if err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "finding the node of %s in cluster %s", machine, key)
	}
	return collectInto(dir, func(out *logdir.Dir) error {
		if node == nil {
			return out.WriteFile("no-node.txt", []byte("DockyardMachine "+machine+" of cluster "+key.String()+" has no node container on the engine\n"))
		}
		return node.CollectLogs(ctx, out)
	})
}

// collectInto runs collect on the log directory dir (logdir.Dir: 0700, files 0600,
// redacted, no link followed). The artifacts folder belongs to the run: files of the same
// names in dir (a collection run twice) are replaced.
func collectInto(dir string, collect func(*logdir.Dir) error) error {
	out, err := logdir.Open(dir, true)
	if err != nil {
		return err
	}
	defer out.Close()
	return collect(out)
}
