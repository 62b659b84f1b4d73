package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
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
	// networkPolicy makes the management cluster enforce NetworkPolicies (kube-router's
	// firewall), so that teams' node Pods there are kept apart.
	networkPolicy bool
}

func (o *managementOptions) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.kubernetesVersion, "kubernetes-version", defaultKubernetesVersion, "Kubernetes version of the node images")
	cmd.Flags().StringVar(&o.images, "images", "local", `images: "local" (Dockyard's own: those the engine lacks are built from Debian's archive and the Go module proxy, no registry; needs root and Go; the manager's is made of this binary) or "kind" (kindest/node and kindest/haproxy, pulled from Docker Hub)`)
	cmd.Flags().StringVar(&o.imageRegistry, "image-registry", "", `a registry path (localhost:5001/dockyard) the images the engine lacks are pulled from, where "dockyard push images" published them; only those it does not hold are built`)
	cmd.Flags().StringSliceVar(&o.zones, "zones", nil, "one worker per zone (e.g. a,b,c), labelled topology.kubernetes.io/zone, with the node image loaded into every node: an infrastructure cluster for clusters of the kubernetes flavor, whose failure domains are the zones")
	cmd.Flags().BoolVar(&o.networkPolicy, "network-policy", false, "enforce NetworkPolicies, ingress and egress (kube-router's firewall, beside flannel; its image is built when the engine lacks it): an infrastructure cluster whose teams' node Pods are kept apart by the NetworkPolicies Dockyard makes")
}

// allImages are the images a management cluster and its clusters run: the node and load
// balancer images of --images, and the components' of the clusterctl configuration config.
func (o *managementOptions) allImages(config string) (node, lb string, components []string, err error) {
	if node, lb, err = o.nodeImages(); err != nil {
		return "", "", nil, err
	}
	components, err = mgmt.ComponentImages(config)
	if o.networkPolicy {
		components = append(components, localNetworkPolicyImage)
	}
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
	var netpol string
	if o.networkPolicy {
		netpol = localNetworkPolicyImage
	}
	mc, err := mgmt.Create(ctx, nodes, mgmt.Options{
		Name: g.managementName, NodeImage: nodeImage, KubernetesVersion: o.kubernetesVersion, Images: images,
		EngineSocket: socket, Zones: o.zones, NetworkPolicyImage: netpol, Logf: say,
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
		Long: `Delete every workload cluster through Cluster API, all at once, and wait for them at most
--wait; then remove what Dockyard made for them on the engine that is still there (containers,
volumes, networks, found by their labels) and the local registries, then the management cluster.
It always ends: what it could not remove (nodes as Pods of another Kubernetes cluster that a
deletion did not reach in time) it names, as abandoned. It exits 0 once nothing of the
management cluster is left on the engine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			nodes, done, err := g.engine(ctx)
			if err != nil {
				return err
			}
			defer done()
			if m, err := g.management(ctx); err == nil {
				if err := deleteWorkloadClusters(ctx, m.client, nodes, timeout); err != nil {
					return err
				}
			} else {
				say("no running management cluster %s (%v): deleting what is left of it", g.managementName, err)
			}
			if err := removeRegistries(ctx, nodes, g.managementName); err != nil {
				return err
			}
			if err := mgmt.Delete(ctx, nodes, g.managementName); err != nil {
				return err
			}
			if left, err := nodes.Leftovers(ctx, docker.ClusterKey{Name: g.managementName}); err != nil || left != nil {
				return errors.Errorf("management cluster %s is not gone from the engine: %+v (%v)", g.managementName, left, err)
			}
			_ = os.Remove(g.kubeconfigPath(g.managementName))
			say("management cluster %s deleted", g.managementName)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "wait", 10*time.Minute, "how long to wait for the workload clusters' deletion, all at once")
	return cmd
}

// deleteWorkloadClusters deletes every workload cluster at once and waits for them at most
// timeout, then removes by their labels what is left of them on the engine, and names the
// clusters whose nodes ran elsewhere (nodes as Pods) that were not gone in time: abandoned.
func deleteWorkloadClusters(ctx context.Context, c client.Client, nodes *docker.Manager, timeout time.Duration) error {
	clusters, err := listClusters(ctx, c)
	if err != nil {
		return err
	}
	for _, cl := range clusters {
		say("deleting cluster %s/%s", cl.Namespace, cl.Name)
		if err := c.Delete(ctx, &cl); err != nil && !apierrors.IsNotFound(err) {
			return errors.Wrapf(err, "deleting cluster %s/%s", cl.Namespace, cl.Name)
		}
	}
	start := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	left := clusters
	for len(left) > 0 && waitCtx.Err() == nil {
		left = slices.DeleteFunc(left, func(cl clusterv1.Cluster) bool {
			return apierrors.IsNotFound(c.Get(waitCtx, client.ObjectKeyFromObject(&cl), &clusterv1.Cluster{}))
		})
		select {
		case <-waitCtx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	if len(clusters) > 0 {
		say("%d of %d workload clusters deleted through Cluster API in %s", len(clusters)-len(left), len(clusters), time.Since(start).Round(time.Second))
	}
	for _, cl := range left {
		dc := &infrav1.DockyardCluster{}
		err := c.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: cl.Spec.InfrastructureRef.Name}, dc)
		if err == nil && dc.Spec.Infrastructure.Kubernetes != nil {
			say("abandoned: cluster %s/%s was not deleted within %s; its nodes as Pods may be left in its infrastructure cluster (%s): remove them there",
				cl.Namespace, cl.Name, timeout, orDefault(dc.Status.Engine, "spec.infrastructure.kubernetes"))
		} else {
			say("cluster %s/%s was not deleted within %s: removing what is left of it on the engine", cl.Namespace, cl.Name, timeout)
		}
	}
	for _, cl := range clusters {
		rest, err := nodes.Leftovers(ctx, docker.ClusterKey{Namespace: cl.Namespace, Name: cl.Name})
		if err != nil {
			return err
		}
		if rest != nil {
			if err := nodes.RemoveCluster(ctx, *rest); err != nil {
				return err
			}
			say("removed what was left of cluster %s/%s on the engine: %d containers, %d volumes, %d networks", cl.Namespace, cl.Name, len(rest.Containers), len(rest.Volumes), len(rest.Networks))
		}
	}
	return nil
}

// removeRegistries removes the local registries on the engine, their images included, unless
// another management cluster made by dockyard is on the engine: registries are the engine's,
// not one management cluster's, so they are then kept and named.
func removeRegistries(ctx context.Context, nodes *docker.Manager, management string) error {
	names, err := nodes.Registries(ctx)
	if err != nil || len(names) == 0 {
		return err
	}
	all, err := nodes.ListClusters(ctx)
	if err != nil {
		return err
	}
	for _, c := range all {
		if c.Cluster.Namespace == "" && c.Cluster.Name != management {
			say("kept the local registries %s: management cluster %s is on the engine too", strings.Join(names, ", "), c.Cluster.Name)
			return nil
		}
	}
	for _, name := range names {
		if _, err := nodes.DeleteRegistry(ctx, name, false); err != nil {
			return errors.Wrapf(err, "removing local registry %s", name)
		}
		say("removed local registry %s and its images", name)
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
