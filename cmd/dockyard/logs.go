package main

import (
	"context"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
)

func exportCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Export a cluster's logs"}
	cmd.AddCommand(exportLogsCommand(g))
	return cmd
}

func exportLogsCommand(g *globals) *cobra.Command {
	var cluster, namespace string
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "logs DIR",
		Short: "Write every node's journals, pods' logs and inspect data, and the load balancers', into DIR",
		Long: `Write what a person needs to debug a cluster into DIR, one directory per container: each node's
journal and the journals of kubelet, containerd and the bootstrap unit, the bootstrap output and
state, containerd's containers and images, the processes, the pods' log files (kube-system's
included), its console and the engine's inspect data; the haproxy.cfg, console and inspect data
of the control plane's load balancer and of each Service load balancer.

DIR is made to be handed to someone else: directories are created 0700 and files 0600, and
every file is redacted (bootstrap tokens, certificate keys, PEM private keys, base64 holding PEM
blocks, on one line or wrapped over many, service account tokens). DIR must be new or empty; with --overwrite, files of the same
names in it are replaced. No symbolic link inside DIR is followed. It reads the engine only: it
works on a cluster whose management cluster is gone.`,
		Example: `  dockyard export logs ./logs --cluster dev
  dockyard export logs ./logs --cluster dev --overwrite`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref, err := parseClusterRef(cluster, namespace)
			if err != nil {
				return err
			}
			nodes, done, err := g.clusterNodes(ctx, ref)
			if err != nil {
				return err
			}
			defer done()
			start := time.Now()
			n, err := exportLogs(ctx, nodes, g.runtime.Name, ref, args[0], overwrite)
			if n > 0 {
				say("logs of %d containers of cluster %s in %s (%s)", n, ref, args[0], time.Since(start).Round(100*time.Millisecond))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "dockyard", "the cluster, NAME or NAMESPACE/NAME")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace, when --cluster names none")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "write into a DIR that is not empty, replacing its files of the same names")
	return cmd
}

// exportLogs writes the logs of the cluster's nodes and load balancers on the engine into dir,
// one directory per container, and returns how many containers it wrote.
func exportLogs(ctx context.Context, nodes *docker.Manager, engine string, ref clusterRef, dir string, overwrite bool) (int, error) {
	list, err := nodes.Nodes(ctx, ref.key(), "")
	if err != nil {
		return 0, err
	}
	lb, err := nodes.FindLoadBalancer(ctx, ref.key())
	if err != nil {
		return 0, err
	}
	services, err := nodes.ServiceLoadBalancers(ctx, ref.key())
	if err != nil {
		return 0, err
	}
	if len(list) == 0 && lb == nil && len(services) == 0 {
		return 0, errors.Errorf("cluster %s has no container on the %s engine", ref, engine)
	}
	out, err := logdir.Open(dir, overwrite)
	if errors.Is(err, logdir.ErrNotEmpty) {
		return 0, errors.Errorf("%v: pass --overwrite to replace its files of the same names, or name a new or empty directory", err)
	}
	if err != nil {
		return 0, err
	}
	defer out.Close()
	var errs []error
	collect := func(name string, f func(*logdir.Dir) error) {
		d, err := out.Dir(name)
		if err != nil {
			errs = append(errs, err)
			return
		}
		defer d.Close()
		errs = append(errs, f(d))
	}
	for _, n := range list {
		collect(n.Name, func(d *logdir.Dir) error { return n.CollectLogs(ctx, d) })
	}
	count := len(list) + len(services)
	if lb != nil {
		collect(lb.Name, func(d *logdir.Dir) error { return lb.CollectLogs(ctx, d) })
		count++
	}
	for _, s := range services {
		collect(s.Name, func(d *logdir.Dir) error { return s.CollectLogs(ctx, d) })
	}
	return count, kerrors.NewAggregate(errs)
}
