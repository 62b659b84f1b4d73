package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/cmd/tools/mgmt"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// defaultKubernetesVersion is the version of the node images make images builds.
const defaultKubernetesVersion = "v1.34.4"

// managementOptions describe the management cluster dockyard makes.
type managementOptions struct {
	kubernetesVersion string
	// images: "local" (Dockyard's own, built when missing) or "kind" (kind's, from Docker Hub).
	images string
	// imageRegistry, when set, is where the images the engine lacks are pulled from before any
	// is built (dockyard push images publishes them there).
	imageRegistry string
	// zones give the management cluster one worker per zone, labelled with it, and every node
	// the node image: an infrastructure cluster for clusters of the kubernetes flavor.
	zones []string
}

func (o *managementOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.kubernetesVersion, "kubernetes-version", defaultKubernetesVersion, "Kubernetes version of the node images")
	cmd.Flags().StringVar(&o.images, "images", "local", `images: "local" (Dockyard's own: those the engine lacks are built from Debian's archive and the Go module proxy, no registry; needs root and Go; the manager's is made of this binary) or "kind" (kindest/node and kindest/haproxy, pulled from Docker Hub)`)
	cmd.Flags().StringVar(&o.imageRegistry, "image-registry", "", `a registry path (localhost:5001/dockyard) the images the engine lacks are pulled from, where "dockyard push images" published them; only those it does not hold are built`)
	cmd.Flags().StringSliceVar(&o.zones, "zones", nil, "one worker per zone (e.g. a,b,c), labelled topology.kubernetes.io/zone, with the node image loaded into every node: an infrastructure cluster for clusters of the kubernetes flavor, whose failure domains are the zones")
}

// allImages are the images a management cluster and its clusters run: the node and load
// balancer images of --images, and the components' of the clusterctl configuration config.
func (o *managementOptions) allImages(config string) (node, lb string, components []string, err error) {
	if node, lb, err = o.nodeImages(); err != nil {
		return "", "", nil, err
	}
	components, err = mgmt.ComponentImages(config)
	return node, lb, components, err
}

// nodeImages are the node and load balancer images of --images.
func (o *managementOptions) nodeImages() (node, lb string, err error) {
	switch o.images {
	case "local":
		return imagebuild.NodeImageName(o.kubernetesVersion), localLoadBalancerImage, nil
	case "kind":
		return docker.DefaultNodeImageRepository + ":" + o.kubernetesVersion, docker.DefaultLoadBalancerImage, nil
	}
	return "", "", errors.Errorf(`--images=%q: want "local" or "kind"`, o.images)
}

func createManagementCommand(g *globals) *cobra.Command {
	o := &managementOptions{}
	cmd := &cobra.Command{
		Use:   "management",
		Short: "Make the management cluster in containers and install Cluster API and Dockyard in it",
		Long: `Make (or finish making) the management cluster: Kubernetes in one node container with the
components' images preloaded and the engine's socket mounted, then clusterctl init (its library)
with the providers of the clusterctl repository dockyard carries (or of --clusterctl-config):
cert-manager, Cluster API's core, kubeadm bootstrap and control plane providers, and Dockyard.
Running it again changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := ensureManagement(cmd.Context(), g, o)
			return err
		},
	}
	o.register(cmd)
	return cmd
}

// ensureManagement makes the management cluster and installs the providers; it returns the
// path of the management cluster's kubeconfig.
func ensureManagement(ctx context.Context, g *globals, o *managementOptions) (string, error) {
	if o.imageRegistry != "" && o.images != "local" {
		return "", errors.Errorf("--image-registry holds Dockyard's own images (--images local), not kind's (--images %s)", o.images)
	}
	config, err := g.clusterctlConfig()
	if err != nil {
		return "", err
	}
	nodeImage, lbImage, images, err := o.allImages(config)
	if err != nil {
		return "", err
	}
	nodes, done, err := g.engine(ctx)
	if err != nil {
		return "", err
	}
	defer done()
	socket, err := engineSocket(g.runtime)
	if err != nil {
		return "", err
	}
	if err := provideImages(ctx, g, o, nodes, append([]string{nodeImage, lbImage}, images...)); err != nil {
		return "", err
	}
	path, kubeconfig, err := createManagementCluster(ctx, g, o, nodes, socket, nodeImage, images)
	if err != nil {
		return "", err
	}
	if err := installProviders(ctx, g, o, config, path, kubeconfig, nodeImage, lbImage); err != nil {
		return "", err
	}
	return path, nil
}

// provideImages gets the images the engine lacks from --image-registry, or builds them
// (--images local), then copies them from Docker when the engine is another.
func provideImages(ctx context.Context, g *globals, o *managementOptions, nodes *docker.Manager, want []string) error {
	if o.imageRegistry != "" {
		if err := pullMissingImages(ctx, o.imageRegistry, want); err != nil {
			return err
		}
	}
	if o.images == "local" {
		if err := buildMissingImages(ctx, o.kubernetesVersion, want); err != nil {
			return err
		}
	}
	return copyFromDocker(ctx, g, o, nodes, want)
}

// createManagementCluster creates the management cluster's node container with the images it
// preloads, writes its kubeconfig, and returns the kubeconfig's path and content.
func createManagementCluster(ctx context.Context, g *globals, o *managementOptions, nodes *docker.Manager, socket, nodeImage string, images []string) (string, []byte, error) {
	start := time.Now()
	say("management cluster %s: Kubernetes %s in a node container", g.managementName, o.kubernetesVersion)
	if len(o.zones) > 0 {
		// Clusters of the kubernetes flavor run the node image as Pods of this cluster.
		images = append(images, nodeImage)
	}
	mc, err := mgmt.Create(ctx, nodes, mgmt.Options{
		Name: g.managementName, NodeImage: nodeImage, KubernetesVersion: o.kubernetesVersion, Images: images,
		EngineSocket: socket, Zones: o.zones, Logf: say,
	})
	if err != nil {
		return "", nil, err
	}
	path := g.kubeconfigPath(mc.Name)
	if err := writeKubeconfig(path, mc.Kubeconfig); err != nil {
		return "", nil, err
	}
	say("management cluster ready in %s", time.Since(start).Round(time.Second))
	return path, mc.Kubeconfig, nil
}

// installProviders has clusterctl install cert-manager, Cluster API and Dockyard in the
// management cluster, unless Dockyard is installed already.
func installProviders(ctx context.Context, g *globals, o *managementOptions, config, path string, kubeconfig []byte, nodeImage, lbImage string) error {
	step := time.Now()
	say("clusterctl init: cert-manager, Cluster API (core, kubeadm bootstrap and control plane) and Dockyard")
	setVariables(map[string]string{
		"DOCKYARD_LB_IMAGE":              lbImage,
		"DOCKYARD_NODE_IMAGE_REPOSITORY": strings.TrimSuffix(nodeImage, ":"+o.kubernetesVersion),
		"DOCKYARD_CONTAINER_RUNTIME":     g.runtime.Name,
	})
	installed, err := dockyardInstalled(ctx, kubeconfig)
	if err != nil {
		return err
	}
	if installed {
		say("Dockyard is installed already (clusterctl's Provider infrastructure-dockyard exists)")
		return nil
	}
	c, err := clusterctl(ctx, config)
	if err != nil {
		return err
	}
	if _, err := c.Init(ctx, clusterctlclient.InitOptions{
		Kubeconfig:              clusterctlclient.Kubeconfig{Path: path},
		InfrastructureProviders: []string{"dockyard"},
		WaitProviders:           true,
		WaitProviderTimeout:     10 * time.Minute,
	}); err != nil {
		return errors.Wrap(err, "clusterctl init")
	}
	say("every provider's pods are ready in %s; kubeconfig %s", time.Since(step).Round(time.Second), path)
	return nil
}

// dockyardInstalled reports whether clusterctl installed Dockyard in a cluster.
func dockyardInstalled(ctx context.Context, kubeconfig []byte) (bool, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return false, errors.Wrap(err, "reading the management cluster's kubeconfig")
	}
	sc := runtime.NewScheme()
	if err := clusterctlv1.AddToScheme(sc); err != nil {
		return false, err
	}
	c, err := client.New(cfg, client.Options{Scheme: sc})
	if err != nil {
		return false, err
	}
	providers := &clusterctlv1.ProviderList{}
	if err := c.List(ctx, providers); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return false, nil // clusterctl never ran there
		}
		return false, errors.Wrap(err, "listing clusterctl's providers")
	}
	for _, p := range providers.Items {
		if p.Type == string(clusterctlv1.InfrastructureProviderType) && p.ProviderName == "dockyard" {
			return true, nil
		}
	}
	return false, nil
}

// clusterctl is clusterctl's library with the configuration file; its progress goes to the
// terminal.
func clusterctl(ctx context.Context, config string) (clusterctlclient.Client, error) {
	verbosity := 0
	clusterctllog.SetLogger(clusterctllog.NewLogger(clusterctllog.WithThreshold(&verbosity)))
	c, err := clusterctlclient.New(ctx, config)
	return c, errors.Wrapf(err, "reading the clusterctl configuration %s", config)
}

// setVariables sets clusterctl variables (they go into the providers' components and the
// cluster templates) unless the environment sets them already.
func setVariables(vars map[string]string) {
	for k, v := range vars {
		if _, ok := os.LookupEnv(k); !ok {
			_ = os.Setenv(k, v)
		}
	}
}

// engineSocket is the engine's socket on its host, which the management cluster's node mounts
// for the manager's pod.
func engineSocket(rt runtimes.Config) (string, error) {
	switch {
	case rt.Name == runtimes.Containerd:
		// The containerd runtime keeps networks (CNI), network namespaces and volumes on the
		// engine's host; a manager in a pod cannot reach them.
		return "", errors.New("a management cluster drives its engine from a pod, which Docker and Podman allow but containerd does not " +
			"(Dockyard's containerd runtime keeps networks and volumes on the host): use --container-runtime docker or podman, " +
			"or run Dockyard's manager as a host process with --container-runtime containerd (docs/runtimes.md)")
	case rt.Endpoint != "":
		return strings.TrimPrefix(rt.Endpoint, "unix://"), nil
	}
	return runtimes.DefaultSocket(rt.Name), nil
}

// copyFromDocker copies images from Docker, where make images builds them, into the engine
// when it is another one.
func copyFromDocker(ctx context.Context, g *globals, o *managementOptions, to *docker.Manager, refs []string) error {
	if g.runtime.Name == runtimes.Docker || o.images != "local" {
		return nil
	}
	from, err := runtimes.New(runtimes.Config{Name: runtimes.Docker})
	if err != nil {
		return err
	}
	defer func() { _ = from.Close() }()
	return errors.Wrap(to.CopyImagesFrom(ctx, docker.NewManager(from, docker.ManagerOptions{}), refs, os.Stderr),
		"copying the images from Docker, where make images builds them")
}

func deleteManagementCommand(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "management",
		Short: "Delete every workload cluster through Cluster API, then the management cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			nodes, done, err := g.engine(ctx)
			if err != nil {
				return err
			}
			defer done()
			if m, err := g.management(ctx); err == nil {
				clusters, err := listClusters(ctx, m.client)
				if err != nil {
					return err
				}
				for _, c := range clusters {
					if err := deleteCluster(ctx, m.client, nodes, clusterRef{Namespace: c.Namespace, Name: c.Name}, timeout); err != nil {
						return err
					}
				}
			} else {
				say("no running management cluster %s (%v): deleting what is left of it", g.managementName, err)
			}
			if err := mgmt.Delete(ctx, nodes, g.managementName); err != nil {
				return err
			}
			_ = os.Remove(g.kubeconfigPath(g.managementName))
			say("management cluster %s deleted", g.managementName)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "wait", 10*time.Minute, "how long to wait for each workload cluster's deletion")
	return cmd
}

func printManagementKubeconfig(ctx context.Context, g *globals) error {
	nodes, done, err := g.engine(ctx)
	if err != nil {
		return err
	}
	defer done()
	mc, err := mgmt.Get(ctx, nodes, g.managementName)
	if err != nil {
		return err
	}
	_, err = fmt.Print(string(mc.Kubeconfig))
	return err
}
