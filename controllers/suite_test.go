package controllers

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/setup"

	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
	"github.com/dockyard-dev/dockyard/pkg/policy"
	"github.com/dockyard-dev/dockyard/pkg/webhooks"
	"github.com/dockyard-dev/dockyard/test/envtest"
)

// env is a real kube-apiserver and etcd with Dockyard's manager running both reconcilers and
// the webhooks on a fake container engine (envRuntime, simulated by envNodes).
var (
	env        *envtest.Environment
	envRuntime *inmemory.Runtime
	envNodes   *inmemory.Nodes
)

// benchRaisedLimits gives the benchmarks' manager envtest's client limits (QPS 1000, burst 2000)
// instead of the shipped ones (cmd/manager's defaults), so a run can show what the limits cost:
//
//	go test ./controllers -run '^$' -bench 'machines=1000$' -benchtime 1x -args -bench-raised-client-limits
var benchRaisedLimits = flag.Bool("bench-raised-client-limits", false, "benchmarks: run the manager with envtest's client limits instead of cmd/manager's")

// clientLimits names the manager's client limits: "shipped" (cmd/manager's --kube-api-qps and
// --kube-api-burst defaults, and its ClusterCache's) when benchmarks run, unless raised; tests,
// which check behaviour rather than throughput, keep envtest's ("envtest").
func clientLimits() string {
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return "envtest"
	}
	if *benchRaisedLimits {
		return "raised"
	}
	return "shipped"
}

func TestMain(m *testing.M) {
	flag.Parse()
	ctrl.SetLogger(klog.Background())
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	envRuntime = inmemory.New(testNodeImage, docker.DefaultLoadBalancerImage)
	envNodes = inmemory.NewNodes(envRuntime)
	var err error
	shipped := clientLimits() == "shipped"
	opts := envtest.Options{
		Setup: func(ctx context.Context, mgr ctrl.Manager) error {
			return setupForTest(ctx, mgr, envRuntime, 10, shipped)
		},
		// The manager has only the permissions config/ grants it, and caches what cmd/manager's
		// does (Cluster API's choices: no Secrets or ConfigMaps but the labelled ones).
		ManagerClusterRoles: []string{
			filepath.Join(envtest.RepoRoot(), "config", "rbac", "role.yaml"),
			filepath.Join(envtest.RepoRoot(), "config", "rbac", "secrets_role.yaml"),
		},
		ManagerOptions: func(o *ctrl.Options) {
			o.Cache = ManagerCacheOptions(o.Scheme, "dockyard-test", "", 10*time.Minute)
			o.Client = setup.ManagerClientOptions()
		},
	}
	if shipped {
		opts.ManagerQPS, opts.ManagerBurst = DefaultKubeAPIQPS, DefaultKubeAPIBurst
	}
	env, err = envtest.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the test environment: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the test environment: %v\n", err)
	}
	os.Exit(code)
}

// setupForTest wires the reconcilers, the ClusterCache and the webhooks like cmd/manager does; with
// shipped, the ClusterCache's clients have cmd/manager's limits too.
func setupForTest(ctx context.Context, mgr ctrl.Manager, engine container.Runtime, concurrency int, shipped bool) error {
	nodes := docker.NewManager(engine, docker.ManagerOptions{})
	secretClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	qps, burst := float32(1000), 2000
	if shipped {
		qps, burst = DefaultClusterCacheClientQPS, DefaultClusterCacheClientBurst
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions("dockyard-test", qps, burst),
	}, controller.Options{MaxConcurrentReconciles: concurrency})
	if err != nil {
		return err
	}
	//nolint:staticcheck // the same recorder as cmd/manager
	clusterRecorder, machineRecorder := mgr.GetEventRecorderFor("dockyardcluster-controller"), mgr.GetEventRecorderFor("dockyardmachine-controller")
	engineEvents := docker.NewEngineEvents(nodes)
	if err := mgr.Add(engineEvents); err != nil {
		return err
	}
	infraSecrets, err := infrastructure.SecretsCache(mgr, "")
	if err != nil {
		return err
	}
	engines := infrastructure.New(nodes, infrastructure.Options{Secrets: infraSecrets, Uncached: mgr.GetAPIReader(), Management: mgr.GetConfig(), Events: engineEvents})
	if err := (&InfrastructureSecretReconciler{Client: mgr.GetClient(), Secrets: infraSecrets}).SetupWithManager(mgr, controller.Options{}); err != nil {
		return err
	}
	clusterReconciler := &DockyardClusterReconciler{Client: mgr.GetClient(), Engines: engines, Recorder: clusterRecorder, EngineEvents: engineEvents}
	if err := clusterReconciler.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
		return err
	}
	machineReconciler := &DockyardMachineReconciler{Client: mgr.GetClient(), ClusterCache: cc, Engines: engines, Recorder: machineRecorder, EngineEvents: engineEvents}
	if err := machineReconciler.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
		return err
	}
	//nolint:staticcheck // the same recorder as cmd/manager
	poolReconciler := &DockyardMachinePoolReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor("dockyardmachinepool-controller")}
	if err := poolReconciler.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
		return err
	}
	templateReconciler := &DockyardMachineTemplateReconciler{Client: mgr.GetClient(), Engines: engines}
	if err := templateReconciler.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
		return err
	}
	// An administrator's policy that lets clusters preload kind's images (the pools' tests do).
	cfg := policy.DefaultConfig()
	cfg.LoadImageRepositories = append(cfg.LoadImageRepositories, "docker.io/kindest/")
	p, err := policy.New(cfg)
	if err != nil {
		return err
	}
	return webhooks.SetupWithManager(mgr, webhooks.Options{DefaultLoadBalancerImage: docker.DefaultLoadBalancerImage, Policy: p})
}
