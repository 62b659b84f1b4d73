// Package manager is Dockyard's manager: its controllers and webhooks, a Cluster API
// infrastructure provider whose nodes are containers on a local container engine. The manager
// command (main.go) runs it, and so does the dockyard command when it is called as manager: an
// image made of the dockyard binary alone runs the same manager.
package manager

import (
	"cmp"
	"context"
	"flag"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/pkg/errors"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controllers/remote"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/flags"

	"github.com/dockyard-dev/dockyard/controllers"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/pkg/webhooks"
)

const controllerName = "dockyard-manager"

// The diagnostics endpoint authenticates and authorizes its callers.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// options are the manager's command-line flags.
type options struct {
	watchNamespace                 string
	watchFilterValue               string
	leaderElect                    bool
	leaderElectionLeaseDuration    time.Duration
	leaderElectionRenewDeadline    time.Duration
	leaderElectionRetryPeriod      time.Duration
	healthAddr                     string
	webhookPort                    int
	webhookCertDir                 string
	restConfigQPS                  float32
	restConfigBurst                int
	syncPeriod                     time.Duration
	clusterConcurrency             int
	machineConcurrency             int
	clusterCacheConcurrency        int
	clusterCacheClientQPS          float32
	clusterCacheClientBurst        int
	loadBalancerImage              string
	nodeImageRepository            string
	nodePrivileged                 string
	managementNode                 string
	managementPortsOpenToWorkloads []string
	guardEngineHost                bool
	hostPortsOpenToWorkloads       []string
	allowedHostPaths               []string
	allowedImageRepositories       []string
	allowedLoadImages              []string
	allowedListenAddresses         []string
	minHostPort                    int
	allowedNetworks                []string
	allowedSubnetPools             []string
	reservedSubnets                []string
	managementInfrastructure       []string
	hostEngineNamespaces           []string
	inMemoryNamespaces             []string
	inMemoryAddress                string
	inMemoryHost                   string
	infrastructureServers          []string
	reconcileTimeout               time.Duration
	maxServiceLoadBalancers        int
	containerRuntime               string
	containerRuntimeEndpoint       string
	managerOptions                 flags.ManagerOptions
	logOptions                     *logs.Options
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	o.logOptions = logs.NewOptions()
	logsv1.AddFlags(o.logOptions, fs)

	fs.StringVar(&o.watchNamespace, "namespace", "",
		`Namespace the controllers watch. Defaults to all namespaces ("" too, what clusterctl renders for an empty DOCKYARD_WATCH_NAMESPACE).`)
	fs.StringVar(&o.watchFilterValue, "watch-filter", "",
		"Reconcile only objects whose cluster.x-k8s.io/watch-filter label has this value.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader before running the controllers, so only one manager acts at a time.")
	fs.DurationVar(&o.leaderElectionLeaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long non-leaders wait before trying to take over leadership.")
	fs.DurationVar(&o.leaderElectionRenewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader retries renewing its lease before giving it up.")
	fs.DurationVar(&o.leaderElectionRetryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How long clients wait between leadership attempts.")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440",
		"Address of the health (/healthz) and readiness (/readyz) endpoints.")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443,
		"Port of the webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs/",
		"Directory holding tls.crt and tls.key for the webhook server.")
	fs.Float32Var(&o.restConfigQPS, "kube-api-qps", controllers.DefaultKubeAPIQPS,
		"Maximum queries per second to the management cluster's API server.")
	fs.IntVar(&o.restConfigBurst, "kube-api-burst", controllers.DefaultKubeAPIBurst,
		"Maximum burst of queries to the management cluster's API server.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute,
		"How often every watched object is reconciled even without changes.")
	fs.Float32Var(&o.clusterCacheClientQPS, "clustercache-client-qps", controllers.DefaultClusterCacheClientQPS,
		"Maximum queries per second to each workload cluster's API server.")
	fs.IntVar(&o.clusterCacheClientBurst, "clustercache-client-burst", controllers.DefaultClusterCacheClientBurst,
		"Maximum burst of queries to each workload cluster's API server.")
	fs.IntVar(&o.clusterConcurrency, "dockyardcluster-concurrency", controllers.DefaultClusterConcurrency,
		"DockyardClusters reconciled at the same time; as many clusters' Service load balancers and DockyardMachineTemplates.")
	fs.IntVar(&o.machineConcurrency, "dockyardmachine-concurrency", controllers.DefaultMachineConcurrency,
		"DockyardMachines reconciled at the same time; as many DockyardMachinePools.")
	fs.IntVar(&o.clusterCacheConcurrency, "clustercache-concurrency", controllers.DefaultClusterCacheConcurrency,
		"Workload cluster connections set up at the same time.")
	fs.StringVar(&o.loadBalancerImage, "load-balancer-image", docker.DefaultLoadBalancerImage,
		"haproxy image of clusters whose spec.loadBalancer.image is empty.")
	fs.StringVar(&o.nodeImageRepository, "node-image-repository", docker.DefaultNodeImageRepository,
		"Repository of the node image of machines whose spec.image is empty; the tag is the Machine's Kubernetes version.")
	fs.StringVar(&o.nodePrivileged, "node-privileged", string(docker.PrivilegeAuto),
		"Run node containers privileged: auto (probe the engine once, fall back to an explicit capability set where privileged containers are refused), always or never.")
	fs.StringVar(&o.managementNode, "management-node", os.Getenv("NODE_NAME"),
		"Container name of the node this manager runs on (defaults to $NODE_NAME, which the Deployment sets). When the management cluster's nodes are containers on the same engine (kind, or a Dockyard cluster), they are connected to every workload cluster's network so controllers in pods reach the workload API servers. Empty, or a name no container has: nothing is connected.")
	fs.StringSliceVar(&o.managementPortsOpenToWorkloads, "management-ports-open-to-workloads", nil,
		"TCP ports of the management cluster's nodes that workload nodes may connect to (e.g. 6443, its API server, for tests whose nodes read the management cluster). The management nodes drop every other connection a workload network opens. Default: none.")
	fs.BoolVar(&o.guardEngineHost, "guard-engine-host", true,
		"Keep the engine's host from answering the networks Dockyard makes for workload clusters: the host is their gateway, and a node reaches whatever the host listens on, on any address. A chain DOCKYARD-HOST in the host's filter table (set by a short-lived helper container on the host's network, with NET_ADMIN) lets through replies and --host-ports-open-to-workloads only. false leaves the host's firewall as it is.")
	fs.StringSliceVar(&o.hostPortsOpenToWorkloads, "host-ports-open-to-workloads", nil,
		"TCP ports of the engine's host that workload nodes may connect to on their gateway, with --guard-engine-host. Default: none.")
	o.addPolicyFlags(fs)
	fs.IntVar(&o.maxServiceLoadBalancers, "max-service-load-balancers-per-cluster", controllers.DefaultMaxServiceLoadBalancersPerCluster,
		"Service load balancers (haproxy containers on the engine's host) one workload cluster may have: Services of type LoadBalancer beyond it get none, and an Event saying so.")
	fs.DurationVar(&o.reconcileTimeout, "reconcile-timeout", 5*time.Minute,
		"Deadline of one reconcile: a node or engine that hangs holds one worker for at most this long.")
	fs.StringVar(&o.containerRuntime, "container-runtime", runtimes.Docker,
		"Container engine the nodes run on: "+strings.Join(runtimes.Names(), ", ")+".")
	fs.StringVar(&o.containerRuntimeEndpoint, "container-runtime-endpoint", "",
		"The engine's address, e.g. unix:///run/podman/podman.sock. Empty: Docker's DOCKER_HOST or its local socket, Podman's rootful socket, or Dockyard's containerd socket (see docs/runtimes.md).")
	fs.StringVar(&o.inMemoryAddress, "in-memory-address", defaultInMemoryAddress(),
		"Address the API servers of in-memory clusters (spec.infrastructure.inMemory) listen on, one port each: one Cluster API's controllers reach. Default: the Pod's IP ("+podIPEnv+"), else 127.0.0.1. 0.0.0.0 (config/manager's) listens on every address, the Pod's loopback included, which kubectl port-forward reaches; --in-memory-host must then be set.")
	fs.StringVar(&o.inMemoryHost, "in-memory-host", "",
		"Name or address in-memory clusters' endpoints carry, which resolves to --in-memory-address where Cluster API's controllers run: a headless Service of the manager Pod keeps the endpoints when the Pod is replaced and names the manager a cluster moves to (config/manager). Empty: --in-memory-address.")
	flags.AddManagerOptions(fs, &o.managerOptions)
}

// addPolicyFlags adds the flags of the one policy: what a namespace may ask of the engine's
// host, and where its nodes may run.
func (o *options) addPolicyFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.allowedHostPaths, "allowed-host-paths", nil,
		"Host paths (absolute) that DockyardMachines may bind-mount into node containers with spec.extraMounts, each with the paths below it. Node containers run with nearly every capability, so a mount gives whoever creates DockyardMachines that part of the engine's host; the engine's socket gives all of it. Default: none.")
	fs.StringSliceVar(&o.allowedImageRepositories, "allowed-image-repositories", policy.DefaultImageRepositories,
		"Image repositories node and load balancer images may come from: repository names (docker.io/kindest/node) or prefixes ending in / (localhost/dockyard/); * allows any. The repositories of --node-image-repository and --load-balancer-image are always allowed.")
	fs.StringSliceVar(&o.allowedLoadImages, "allowed-load-image-repositories", policy.DefaultLoadImageRepositories,
		"Image repositories (or prefixes ending in /) the engine may copy images from into a cluster's nodes (DockyardCluster spec.loadImages, DockyardMachine spec.preLoadImages); "+policy.NamespacePlaceholder+" stands for the cluster's namespace, so by default a team loads the images named localhost/<its namespace>/... and no other team's; * allows any.")
	fs.StringSliceVar(&o.allowedListenAddresses, "allowed-listen-addresses", policy.DefaultListenAddresses,
		"Host addresses nodes may publish ports on (DockyardMachine spec.ports[].listenAddress). Default: the host's loopback only.")
	fs.IntVar(&o.minHostPort, "min-host-port", policy.DefaultMinHostPort,
		"Lowest host port nodes may publish a port on (spec.ports[].hostPort); 0, a port the engine picks, is always allowed.")
	fs.StringSliceVar(&o.allowedNetworks, "allowed-networks", nil,
		"Engine networks Dockyard did not create that clusters may join (DockyardCluster spec.network.existing.name); host, none and bridge included. Default: none.")
	fs.StringSliceVar(&o.allowedSubnetPools, "allowed-subnet-pools", policy.DefaultSubnetPools,
		"Ranges the subnets of the networks Dockyard creates (spec.network.subnets) must lie in. Default: the private ranges.")
	fs.StringSliceVar(&o.reservedSubnets, "reserved-subnets", nil,
		"Ranges clusters' subnets must not overlap, besides what the manager finds itself: the management cluster's Service ranges (ServiceCIDRs) and Nodes' pod ranges, the engine's networks and the routes of the manager's host.")
	fs.StringSliceVar(&o.managementInfrastructure, "allowed-management-infrastructure-namespaces", nil,
		"Namespaces whose DockyardClusters may run their nodes as privileged Pods of the management cluster itself (spec.infrastructure.kubernetes without a kubeconfigSecret), in their own namespace; * allows every namespace. Empty: none. The manager needs the rights of config/rbac/infrastructure_role.yaml there.")
	fs.StringSliceVar(&o.hostEngineNamespaces, "allowed-host-engine-namespaces", policy.DefaultHostEngineNamespaces,
		"Namespaces whose DockyardClusters may run their nodes on the manager's own engine (spec.infrastructure empty), where root in a node is root on the engine's host; * allows every namespace. Empty: none, and every cluster must name an infrastructure cluster.")
	fs.StringSliceVar(&o.inMemoryNamespaces, "allowed-in-memory-namespaces", policy.DefaultInMemoryNamespaces,
		"Namespaces whose DockyardClusters may run their nodes in the manager's memory (spec.infrastructure.inMemory), each cluster's API server listening on --in-memory-address; * allows every namespace. Empty: none.")
	fs.StringSliceVar(&o.infrastructureServers, "allowed-infrastructure-servers", policy.DefaultInfrastructureServers,
		"API servers of infrastructure clusters that a namespace's kubeconfig Secrets (spec.infrastructure.kubernetes.kubeconfigSecret) may name, each [NAMESPACE=]https://HOST[:PORT]; HOST * for any host. http:// servers only when named so. Empty: none.")
}

// podIPEnv holds the manager Pod's IP (config/manager/manager.yaml sets it from status.podIP).
const podIPEnv = "POD_IP"

// defaultInMemoryAddress is the Pod's IP where the manager runs in one, 127.0.0.1 elsewhere.
func defaultInMemoryAddress() string { return cmp.Or(os.Getenv(podIPEnv), "127.0.0.1") }

// openPorts reads --management-ports-open-to-workloads.
func (o *options) openPorts() ([]int, error) {
	return tcpPorts("--management-ports-open-to-workloads", o.managementPortsOpenToWorkloads)
}

// tcpPorts reads a flag of TCP ports, an empty entry ignored (the components pass "" when the
// variable is unset).
func tcpPorts(flag string, values []string) ([]int, error) {
	var ports []int
	for _, s := range values {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 || p > 65535 {
			return nil, errors.Errorf("%s: %q is not a TCP port (1-65535)", flag, s)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// policy is what Dockyard's objects may ask of the engine's host: the flags' policy, with the
// repositories of the manager's own default images.
func (o *options) policy() (*policy.Policy, error) {
	repos := append([]string{}, o.allowedImageRepositories...)
	for _, img := range []string{o.nodeImageRepository, o.loadBalancerImage} {
		named, err := reference.ParseNormalizedNamed(img)
		if err != nil {
			return nil, errors.Wrapf(err, "--node-image-repository or --load-balancer-image %q", img)
		}
		repos = append(repos, named.Name())
	}
	return policy.New(policy.Config{
		HostPaths:             o.allowedHostPaths,
		ImageRepositories:     repos,
		LoadImageRepositories: o.allowedLoadImages,
		ListenAddresses:       o.allowedListenAddresses,
		MinHostPort:           o.minHostPort,
		Networks:              o.allowedNetworks,
		SubnetPools:           o.allowedSubnetPools,
		ReservedSubnets:       o.reservedSubnets,

		ManagementInfrastructureNamespaces: o.managementInfrastructure,
		HostEngineNamespaces:               o.hostEngineNamespaces,
		InMemoryNamespaces:                 o.inMemoryNamespaces,
		InfrastructureServers:              o.infrastructureServers,
	})
}

// The manager reads the management cluster's Service and pod ranges, which clusters' subnets
// must not overlap.
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list

// subnetsInUse returns what the management cluster (read through reader, uncached: asked only
// when a network is to be created) and the routes of the manager's host use now.
func subnetsInUse(reader client.Reader) policy.SubnetsFunc {
	return func(ctx context.Context) ([]netip.Prefix, error) {
		inUse, err := policy.ManagementClusterSubnets(ctx, reader)
		if err != nil {
			return nil, err
		}
		routes, err := policy.Routes()
		if err != nil {
			return nil, err
		}
		return append(inUse, routes...), nil
	}
}

// Main runs the manager with its command line (args, the program name left out) until it is
// stopped (SIGTERM) or fails. A bad flag, or --help, ends the process as a command's would.
func Main(args []string) error {
	var o options
	fs := pflag.NewFlagSet("manager", pflag.ExitOnError)
	o.addFlags(fs)
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.AddGoFlagSet(flag.CommandLine) // --kubeconfig from controller-runtime
	_ = fs.Parse(args)                // ExitOnError: a bad flag has ended the process
	return run(o)
}

func run(o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := logsv1.ValidateAndApply(o.logOptions, nil); err != nil {
		return errors.Wrap(err, "applying logging flags")
	}
	ctrl.SetLogger(klog.Background())
	hostPolicy, err := o.policy()
	if err != nil {
		return err
	}
	mgr, err := newManager(o)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	host, closeEngine, err := connectEngine(ctx, o, mgr, hostPolicy)
	if err != nil {
		return err
	}
	defer closeEngine()
	secretCachingClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return errors.Wrap(err, "creating secret caching client")
	}
	engineEvents := docker.NewEngineEvents(host)
	if err := mgr.Add(engineEvents); err != nil {
		return errors.Wrap(err, "adding the engine's event watcher")
	}
	// Not ready while the engine does not answer: nothing can be reconciled then.
	if err := mgr.AddReadyzCheck("engine", engineCheck(host)); err != nil {
		return errors.Wrap(err, "adding the engine check")
	}
	// Each cluster's engine is chosen from its DockyardCluster, once per reconcile; the
	// kubeconfig Secrets of infrastructure clusters, whatever their names, from a cache of
	// their own once Dockyard marked them.
	infraSecrets, err := infrastructure.SecretsCache(mgr, o.watchNamespace)
	if err != nil {
		return err
	}
	engines := infrastructure.New(host, infrastructure.Options{
		Secrets: infraSecrets, Uncached: mgr.GetAPIReader(), Management: mgr.GetConfig(), Policy: hostPolicy, Events: engineEvents,
		InMemory: runtimes.InMemory{Address: o.inMemoryAddress, Host: o.inMemoryHost,
			State: &infrastructure.InMemoryStates{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: o.watchNamespace, Policy: hostPolicy},
			OnSyncError: func(err error) {
				ctrl.Log.WithName("in-memory").Error(err, "Keeping in-memory clusters' state")
			}},
	})
	// Once the manager stopped: the in-memory engine saves what changed since its last sync.
	defer func() {
		if err := engines.Close(); err != nil {
			ctrl.Log.WithName("setup").Error(err, "Closing the engines")
		}
	}()
	if err := setupControllers(ctx, mgr, o, engines, engineEvents, secretCachingClient); err != nil {
		return err
	}
	if err := (&controllers.InfrastructureSecretReconciler{Client: mgr.GetClient(), Secrets: infraSecrets}).SetupWithManager(mgr, controller.Options{}); err != nil {
		return errors.Wrap(err, "setting up the infrastructure Secret controller")
	}
	if err := webhooks.SetupWithManager(mgr, webhooks.Options{DefaultLoadBalancerImage: o.loadBalancerImage, Policy: hostPolicy,
		Environment: webhooks.Environment{Registries: host, SubnetsInUse: subnetsInUse(mgr.GetAPIReader())}}); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Starting manager", "namespace", o.watchNamespace, "watchFilter", o.watchFilterValue)
	return errors.Wrap(mgr.Start(ctx), "running manager")
}

// validate checks the flags that have no parser of their own.
func (o *options) validate() error {
	if o.maxServiceLoadBalancers < 1 {
		return errors.Errorf("--max-service-load-balancers-per-cluster=%d: must be at least 1", o.maxServiceLoadBalancers)
	}
	if o.reconcileTimeout <= 0 {
		return errors.Errorf("--reconcile-timeout=%s: must be greater than zero", o.reconcileTimeout)
	}
	if ip := net.ParseIP(o.inMemoryAddress); ip != nil && ip.IsUnspecified() && o.inMemoryHost == "" {
		return errors.Errorf("--in-memory-address=%s listens on every address: --in-memory-host must name the one in-memory clusters' endpoints carry", o.inMemoryAddress)
	}
	if o.watchNamespace == `""` {
		o.watchNamespace = ""
	}
	return nil
}

// newManager makes the controller-runtime manager: its client to the management cluster, cache,
// leader election, health endpoints and webhook server.
func newManager(o options) (ctrl.Manager, error) {
	tlsOptions, metricsOptions, err := flags.GetManagerOptions(o.managerOptions)
	if err != nil {
		return nil, errors.Wrap(err, "invalid flags")
	}
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS = o.restConfigQPS
	restConfig.Burst = o.restConfigBurst
	restConfig.UserAgent = remote.DefaultClusterAPIUserAgent(controllerName)

	scheme := dyscheme.New()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                     scheme,
		LeaderElection:             o.leaderElect,
		LeaderElectionID:           "dockyard-manager-leader-election",
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &o.leaderElectionLeaseDuration,
		RenewDeadline:              &o.leaderElectionRenewDeadline,
		RetryPeriod:                &o.leaderElectionRetryPeriod,
		// Stop the controllers before giving up leadership, so two managers never overlap.
		LeaderElectionReleaseOnCancel: true,
		HealthProbeBindAddress:        o.healthAddr,
		Metrics:                       *metricsOptions,
		Cache:                         controllers.ManagerCacheOptions(scheme, controllerName, o.watchNamespace, o.syncPeriod),
		Client:                        setup.ManagerClientOptions(),
		GracefulShutdownTimeout:       ptrTo(30 * time.Second),
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:    o.webhookPort,
			CertDir: o.webhookCertDir,
			TLSOpts: tlsOptions,
		}),
	})
	if err != nil {
		return nil, errors.Wrap(err, "creating manager")
	}
	if err := mgr.AddHealthzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, errors.Wrap(err, "adding health check")
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, errors.Wrap(err, "adding ready check")
	}
	return mgr, nil
}

// connectEngine connects to the manager's own engine (--container-runtime) through the one
// picker, which gives every call a deadline (so a hung engine or node fails a reconcile instead
// of holding a worker), and returns its node layer, with the management cluster's nodes on it
// and what Dockyard's objects may ask of its host.
func connectEngine(ctx context.Context, o options, mgr ctrl.Manager, hostPolicy *policy.Policy) (*docker.Manager, func(), error) {
	log := ctrl.Log.WithName("setup")
	privilege, err := docker.ParsePrivilegeMode(o.nodePrivileged)
	if err != nil {
		return nil, nil, err
	}
	openPorts, err := o.openPorts()
	if err != nil {
		return nil, nil, err
	}
	hostPorts, err := tcpPorts("--host-ports-open-to-workloads", o.hostPortsOpenToWorkloads)
	if err != nil {
		return nil, nil, err
	}
	runtimeName, err := runtimes.Parse(o.containerRuntime)
	if err != nil {
		return nil, nil, errors.Wrap(err, "--container-runtime")
	}
	engineConfig := runtimes.Config{Name: runtimeName, Endpoint: o.containerRuntimeEndpoint}
	engine, err := runtimes.New(engineConfig)
	if err != nil {
		return nil, nil, errors.Wrapf(err, "connecting to the container engine (%s)", engineConfig)
	}
	closeEngine := func() { _ = engine.Close() }
	log.Info("Container engine", "runtime", engineConfig.String())
	management, err := docker.NewManager(engine, docker.ManagerOptions{}).ManagementSelector(ctx, o.managementNode)
	if err != nil {
		closeEngine()
		return nil, nil, err
	}
	if management != nil {
		log.Info("Connecting the management cluster's nodes to every workload cluster network", "node", o.managementNode, "selector", management)
	}
	log.Info("What Dockyard's objects may ask of the engine's host", "hostPaths", hostPolicy.HostPaths, "imageRepositories", hostPolicy.ImageRepositories,
		"loadImageRepositories", hostPolicy.LoadImageRepositories, "listenAddresses", hostPolicy.ListenAddresses, "minHostPort", hostPolicy.MinHostPort,
		"networks", hostPolicy.Networks, "subnetPools", hostPolicy.SubnetPools, "reservedSubnets", hostPolicy.ReservedSubnets)
	host := docker.NewManager(engine, docker.ManagerOptions{
		Privilege: privilege, ManagementNodes: management, ManagementPortsOpenToWorkloads: openPorts,
		Policy: hostPolicy, SubnetsInUse: subnetsInUse(mgr.GetAPIReader()),
		GuardHost: o.guardEngineHost, HostPortsOpenToWorkloads: hostPorts,
	})
	return host, closeEngine, nil
}

func setupControllers(ctx context.Context, mgr ctrl.Manager, o options, engines *infrastructure.Engines, engineEvents *docker.EngineEvents, secretCachingClient client.Client) error {
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient:     secretCachingClient,
		Cache:            setup.ClusterCacheCacheOptions(),
		Client:           setup.ClusterCacheClientOptions(controllerName, o.clusterCacheClientQPS, o.clusterCacheClientBurst),
		WatchFilterValue: o.watchFilterValue,
	}, controller.Options{MaxConcurrentReconciles: o.clusterCacheConcurrency})
	if err != nil {
		return errors.Wrap(err, "creating ClusterCache")
	}
	clusters := controller.Options{MaxConcurrentReconciles: o.clusterConcurrency, ReconciliationTimeout: o.reconcileTimeout}
	machines := controller.Options{MaxConcurrentReconciles: o.machineConcurrency, ReconciliationTimeout: o.reconcileTimeout}
	recorder := func(name string) record.EventRecorder {
		return mgr.GetEventRecorderFor(name) //nolint:staticcheck // Cluster API uses this recorder too
	}
	for name, setup := range map[string]func() error{
		"DockyardCluster": func() error {
			return (&controllers.DockyardClusterReconciler{
				Client: mgr.GetClient(), Engines: engines, Recorder: recorder("dockyardcluster-controller"),
				EngineEvents: engineEvents, WatchFilterValue: o.watchFilterValue,
			}).SetupWithManager(ctx, mgr, clusters)
		},
		"DockyardMachine": func() error {
			return (&controllers.DockyardMachineReconciler{
				Client: mgr.GetClient(), ClusterCache: clusterCache, Engines: engines, NodeImageRepository: o.nodeImageRepository,
				Recorder: recorder("dockyardmachine-controller"), EngineEvents: engineEvents, WatchFilterValue: o.watchFilterValue,
			}).SetupWithManager(ctx, mgr, machines)
		},
		"DockyardMachinePool": func() error {
			return (&controllers.DockyardMachinePoolReconciler{
				Client: mgr.GetClient(), Recorder: recorder("dockyardmachinepool-controller"), WatchFilterValue: o.watchFilterValue,
			}).SetupWithManager(ctx, mgr, machines)
		},
		"Service load balancer": func() error {
			return (&controllers.ServiceLoadBalancerReconciler{
				Client: mgr.GetClient(), ClusterCache: clusterCache, Engines: engines, Image: o.loadBalancerImage,
				MaxPerCluster: o.maxServiceLoadBalancers, Recorder: recorder("servicelb-controller"), WatchFilterValue: o.watchFilterValue,
			}).SetupWithManager(ctx, mgr, clusters)
		},
		// As many workers as the clusters': a template of a team whose infrastructure cluster
		// does not answer holds one for its engine's deadline, not the others' templates.
		"DockyardMachineTemplate": func() error {
			return (&controllers.DockyardMachineTemplateReconciler{
				Client: mgr.GetClient(), Engines: engines, WatchFilterValue: o.watchFilterValue,
			}).SetupWithManager(ctx, mgr, clusters)
		},
	} {
		if err := setup(); err != nil {
			return errors.Wrapf(err, "setting up the %s controller", name)
		}
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }

// engineCheck is a readiness check that the container engine answers within a few seconds.
func engineCheck(nodes *docker.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
		defer cancel()
		_, err := nodes.HostInfo(ctx)
		return errors.Wrap(err, "the container engine does not answer")
	}
}
