package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func quickstartCommand(g *globals) *cobra.Command {
	mo := &managementOptions{}
	var name string
	var workers, controlPlanes int64
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Make the management cluster, install the providers, create a workload cluster",
		Long: `Make (or reuse) the management cluster in containers, install cert-manager, Cluster API and
Dockyard in it with clusterctl, create a workload cluster (1 control plane and 1 worker by
default) and print both kubeconfigs. Running it again changes nothing. With --images local (the
default), the images the engine lacks are built first, as make images and make component-images
build them (root and Go needed; the manager's image is made of this binary).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			start := time.Now()
			mgmtKubeconfig, err := ensureManagement(ctx, g, mo)
			if err != nil {
				return err
			}
			ref := clusterRef{Namespace: "default", Name: name}
			o := &clusterOptions{kubernetesVersion: mo.kubernetesVersion, controlPlanes: controlPlanes, workers: workers, wait: timeout}
			if err := createCluster(ctx, g, o, ref); err != nil {
				return err
			}
			fmt.Printf(`Done in %[1]s. Workload cluster %[2]s: %[3]d control plane and %[4]d worker nodes (kubeconfig above).

The management cluster, where cert-manager, Cluster API and Dockyard run as pods:

  kubectl --kubeconfig %[5]s get clusters,machines,dockyardmachines -A

More clusters: dockyard create cluster NAME. Everything goes with dockyard delete management
(or make quickstart-delete).
`, time.Since(start).Round(time.Second), name, controlPlanes, workers, mgmtKubeconfig)
			return nil
		},
	}
	mo.register(cmd)
	cmd.Flags().StringVar(&name, "name", "dockyard", "name of the workload cluster (namespace default)")
	cmd.Flags().Int64Var(&controlPlanes, "control-planes", 1, "control plane machines")
	cmd.Flags().Int64Var(&workers, "workers", 1, "worker machines")
	cmd.Flags().DurationVar(&timeout, "wait", 20*time.Minute, "how long to wait for the workload cluster to be ready")
	return cmd
}
