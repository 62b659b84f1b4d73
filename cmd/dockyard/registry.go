package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"

	"github.com/dockyard-dev/dockyard/docker"
)

func registryCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Create or delete a local registry the clusters' nodes pull from",
		Long: `A local registry is distribution's registry in a container on the engine, its data on a volume
that survives restarts. Push to it from the host (docker push localhost:5001/app:dev) and run
the image by that name in any cluster of the namespaces it serves (--namespaces) created with
--var DOCKYARD_REGISTRY=<name> (the DockyardCluster's spec.registry): Dockyard attaches the
registry to the cluster's network and points every node's containerd at it there. Deletes are
off unless --allow-deletes, and a tag once pushed keeps naming its manifest unless
--mutable-tags; --auth requires a user and password of every client: the host's pushes
anywhere, each namespace's (its nodes send it) only under <namespace>/.`,
	}
	cmd.AddCommand(registryCreateCommand(g), registryDeleteCommand(g))
	return cmd
}

func registryCreateCommand(g *globals) *cobra.Command {
	spec := docker.RegistrySpec{}
	images := &managementOptions{kubernetesVersion: defaultKubernetesVersion, images: "local"}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create (or start) a local registry",
		Long: `Create (or start) a local registry. Running it again on an existing registry starts it; the
flags not given keep the registry's settings. To change its namespaces, deletes, tags or
authentication, delete it with --keep-data (its images stay) and create it again.

Every client may pull every repository. Tags are immutable: a push of another manifest under a
tag that names one is refused (TAG_INVALID), the same manifest again is not; --mutable-tags lets
tags move (a registry you push rebuilt images to under the same tags). --auth gives the registry
a user per namespace it serves, named after it, which may push only to repositories under
<namespace>/ (localhost:5001/team-a/app:v1) and which the nodes of that namespace's clusters
send (root in those nodes can read it), and the host's user, which may push anywhere: its
password goes to a file only you read, and the command prints how to log in. Without --auth
anything that reaches the registry (the host, the nodes of its namespaces' clusters) may push
to any repository.

Dockyard's registry image, when the engine lacks it, is made as dockyard quickstart makes its
images: pulled from --image-registry when given and holding it, else built from Debian's archive
and the Go module proxy, no registry (root and Go needed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodes, done, err := g.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			return createRegistry(cmd, g, images, nodes, spec)
		},
	}
	cmd.Flags().StringVar(&spec.Name, "name", docker.DefaultRegistryName, "the registry's container name")
	cmd.Flags().IntVar(&spec.HostPort, "port", docker.DefaultRegistryHostPort, "the host port images name it by: localhost:<port>")
	cmd.Flags().StringVar(&spec.ListenAddress, "listen-address", "127.0.0.1", "the host address the port is published on")
	cmd.Flags().StringVar(&spec.Image, "image", localRegistryImage, "the registry's image; Dockyard's, when the engine lacks it, is pulled from --image-registry or built, any other is pulled by the engine")
	cmd.Flags().StringVar(&images.imageRegistry, "image-registry", "", `a registry path (localhost:5001/dockyard) Dockyard's registry image is pulled from when the engine lacks it (as <path>/registry:<version>); built when it does not hold it`)
	cmd.Flags().StringSliceVar(&spec.Namespaces, "namespaces", []string{"default"}, "the namespaces whose clusters may use the registry")
	cmd.Flags().BoolVar(&spec.AllowDeletes, "allow-deletes", false, "let clients delete manifests and blobs")
	cmd.Flags().BoolVar(&spec.MutableTags, "mutable-tags", false, "let a push move an existing tag to another manifest")
	cmd.Flags().BoolVar(&spec.Auth, "auth", false, "require a user and password of every client: a user per namespace, pushing under <namespace>/ only, and the host's (generated; written to a file only you read)")
	return cmd
}

// provideRegistryImages gets images the engine lacks as dockyard quickstart gets its own:
// pulled from --image-registry, built, copied from Docker into another engine. Tests replace it.
var provideRegistryImages = provideImages

// createRegistry creates (or starts) the registry of spec on the engine of nodes, making its
// image first when it is Dockyard's and the engine lacks it, and prints how to use it.
func createRegistry(cmd *cobra.Command, g *globals, images *managementOptions, nodes *docker.Manager, spec docker.RegistrySpec) error {
	ctx := cmd.Context()
	// On an existing registry, what the command line does not say stays as it is.
	if r, err := nodes.FindRegistry(ctx, spec.Name); err != nil {
		return err
	} else if r != nil {
		flags := cmd.Flags()
		if !flags.Changed("namespaces") && len(r.Namespaces()) > 0 {
			spec.Namespaces = r.Namespaces()
		}
		if !flags.Changed("allow-deletes") {
			spec.AllowDeletes = r.DeletesAllowed()
		}
		if !flags.Changed("mutable-tags") {
			spec.MutableTags = r.MutableTags()
		}
		if !flags.Changed("auth") {
			spec.Auth = r.AuthRequired()
		}
	} else if err := ensureRegistryImage(ctx, g, images, nodes, spec.Image); err != nil {
		return err
	}
	r, err := nodes.CreateRegistry(ctx, spec)
	if err != nil {
		return err
	}
	settings := []string{"deletes off", "tags immutable"}
	if r.DeletesAllowed() {
		settings[0] = "deletes allowed"
	}
	if r.MutableTags() {
		settings[1] = "tags mutable"
	}
	fmt.Printf("Registry %s serves %s to the clusters of namespace(s) %s (%s).\n\n", r.Name, r.Host(), strings.Join(r.Namespaces(), ", "), strings.Join(settings, ", "))
	if r.AuthRequired() {
		cred, file, err := writeRegistryPassword(cmd, nodes, g.registryPasswordPath(r.Name), r.Name)
		if err != nil {
			return err
		}
		fmt.Printf("  docker login %s -u %s --password-stdin < %s\n", r.Host(), cred.Username, file)
	}
	fmt.Printf(`  docker tag app:dev %[2]s/app:dev && docker push %[2]s/app:dev
  dockyard create cluster dev -n %[3]s --var DOCKYARD_REGISTRY=%[1]s
  kubectl run app --image %[2]s/app:dev
`, r.Name, r.Host(), r.Namespaces()[0])
	return nil
}

// ensureRegistryImage makes Dockyard's registry image when the engine lacks it, as dockyard
// quickstart makes its images. Another image is the engine's to pull when the registry starts.
func ensureRegistryImage(ctx context.Context, g *globals, images *managementOptions, nodes *docker.Manager, image string) error {
	if image != localRegistryImage {
		return nil
	}
	ok, err := nodes.ImageExists(ctx, image)
	if err != nil {
		return errors.Wrapf(err, "looking for image %s on the engine", image)
	}
	if ok {
		return nil
	}
	return provideRegistryImages(ctx, g, images, nodes, []string{image})
}

// registryPasswordPath is where the host keeps a registry's password.
func (g *globals) registryPasswordPath(name string) string {
	return filepath.Join(g.stateDir, "registries", name+".password")
}

// writeRegistryPassword reads the host's credential of a registry through the engine and writes
// its password to a file only the user reads, for docker login --password-stdin; it returns the
// credential (to name its user, never to print its password) and the file.
func writeRegistryPassword(cmd *cobra.Command, nodes *docker.Manager, file, name string) (*docker.RegistryCredential, string, error) {
	cred, err := nodes.RegistryCredential(cmd.Context(), name)
	if err != nil {
		return nil, "", err
	}
	if cred == nil {
		return nil, "", errors.Errorf("registry %s has no credential", name)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, "", errors.Wrapf(err, "creating %s", filepath.Dir(file))
	}
	if err := os.WriteFile(file, []byte(cred.Password+"\n"), 0o600); err != nil {
		return nil, "", errors.Wrapf(err, "writing the password of registry %s", name)
	}
	return cred, file, errors.Wrapf(os.Chmod(file, 0o600), "writing the password of registry %s", name)
}

func registryDeleteCommand(g *globals) *cobra.Command {
	var name string
	var keepData bool
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a local registry and, unless --keep-data, its data",
		Long: `Delete a local registry: its container, its network and, unless --keep-data, its volume. Only
what is labelled as this registry's is removed; a container, network or volume of the same name
that is not is left, and said.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodes, done, err := g.engine(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			left, err := nodes.DeleteRegistry(cmd.Context(), name, keepData)
			if err != nil {
				return err
			}
			for _, l := range left {
				say("left %s", l)
			}
			if err := os.Remove(g.registryPasswordPath(name)); err != nil && !os.IsNotExist(err) {
				return errors.Wrapf(err, "removing the password of registry %s", name)
			}
			say("registry %s deleted", name)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", docker.DefaultRegistryName, "the registry's container name")
	cmd.Flags().BoolVar(&keepData, "keep-data", false, "keep the volume with the pushed images")
	return cmd
}
