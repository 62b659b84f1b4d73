package main

import (
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/pkg/errors"
	"github.com/spf13/cobra"

	"github.com/dockyard-dev/dockyard/cmd/tools/mirror"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

func pushCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "push", Short: "Publish images to a registry"}
	cmd.AddCommand(pushImagesCommand(g))
	return cmd
}

func pushImagesCommand(g *globals) *cobra.Command {
	o := &managementOptions{}
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Publish the images dockyard quickstart runs to a registry, for machines that would build them",
		Long: `Push the images dockyard quickstart and create management run (the node and load balancer
images of --kubernetes-version, Dockyard's manager, Cluster API's providers and cert-manager), as
they are in Docker, where dockyard and make images build them, to the registry path
--image-registry. Another machine then takes them from there instead of building them:
dockyard quickstart --image-registry with the same path. Each image keeps the last element of its
name and its tag: localhost/dockyard/node:v1.34.4 becomes <registry path>/node:v1.34.4. An image
Docker lacks is an error, before anything is pushed. Credentials are Docker's (docker login).`,
		Example: `  dockyard registry create && dockyard push images --image-registry localhost:5001/dockyard
  dockyard quickstart --image-registry localhost:5001/dockyard   # on a machine without them`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.imageRegistry == "" {
				return errors.New("--image-registry names the registry path to push to (localhost:5001/dockyard)")
			}
			if o.images != "local" {
				return errors.Errorf("--images %s: only Dockyard's own images (--images local) are published", o.images)
			}
			config, err := g.clusterctlConfig()
			if err != nil {
				return err
			}
			node, lb, components, err := o.allImages(config)
			if err != nil {
				return err
			}
			rt, err := runtimes.New(runtimes.Config{Name: runtimes.Docker})
			if err != nil {
				return err
			}
			defer func() { _ = rt.Close() }()
			start := time.Now()
			refs := append([]string{node, lb}, components...)
			say("pushing %d images to %s", len(refs), o.imageRegistry)
			pushed, err := mirror.Push(ctx, rt, o.imageRegistry, refs, remote.WithAuthFromKeychain(authn.DefaultKeychain))
			for i, p := range pushed {
				say("pushed %s as %s", refs[i], p)
			}
			if err != nil {
				return err
			}
			say("pushed %d images in %s", len(pushed), time.Since(start).Round(time.Second))
			return nil
		},
	}
	o.register(cmd)
	return cmd
}
