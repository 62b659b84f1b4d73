package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/imagebuild"
)

func registryCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Create or delete a local registry the clusters' nodes pull from",
		Long: `A local registry is distribution's registry in a container on the engine, its data on a volume
that survives restarts. Push to it from the host (docker push localhost:5001/app:dev) and run
the image by that name in any cluster created with --var DOCKYARD_REGISTRY=<name> (the
DockyardCluster's spec.registry): Dockyard attaches the registry to the cluster's network and
points every node's containerd at it there. make registry-image builds its image.`,
	}
	cmd.AddCommand(registryCreateCommand(g), registryDeleteCommand(g))
	return cmd
}

func registryCreateCommand(g *globals) *cobra.Command {
	spec := docker.RegistrySpec{}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create (or start) the local registry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodes, done, err := g.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			r, err := nodes.CreateRegistry(cmd.Context(), spec)
			if err != nil {
				return err
			}
			fmt.Printf(`Registry %[1]s serves %[2]s.

  docker tag app:dev %[2]s/app:dev && docker push %[2]s/app:dev
  dockyard create cluster dev --var DOCKYARD_REGISTRY=%[1]s
  kubectl run app --image %[2]s/app:dev
`, r.Name, r.Host())
			return nil
		},
	}
	cmd.Flags().StringVar(&spec.Name, "name", docker.DefaultRegistryName, "the registry's container name")
	cmd.Flags().IntVar(&spec.HostPort, "port", docker.DefaultRegistryHostPort, "the host port images name it by: localhost:<port>")
	cmd.Flags().StringVar(&spec.ListenAddress, "listen-address", "127.0.0.1", "the host address the port is published on")
	cmd.Flags().StringVar(&spec.Image, "image", imagebuild.RegistryImageName(imagebuild.DefaultDistributionVersion), "the registry's image (make registry-image builds it)")
	return cmd
}

func registryDeleteCommand(g *globals) *cobra.Command {
	var name string
	var keepData bool
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete the local registry and, unless --keep-data, its data",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodes, done, err := g.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if err := nodes.DeleteRegistry(cmd.Context(), name, keepData); err != nil {
				return err
			}
			say("registry %s deleted", name)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", docker.DefaultRegistryName, "the registry's container name")
	cmd.Flags().BoolVar(&keepData, "keep-data", false, "keep the volume with the pushed images")
	return cmd
}
