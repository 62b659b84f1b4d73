package main

import (
	"path/filepath"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

func exportCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Export a cluster's logs"}
	cmd.AddCommand(exportLogsCommand(g))
	return cmd
}

func exportLogsCommand(g *globals) *cobra.Command {
	var cluster, namespace string
	cmd := &cobra.Command{
		Use:   "logs DIR",
		Short: "Write every node's journals, pods' logs and inspect data, and the load balancer's, into DIR",
		Long: `Write what a person needs to debug a cluster into DIR, one directory per container: each node's
journal and the journals of kubelet, containerd and the bootstrap unit, the bootstrap output and
state, containerd's containers and images, the pods' log files (kube-system's included), its
console and the engine's inspect data; the load balancer's haproxy.cfg, console and inspect
data. Bootstrap secrets are redacted. It reads the engine only: it works on a cluster whose
management cluster is gone.`,
		Example: `  dockyard export logs ./logs --cluster dev`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref, err := parseClusterRef(cluster, namespace)
			if err != nil {
				return err
			}
			nodes, done, err := g.engine(ctx)
			if err != nil {
				return err
			}
			defer done()
			start := time.Now()
			list, err := nodes.Nodes(ctx, ref.key())
			if err != nil {
				return err
			}
			lb, err := nodes.FindLoadBalancer(ctx, ref.key())
			if err != nil {
				return err
			}
			if len(list) == 0 && lb == nil {
				return errors.Errorf("cluster %s has no container on the %s engine", ref, g.runtime.Name)
			}
			var errs []error
			for _, n := range list {
				if err := n.CollectLogs(ctx, filepath.Join(args[0], n.Name)); err != nil {
					errs = append(errs, err)
				}
			}
			if lb != nil {
				if err := lb.CollectLogs(ctx, filepath.Join(args[0], lb.Name)); err != nil {
					errs = append(errs, err)
				}
			}
			say("logs of %d nodes and the load balancer of cluster %s in %s (%s)", len(list), ref, args[0], time.Since(start).Round(100*time.Millisecond))
			return kerrors.NewAggregate(errs)
		},
	}
	cmd.Flags().StringVar(&cluster, "cluster", "dockyard", "the cluster, NAME or NAMESPACE/NAME")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace, when --cluster names none")
	return cmd
}
