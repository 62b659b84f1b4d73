package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kind "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/util"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/kindconfig"
)

func createCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Create a workload cluster or the management cluster"}
	cmd.AddCommand(createClusterCommand(g), createManagementCommand(g))
	return cmd
}

func getCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "get", Short: "List workload clusters, or print a kubeconfig"}
	cmd.AddCommand(getClustersCommand(g), getKubeconfigCommand(g))
	return cmd
}

func deleteCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "delete", Short: "Delete a workload cluster, or the management cluster and every workload cluster"}
	cmd.AddCommand(deleteClusterCommand(g), deleteManagementCommand(g))
	return cmd
}

// clusterOptions describe a workload cluster to create.
type clusterOptions struct {
	namespace, flavor, kubernetesVersion string
	controlPlanes, workers               int64
	wait                                 time.Duration
	variables                            []string
	// kindConfig is the path of a kind configuration file, kind its content.
	kindConfig string
	kind       *kind.Cluster
	// infrastructureKubeconfig is the path of a kubeconfig of the infrastructure cluster the
	// nodes run on as Pods (the kubernetes flavor).
	infrastructureKubeconfig string
}

func (o *clusterOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&o.namespace, "namespace", "n", "default", "namespace of the cluster's objects in the management cluster")
	fs.StringVar(&o.flavor, "flavor", "", "the template flavor (docs/templates.md): topology, machinepool, ipv6, dual-stack, ignition, ...; empty: the default")
	fs.StringVar(&o.kubernetesVersion, "kubernetes-version", defaultKubernetesVersion, "Kubernetes version of the cluster (its node image is <repository>:<version>)")
	fs.Int64Var(&o.controlPlanes, "control-planes", 1, "control plane machines")
	fs.Int64Var(&o.workers, "workers", 1, "worker machines")
	fs.DurationVar(&o.wait, "wait", 15*time.Minute, "how long to wait for every node to be Ready; 0 returns once the objects are created")
	fs.StringArrayVar(&o.variables, "var", nil, "a template variable, NAME=VALUE (repeatable), e.g. --var DOCKYARD_WORKER_PORTS=...")
	fs.StringVar(&o.infrastructureKubeconfig, "infrastructure-kubeconfig", "", "run the nodes as Pods of the Kubernetes cluster of this kubeconfig (the kubernetes flavor; its context's namespace, or the cluster's), its zones as failure domains (docs/kubernetes-infrastructure.md); the kubeconfig goes into a Secret of the cluster's namespace")
	fs.StringVar(&o.kindConfig, "config", "", "kind's cluster configuration (kind.x-k8s.io/v1alpha4 Cluster): its nodes, their images, labels, mounts and ports, feature gates, runtime config, networking and kubeadm patches become the cluster's objects (docs/daily-loop.md); what Dockyard cannot honour is refused")
}

// loadKind reads --config, which sets the machine counts and the flavor: the flags that would
// too are refused beside it.
func (o *clusterOptions) loadKind(cmd *cobra.Command) error {
	if o.kindConfig == "" {
		return nil
	}
	for _, f := range []string{"control-planes", "workers", "flavor"} {
		if cmd.Flags().Changed(f) {
			return errors.Errorf("--%s and --config: kind's configuration sets the nodes and the IP family", f)
		}
	}
	raw, err := os.ReadFile(o.kindConfig)
	if err != nil {
		return errors.Wrap(err, "--config")
	}
	if o.kind, err = kindconfig.Load(raw); err != nil {
		return errors.Wrapf(err, "--config %s", o.kindConfig)
	}
	if o.flavor, err = kindconfig.Flavor(o.kind); err != nil {
		return errors.Wrapf(err, "--config %s", o.kindConfig)
	}
	o.controlPlanes, o.workers = kindconfig.Counts(o.kind)
	return nil
}

func createClusterCommand(g *globals) *cobra.Command {
	o := &clusterOptions{}
	cmd := &cobra.Command{
		Use:   "cluster NAME",
		Short: "Create a workload cluster through Cluster API and wait for its nodes",
		Long: `Create a workload cluster: clusterctl's library generates it from Dockyard's template (a
flavor of it), the objects are applied to the management cluster, and dockyard prints what
changes until every node is Ready. Its kubeconfig is written to the kubeconfig directory, with
the API server reached on the host.`,
		Example: `  dockyard create cluster dev
  dockyard create cluster ha --control-planes 3 --workers 2
  dockyard create cluster cc --flavor topology --wait 0
  dockyard create cluster dev --config kind.yaml     # kind's v1alpha4 Cluster`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := parseClusterRef(args[0], o.namespace)
			if err != nil {
				return err
			}
			if err := o.loadKind(cmd); err != nil {
				return err
			}
			return createCluster(cmd.Context(), g, o, ref)
		},
	}
	o.register(cmd)
	return cmd
}

// kubernetesFlavor runs the nodes as Pods of an infrastructure cluster.
const kubernetesFlavor = "kubernetes"

// infrastructureSecret names the Secret holding a cluster's infrastructure kubeconfig.
func infrastructureSecret(cluster string) string { return cluster + "-infrastructure-kubeconfig" }

// useInfrastructure reads --infrastructure-kubeconfig, which picks the kubernetes flavor: a
// flag choosing another flavor beside it is refused.
func (o *clusterOptions) useInfrastructure(cluster string) ([]byte, error) {
	if o.infrastructureKubeconfig == "" {
		return nil, nil
	}
	if o.kindConfig != "" || (o.flavor != "" && o.flavor != kubernetesFlavor) {
		return nil, errors.Errorf("--infrastructure-kubeconfig runs the nodes as Pods (the %s flavor): it goes with neither --config nor --flavor %s", kubernetesFlavor, o.flavor)
	}
	raw, err := os.ReadFile(o.infrastructureKubeconfig)
	if err != nil {
		return nil, errors.Wrap(err, "--infrastructure-kubeconfig")
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil, errors.Wrapf(err, "--infrastructure-kubeconfig %s", o.infrastructureKubeconfig)
	}
	// The manager refuses it otherwise: say so before anything is made.
	if err := infrastructure.SelfContainedKubeconfig(cfg); err != nil {
		return nil, errors.Wrapf(err, "--infrastructure-kubeconfig %s", o.infrastructureKubeconfig)
	}
	o.flavor = kubernetesFlavor
	o.variables = append(o.variables, "DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET="+infrastructureSecret(cluster))
	return raw, nil
}

// applyInfrastructureSecret puts the infrastructure kubeconfig in the Secret the cluster's
// DockyardCluster names, labelled so clusterctl move takes it along; with dryRun the API server
// only checks it. It reports whether the Secret was created rather than updated.
func applyInfrastructureSecret(ctx context.Context, c client.Client, ref clusterRef, kubeconfig []byte, dryRun bool) (bool, error) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: infrastructureSecret(ref.Name), Labels: map[string]string{
			clusterv1.ClusterNameLabel: ref.Name, clusterctlv1.ClusterctlMoveLabel: "",
		}},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: kubeconfig},
	}
	var createOpts []client.CreateOption
	var updateOpts []client.UpdateOption
	if dryRun {
		createOpts, updateOpts = append(createOpts, client.DryRunAll), append(updateOpts, client.DryRunAll)
	}
	err := c.Create(ctx, s, createOpts...)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, errors.Wrapf(err, "creating Secret %s", s.Name)
	}
	return false, errors.Wrapf(c.Update(ctx, s, updateOpts...), "updating Secret %s", s.Name)
}

// ownInfrastructureSecret makes the Cluster the owner of its infrastructure Secret, so the
// Secret goes with it.
func ownInfrastructureSecret(ctx context.Context, c client.Client, ref clusterRef) error {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, cluster); err != nil {
		return errors.Wrapf(err, "reading Cluster %s", ref)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: infrastructureSecret(ref.Name)}, s); err != nil {
		return errors.Wrapf(err, "reading Secret %s", infrastructureSecret(ref.Name))
	}
	s.OwnerReferences = util.EnsureOwnerRef(s.OwnerReferences, metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	})
	return errors.Wrapf(c.Update(ctx, s), "owning Secret %s", s.Name)
}

func createCluster(ctx context.Context, g *globals, o *clusterOptions, ref clusterRef) error {
	infraKubeconfig, err := o.useInfrastructure(ref.Name)
	if err != nil {
		return err
	}
	vars, err := templateVariables(o.variables)
	if err != nil {
		return err
	}
	m, err := g.management(ctx)
	if err != nil {
		return err
	}
	for k, v := range vars {
		_ = os.Setenv(k, v) // clusterctl's library reads variables from the environment
	}
	objs, err := generateCluster(ctx, g, o, ref, m.kubeconfig)
	if err != nil {
		return err
	}
	if err := applyCluster(ctx, m.client, ref, objs, infraKubeconfig); err != nil {
		return err
	}
	flavor := o.flavor
	if flavor == "" {
		flavor = "default"
	}
	say("created cluster %s (%s flavor, Kubernetes %s): %d control plane and %d worker machines", ref, flavor, o.kubernetesVersion, o.controlPlanes, o.workers)
	if o.wait == 0 {
		return nil
	}
	return waitCreatedCluster(ctx, g, o, m.client, ref)
}

// templateVariables parses the --var flags, NAME=VALUE each.
func templateVariables(variables []string) (map[string]string, error) {
	vars := map[string]string{}
	for _, v := range variables {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, errors.Errorf("--var %q: want NAME=VALUE", v)
		}
		vars[k] = val
	}
	return vars, nil
}

// generateCluster generates the cluster's objects from Dockyard's template in the management
// cluster's clusterctl repository, changed as kind's configuration asks.
func generateCluster(ctx context.Context, g *globals, o *clusterOptions, ref clusterRef, kubeconfig string) ([]*unstructured.Unstructured, error) {
	config, err := g.clusterctlConfig()
	if err != nil {
		return nil, err
	}
	c, err := clusterctl(ctx, config)
	if err != nil {
		return nil, err
	}
	provider, err := templateProvider(ctx, config, kubeconfig)
	if err != nil {
		return nil, err
	}
	tmpl, err := c.GetClusterTemplate(ctx, clusterctlclient.GetClusterTemplateOptions{
		Kubeconfig:               clusterctlclient.Kubeconfig{Path: kubeconfig},
		ProviderRepositorySource: &clusterctlclient.ProviderRepositorySourceOptions{InfrastructureProvider: provider, Flavor: o.flavor},
		ClusterName:              ref.Name,
		TargetNamespace:          ref.Namespace,
		KubernetesVersion:        o.kubernetesVersion,
		ControlPlaneMachineCount: ptr.To(o.controlPlanes),
		WorkerMachineCount:       ptr.To(o.workers),
	})
	if err != nil {
		return nil, errors.Wrap(err, "generating the cluster from Dockyard's template")
	}
	manifest, err := tmpl.Yaml()
	if err != nil {
		return nil, errors.Wrap(err, "generating the cluster from Dockyard's template")
	}
	return clusterObjects(manifest, ref.Name, o.kind)
}

// applyCluster creates the cluster's objects all or none: the Secret of the infrastructure
// cluster's kubeconfig when there is one, the objects, then the Cluster made the Secret's owner.
// A server-side dry run of each, in that order, comes first, through the management cluster's
// validation and webhooks: when one is refused nothing is created, and the namespace the
// command made for the cluster is removed again. Applying for real can still fail (something
// changed since the dry run); what this run created is then removed before the error returns.
func applyCluster(ctx context.Context, c client.Client, ref clusterRef, objs []*unstructured.Unstructured, infraKubeconfig []byte) error {
	run := &clusterApply{c: c, ref: ref, existed: map[string]bool{}}
	var err error
	if run.madeNamespace, err = ensureNamespace(ctx, c, ref.Namespace); err != nil {
		return err
	}
	if err := run.dryRun(ctx, objs, infraKubeconfig); err != nil {
		return run.refused(ctx, err)
	}
	if err := run.apply(ctx, objs, infraKubeconfig); err != nil {
		return run.undo(ctx, err)
	}
	return nil
}

// waitCreatedCluster waits for the cluster's nodes (Ready ones, unless the cluster has no CNI)
// and writes its kubeconfig, whose path it prints.
func waitCreatedCluster(ctx context.Context, g *globals, o *clusterOptions, c client.Client, ref clusterRef) error {
	start := time.Now()
	if o.kind != nil && o.kind.Networking.DisableDefaultCNI {
		// As kind: nodes without a CNI are not Ready until the user installs one.
		if err := waitNodes(ctx, c, ref, o.wait); err != nil {
			return err
		}
		say("cluster %s has its nodes in %s; they become Ready once a CNI is installed (networking.disableDefaultCNI)", ref, time.Since(start).Round(time.Second))
	} else {
		if err := waitReady(ctx, c, ref, o.wait); err != nil {
			return err
		}
		say("cluster %s ready in %s", ref, time.Since(start).Round(time.Second))
	}
	path, err := writeClusterKubeconfig(ctx, g, c, ref)
	if err != nil {
		return err
	}
	fmt.Printf("\n  kubectl --kubeconfig %s get nodes\n\n", path)
	return nil
}

// clusterObjects are the objects of a generated cluster, changed as kind's configuration asks
// when there is one.
func clusterObjects(manifest []byte, name string, cfg *kind.Cluster) ([]*unstructured.Unstructured, error) {
	decoded, err := capiyaml.ToUnstructured(manifest)
	if err != nil {
		return nil, errors.Wrap(err, "decoding the generated cluster")
	}
	objs := make([]*unstructured.Unstructured, len(decoded))
	for i := range decoded {
		objs[i] = &decoded[i]
	}
	if cfg == nil {
		return objs, nil
	}
	return kindconfig.Apply(cfg, name, objs)
}

// templateProvider names the Dockyard release whose templates clusterctl generates from: the
// one clusterctl installed in the management cluster, or, where Dockyard was installed
// otherwise (clusterctl keeps no inventory of it there), the one the configuration names.
func templateProvider(ctx context.Context, configPath, kubeconfigPath string) (string, error) {
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		return "", errors.Wrap(err, "reading the management cluster's kubeconfig")
	}
	if installed, err := dockyardInstalled(ctx, kubeconfig); err != nil || installed {
		return "dockyard", err
	}
	cfg, err := clusterctlconfig.New(ctx, configPath)
	if err != nil {
		return "", errors.Wrapf(err, "reading the clusterctl configuration %s", configPath)
	}
	p, err := cfg.Providers().Get("dockyard", clusterctlv1.InfrastructureProviderType)
	if err != nil {
		return "", errors.Wrapf(err, "the clusterctl configuration %s names no Dockyard provider", configPath)
	}
	// <repository>/infrastructure-dockyard/<version>/infrastructure-components.yaml
	return "dockyard:" + path.Base(path.Dir(p.URL())), nil
}

func getClustersCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "clusters",
		Aliases: []string{"cluster"},
		Short:   "List the workload clusters Dockyard runs",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := g.management(cmd.Context())
			if err != nil {
				return err
			}
			clusters, err := listClusters(cmd.Context(), m.client)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAMESPACE\tNAME\tPHASE\tCONTROL PLANE READY\tWORKERS READY\tAGE")
			for _, c := range clusters {
				cp, workers := "-", "-"
				if s := c.Status.ControlPlane; s != nil {
					cp = fmt.Sprintf("%d/%d", ptr.Deref(s.ReadyReplicas, 0), ptr.Deref(s.DesiredReplicas, 0))
				}
				if s := c.Status.Workers; s != nil {
					workers = fmt.Sprintf("%d/%d", ptr.Deref(s.ReadyReplicas, 0), ptr.Deref(s.DesiredReplicas, 0))
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Status.Phase, cp, workers,
					duration.HumanDuration(time.Since(c.CreationTimestamp.Time)))
			}
			return w.Flush()
		},
	}
}

// listClusters returns the Clusters whose infrastructure is Dockyard's.
func listClusters(ctx context.Context, c client.Client) ([]clusterv1.Cluster, error) {
	list := &clusterv1.ClusterList{}
	if err := c.List(ctx, list); err != nil {
		return nil, errors.Wrap(err, "listing Clusters")
	}
	var out []clusterv1.Cluster
	for _, cl := range list.Items {
		if cl.Spec.InfrastructureRef.Kind == "DockyardCluster" && cl.Spec.InfrastructureRef.APIGroup == infrav1.GroupVersion.Group {
			out = append(out, cl)
		}
	}
	return out, nil
}

func getKubeconfigCommand(g *globals) *cobra.Command {
	var namespace string
	var internal, management bool
	cmd := &cobra.Command{
		Use:   "kubeconfig [NAME]",
		Short: "Print a workload cluster's kubeconfig, its API server reached on the host",
		Long: `Print a workload cluster's kubeconfig. Its API server is the load balancer's port published on
the host's 127.0.0.1 (certificates name it), so it works from the host on every engine;
--internal keeps the address on the cluster's network, which containers on it use.
--management prints the management cluster's.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if management {
				return printManagementKubeconfig(ctx, g)
			}
			if len(args) != 1 {
				return errors.New("name the cluster, or pass --management")
			}
			ref, m, err := g.cluster(ctx, args[0], namespace)
			if err != nil {
				return err
			}
			kubeconfig, err := clusterKubeconfig(ctx, g, m.client, ref, internal)
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(kubeconfig)
			return err
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace")
	cmd.Flags().BoolVar(&internal, "internal", false, "keep the API server's address on the cluster's network")
	cmd.Flags().BoolVar(&management, "management", false, "print the management cluster's kubeconfig")
	return cmd
}

// clusterKubeconfig reads the kubeconfig Cluster API wrote for a cluster and, unless internal,
// points it at the load balancer's port on the host.
func clusterKubeconfig(ctx context.Context, g *globals, c client.Client, ref clusterRef, internal bool) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name + "-kubeconfig"}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errors.Errorf("cluster %s has no kubeconfig yet (or does not exist: dockyard get clusters)", ref)
		}
		return nil, errors.Wrapf(err, "reading the kubeconfig of cluster %s", ref)
	}
	kubeconfig := secret.Data["value"]
	if internal {
		return kubeconfig, nil
	}
	nodes, done, err := g.clusterNodes(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer done()
	lb, err := nodes.FindLoadBalancer(ctx, ref.key())
	if err != nil {
		return nil, err
	}
	dc := &infrav1.DockyardCluster{}
	if err := c.Get(ctx, ref.objectKey(), dc); err != nil {
		return nil, errors.Wrapf(err, "reading the DockyardCluster of %s", ref)
	}
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the kubeconfig of cluster %s", ref)
	}
	hosts, port, err := lb.NodePort(ctx)
	if err != nil {
		return nil, err
	}
	if port != 0 {
		// Nodes as Pods: the endpoint is a Service's cluster address; the host reaches it on a
		// node of the infrastructure cluster, the certificate checked against the endpoint.
		if len(hosts) == 0 {
			return nil, errors.Errorf("the infrastructure cluster of %s has no Ready node to reach its endpoint through", ref)
		}
		for _, cluster := range cfg.Clusters {
			cluster.Server = "https://" + net.JoinHostPort(hosts[0], strconv.Itoa(port))
			cluster.TLSServerName = dc.Spec.ControlPlaneEndpoint.Host
		}
		return clientcmd.Write(*cfg)
	}
	server, warning, err := hostServer(ref, dc, lb)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		fmt.Fprintf(os.Stderr, "Warning: %s\n", warning)
	}
	for _, cluster := range cfg.Clusters {
		cluster.Server = server
	}
	return clientcmd.Write(*cfg)
}

// hostServer is where the engine's host reaches a cluster's API server: the port its load
// balancer publishes now, as the engine reports it. That is spec.loadBalancer.hostPort unless
// the port was taken when the load balancer was last created (or the load balancer predates
// it); the warning then says that kubeconfigs naming the kept port fail.
func hostServer(ref clusterRef, dc *infrav1.DockyardCluster, lb *docker.LoadBalancer) (server, warning string, err error) {
	if lb == nil {
		return "", "", errors.Errorf("cluster %s has no load balancer on the engine", ref)
	}
	hostIP, hostPort := lb.PublishedPort(int(dc.Spec.ControlPlaneEndpoint.Port))
	if hostPort == 0 && !lb.Running {
		return "", "", errors.Errorf("the load balancer of cluster %s is %s; Dockyard starts it again within seconds, then try again", ref, lb.State)
	}
	if hostPort == 0 {
		return "", "", errors.Errorf("the load balancer of cluster %s publishes no port on the host; use --internal", ref)
	}
	if hostIP == "" || hostIP == "0.0.0.0" {
		hostIP = "127.0.0.1"
	}
	if kept := int(dc.Spec.LoadBalancer.HostPort); kept != 0 && kept != hostPort {
		warning = fmt.Sprintf("the load balancer of cluster %s publishes the API server on %s:%d, not on its kept port %d "+
			"(spec.loadBalancer.hostPort; the DockyardCluster's LoadBalancerHostPortKept condition says why). "+
			"Kubeconfigs naming port %d, such as the one written when the cluster was created, fail until the load balancer is back there; this one names port %d",
			ref, hostIP, hostPort, kept, kept, hostPort)
	}
	return "https://" + net.JoinHostPort(hostIP, strconv.Itoa(hostPort)), warning, nil
}

// writeClusterKubeconfig writes a cluster's host kubeconfig into the kubeconfig directory.
func writeClusterKubeconfig(ctx context.Context, g *globals, c client.Client, ref clusterRef) (string, error) {
	kubeconfig, err := clusterKubeconfig(ctx, g, c, ref, false)
	if err != nil {
		return "", err
	}
	name := ref.Name
	if ref.Namespace != "default" {
		name = ref.Namespace + "." + ref.Name
	}
	path := g.kubeconfigPath(name)
	return path, writeKubeconfig(path, kubeconfig)
}

func deleteClusterCommand(g *globals) *cobra.Command {
	var namespace string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cluster NAME",
		Short: "Delete a workload cluster through Cluster API and wait until nothing of it is left",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref, m, err := g.cluster(ctx, args[0], namespace)
			if err != nil {
				return err
			}
			nodes, done, err := g.engine(ctx)
			if err != nil {
				return err
			}
			defer done()
			return deleteCluster(ctx, m.client, nodes, ref, timeout)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace")
	cmd.Flags().DurationVar(&timeout, "wait", 10*time.Minute, "how long to wait; 0 returns once the deletion started")
	return cmd
}

// deleteCluster deletes the Cluster and waits until nothing of it is left on the engine.
func deleteCluster(ctx context.Context, c client.Client, nodes *docker.Manager, ref clusterRef, timeout time.Duration) error {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, ref.objectKey(), cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return errors.Errorf("cluster %s does not exist (dockyard get clusters lists them)", ref)
		}
		return errors.Wrapf(err, "reading cluster %s", ref)
	}
	say("deleting cluster %s", ref)
	if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "deleting cluster %s", ref)
	}
	if timeout == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	for {
		err := c.Get(ctx, ref.objectKey(), &clusterv1.Cluster{})
		left, lerr := nodes.Leftovers(ctx, ref.key())
		if apierrors.IsNotFound(err) && lerr == nil && left == nil {
			say("cluster %s deleted in %s; no container, volume or network of it is left", ref, time.Since(start).Round(time.Second))
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrapf(ctx.Err(), "waiting for cluster %s to be deleted", ref)
		case <-time.After(2 * time.Second):
		}
	}
}
