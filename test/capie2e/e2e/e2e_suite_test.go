//go:build e2e

// Package e2e runs Cluster API's shared end-to-end specs (sigs.k8s.io/cluster-api/test/e2e)
// on Dockyard, as Cluster API runs them on CAPD: Dockyard's management cluster in a node
// container (capie2e.ClusterProvider, kind's part for CAPD), `clusterctl init` from the local
// repository the framework builds out of ../config/dockyard.yaml, then each spec against it.
// Specs labelled "blocking" run in CI (make test-e2e-capi); make test-e2e-full runs them all.
//
// Flags and environment, as in Cluster API's suite: -e2e.config, -e2e.artifacts-folder
// (E2E_ARTIFACTS), -e2e.use-existing-cluster (USE_EXISTING_CLUSTER=true: the cluster of the
// current kubeconfig, providers installed unless present), -e2e.skip-resource-cleanup
// (SKIP_RESOURCE_CLEANUP=true: keep the clusters and the management cluster).
// DOCKYARD_E2E_PRIVILEGED=true|false says whether the engine starts privileged containers
// instead of a probe; specs labelled "privileged" are left out where it does not.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"
	"sigs.k8s.io/cluster-api/test/framework/bootstrap"
	"sigs.k8s.io/cluster-api/test/framework/clusterctl"
	"sigs.k8s.io/cluster-api/test/framework/ginkgoextensions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/test/capie2e"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

var (
	configPath string
	// privileged tells whether the engine starts privileged containers, which Cluster API's
	// kubetest asks for (enginePrivileged, before the specs are chosen).
	privileged bool
	// conformanceImages are the images of CONFORMANCE_DIR/images.txt (make conformance-images).
	conformanceImages  []string
	artifactFolder     string
	useExistingCluster bool
	skipCleanup        bool
	// previousReleases are the versions of the releases the clusterctl upgrade specs start
	// from, by the variable that names the release's directory: DOCKYARD_PREVIOUS_RELEASE and
	// DOCKYARD_IN_MEMORY_RELEASE; empty without them.
	previousReleases map[string]string
)

// The variables naming the releases the clusterctl upgrade specs start from (make
// e2e-previous-release writes them): Dockyard's first release, and the first with the
// in-memory engine.
const (
	previousReleaseEnv = "DOCKYARD_PREVIOUS_RELEASE"
	inMemoryReleaseEnv = "DOCKYARD_IN_MEMORY_RELEASE"
)

var (
	ctx = ctrl.SetupSignalHandler()
	// watchesCtx ends the controllers' log streaming when the suite ends.
	watchesCtx, cancelWatches = context.WithCancel(ctx)

	e2eConfig                *clusterctl.E2EConfig
	clusterctlConfigPath     string
	bootstrapClusterProvider *capie2e.ClusterProvider
	bootstrapClusterProxy    framework.ClusterProxy
)

func init() {
	flag.StringVar(&configPath, "e2e.config", filepath.Join("..", "config", "dockyard.yaml"), "path to the e2e config file")
	flag.StringVar(&artifactFolder, "e2e.artifacts-folder", envOr("E2E_ARTIFACTS", filepath.Join(os.TempDir(), "dockyard-capi-e2e")), "folder where e2e test artifacts are stored")
	flag.BoolVar(&useExistingCluster, "e2e.use-existing-cluster", os.Getenv("USE_EXISTING_CLUSTER") == "true", "use the cluster of the current kubeconfig as the management cluster instead of making one")
	flag.BoolVar(&skipCleanup, "e2e.skip-resource-cleanup", os.Getenv("SKIP_RESOURCE_CLEANUP") == "true", "keep the workload clusters and the management cluster")
}

// managementAPIServerEnv is the management cluster's API server's environment: with
// DOCKYARD_E2E_APISERVER_GOGC set (make test-e2e-inmemory sets it), its garbage collector's
// GOGC, and a soft memory limit of DOCKYARD_E2E_APISERVER_GOMEMLIMIT (8GiB) that makes it
// collect more often before the host runs short.
func managementAPIServerEnv() map[string]string {
	gogc := os.Getenv("DOCKYARD_E2E_APISERVER_GOGC")
	if gogc == "" {
		return nil
	}
	return map[string]string{"GOGC": gogc, "GOMEMLIMIT": envOrDefault("DOCKYARD_E2E_APISERVER_GOMEMLIMIT", "8GiB")}
}

// infrastructureZones are the zones of DOCKYARD_E2E_ZONES (comma-separated): the management
// cluster then has one worker per zone and is the infrastructure cluster of the kubernetes
// flavor's clusters (make test-e2e-kubernetes sets it).
func infrastructureZones() []string {
	if v := os.Getenv("DOCKYARD_E2E_ZONES"); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func TestE2E(t *testing.T) {
	ctrl.SetLogger(klog.Background())
	RegisterFailHandler(Fail)
	Expect(os.MkdirAll(artifactFolder, 0o755)).To(Succeed())
	w, err := ginkgoextensions.EnableFileLogging(filepath.Join(artifactFolder, "ginkgo-log.txt"))
	Expect(err).ToNot(HaveOccurred())
	defer w.Close()
	suiteConfig, reporterConfig := GinkgoConfiguration()
	var why string
	privileged, why, err = enginePrivileged(suiteConfig.DryRun)
	if err != nil {
		t.Fatal(err)
	}
	// Specs that need privileged containers are left out by the label filter where the engine
	// refuses them, rather than skipped: Cluster API's AfterEach of a spec that never began panics.
	if !privileged {
		suiteConfig.LabelFilter = capie2e.WithoutLabel(suiteConfig.LabelFilter, "privileged")
	}
	if why != "" {
		fmt.Printf("Specs labelled privileged: %s\nLabel filter: %q\n", why, suiteConfig.LabelFilter)
	}
	// Cluster API's framework writes every workload cluster's kubeconfig to a temporary file
	// and leaves it: keep them in a directory of this run, removed at its end.
	tmp, err := os.MkdirTemp("", "dockyard-capi-e2e-tmp-")
	Expect(err).ToNot(HaveOccurred())
	defer os.RemoveAll(tmp)
	t.Setenv("TMPDIR", tmp)
	RunSpecs(t, "Cluster API's shared end-to-end specs on Dockyard", suiteConfig, reporterConfig)
}

// enginePrivileged tells whether the engine starts privileged containers and, where it does not
// or was not asked, why: DOCKYARD_E2E_PRIVILEGED (true or false) when set; otherwise a probe
// container on the engine (one process at a time), which a dry run and a run on an existing
// cluster do not start.
func enginePrivileged(dryRun bool) (bool, string, error) {
	switch v := os.Getenv("DOCKYARD_E2E_PRIVILEGED"); v {
	case "true":
		return true, "", nil
	case "false":
		return false, "left out (DOCKYARD_E2E_PRIVILEGED=false)", nil
	case "":
	default:
		return false, "", errors.Errorf("DOCKYARD_E2E_PRIVILEGED is %q: true, false, or unset to probe the engine", v)
	}
	if dryRun {
		return true, "listed: a dry run does not probe the engine (DOCKYARD_E2E_PRIVILEGED=false leaves them out)", nil
	}
	if useExistingCluster {
		return false, "left out: with USE_EXISTING_CLUSTER the engine is not probed (DOCKYARD_E2E_PRIVILEGED=true runs them)", nil
	}
	image, err := configVariable("DOCKYARD_LB_IMAGE")
	if err != nil {
		return false, "", err
	}
	unlock, err := lockFile(filepath.Join(artifactFolder, ".privilege-probe.lock"))
	if err != nil {
		return false, "", err
	}
	defer unlock()
	ok, err := capie2e.PrivilegedContainersAllowed(ctx, runtimes.Config{}, image)
	if err != nil || ok {
		return ok, "", err
	}
	return false, "left out: " + noKubetest, nil
}

// configVariable is a variable of the e2e config as Cluster API's framework reads it: the
// environment's value, else the config file's; for what the suite needs before it loads the
// config.
func configVariable(name string) (string, error) {
	if v, ok := os.LookupEnv(name); ok {
		return v, nil
	}
	raw, err := os.ReadFile(configPath)
	if err != nil {
		return "", errors.Wrap(err, "reading the e2e config")
	}
	cfg := struct {
		Variables map[string]string `json:"variables"`
	}{}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return "", errors.Wrapf(err, "decoding %s", configPath)
	}
	v, ok := cfg.Variables[name]
	if !ok {
		return "", errors.Errorf("%s sets no variable %s", configPath, name)
	}
	return v, nil
}

// lockFile holds an exclusive lock on path (made if missing) until unlock: parallel processes
// of the suite probe the engine one at a time, with one probe container name.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, errors.Wrap(err, "opening the probe's lock")
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, errors.Wrapf(err, "locking %s", path)
	}
	return func() { _ = f.Close() }, nil
}

// loadE2EConfig loads the suite's configuration. With DOCKYARD_PREVIOUS_RELEASE or
// DOCKYARD_IN_MEMORY_RELEASE (directories of earlier releases, make release wrote them) and
// DOCKYARD_UPGRADE_RELEASE (the version this tree is listed as), Dockyard's provider lists them
// all, for the clusterctl upgrade specs: this tree as the newest version, installed by every
// other spec as before.
func loadE2EConfig() *clusterctl.E2EConfig {
	cfg := clusterctl.LoadE2EConfig(ctx, clusterctl.LoadE2EConfigInput{ConfigPath: configPath})
	previousReleases = map[string]string{}
	var envs, dirs []string
	for _, env := range []string{previousReleaseEnv, inMemoryReleaseEnv} {
		if dir := os.Getenv(env); dir != "" {
			envs, dirs = append(envs, env), append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		return cfg
	}
	versions, err := capie2e.WithUpgrade(cfg, capie2e.Upgrade{
		Provider: "dockyard", Previous: dirs, Current: os.Getenv("DOCKYARD_UPGRADE_RELEASE"),
		MetadataDir: filepath.Join(artifactFolder, "upgrade-metadata"),
	})
	Expect(err).ToNot(HaveOccurred(), "listing the releases of %v beside this tree", envs)
	for i, env := range envs {
		previousReleases[env] = versions[i]
	}
	return cfg
}

func initScheme() *runtime.Scheme {
	sc := runtime.NewScheme()
	framework.TryAddDefaultSchemes(sc)
	Expect(infrav1.AddToScheme(sc)).To(Succeed())
	// RuntimeClasses: the placement an administrator gives a team (teams_test.go).
	Expect(nodev1.AddToScheme(sc)).To(Succeed())
	return sc
}

// The management cluster and the local clusterctl repository are made once and shared by
// every spec (and every parallel ginkgo process).
var _ = SynchronizedBeforeSuite(func() []byte {
	By("Writing the test flavors from templates/")
	flavorDir := filepath.Join(repoRoot, "out", "capie2e", "flavors")
	_, err := capie2e.WriteFlavors(filepath.Join(repoRoot, "templates"), flavorDir)
	Expect(err).ToNot(HaveOccurred())

	By(fmt.Sprintf("Loading the e2e config from %s", configPath))
	e2eConfig = loadE2EConfig()

	By("Creating the clusterctl repository")
	clusterctlConfigPath = clusterctl.CreateRepository(ctx, clusterctl.CreateRepositoryInput{
		E2EConfig: e2eConfig, RepositoryFolder: filepath.Join(artifactFolder, "repository"),
	})
	certManager := e2eConfig.MustGetVariable("CERT_MANAGER_MANIFEST")
	if !filepath.IsAbs(certManager) {
		certManager = filepath.Join(filepath.Dir(configPath), certManager)
	}
	certManager, err = filepath.Abs(certManager)
	Expect(err).ToNot(HaveOccurred())
	Expect(capie2e.AddCertManager(clusterctlConfigPath, certManager, e2eConfig.MustGetVariable("CERT_MANAGER_VERSION"))).To(Succeed())

	kubeconfig := ""
	if !useExistingCluster {
		By("Removing what an interrupted run left on the engine")
		left, err := capie2e.SpecClusters(ctx, runtimes.Config{}, e2eConfig.ManagementClusterName)
		Expect(err).ToNot(HaveOccurred())
		for _, c := range left {
			fmt.Fprintf(GinkgoWriter, "removing cluster %s: %d containers, %d volumes, %d networks\n", c.Cluster, len(c.Containers), len(c.Volumes), len(c.Networks))
		}
		Expect(capie2e.RemoveClusters(ctx, runtimes.Config{}, left)).To(Succeed())

		By("Making the engine network " + capie2e.ConformanceNetwork + ", where Cluster API's kubetest runs Kubernetes' conformance image")
		_, err = capie2e.EnsureNetwork(ctx, runtimes.Config{}, capie2e.ConformanceNetwork)
		Expect(err).ToNot(HaveOccurred())

		By("Creating the management cluster: Kubernetes in a Dockyard node container, the images preloaded")
		images := e2eConfig.Images
		var networkPolicy string
		if zones := infrastructureZones(); len(zones) > 0 {
			// The kubernetes flavor's nodes are Pods of the management cluster: every node of
			// it holds the node image, as it would pull it from a registry. Its teams' node
			// Pods are kept apart by NetworkPolicies, which it enforces.
			networkPolicy = imagebuild.KubeRouterImageName(imagebuild.DefaultKubeRouterVersion)
			images = append(images, clusterctl.ContainerImage{
				Name:         e2eConfig.MustGetVariable("DOCKYARD_NODE_IMAGE_REPOSITORY") + ":" + e2eConfig.MustGetVariable("KUBERNETES_VERSION"),
				LoadBehavior: clusterctl.MustLoadImage,
			}, clusterctl.ContainerImage{Name: networkPolicy, LoadBehavior: clusterctl.MustLoadImage})
		}
		bootstrapClusterProvider = capie2e.NewClusterProvider(capie2e.ClusterProviderInput{
			Name:               e2eConfig.ManagementClusterName,
			KubernetesVersion:  e2eConfig.MustGetVariable("KUBERNETES_VERSION_MANAGEMENT"),
			Images:             images,
			LogFolder:          filepath.Join(artifactFolder, "clusters", "bootstrap"),
			Zones:              infrastructureZones(),
			NetworkPolicyImage: networkPolicy,
			APIServerEnv:       managementAPIServerEnv(),
		})
		bootstrapClusterProvider.Create(ctx)
		kubeconfig = bootstrapClusterProvider.GetKubeconfigPath()
	}
	proxy := framework.NewClusterProxy("bootstrap", kubeconfig, initScheme())

	By("Installing cert-manager, Cluster API and Dockyard with clusterctl init")
	clusterctl.InitManagementClusterAndWatchControllerLogs(watchesCtx, clusterctl.InitManagementClusterAndWatchControllerLogsInput{
		ClusterProxy:            proxy,
		ClusterctlConfigPath:    clusterctlConfigPath,
		InfrastructureProviders: e2eConfig.InfrastructureProviders(),
		LogFolder:               filepath.Join(artifactFolder, "clusters", proxy.GetName()),
		// Cluster API's controllers serve their metrics over TLS here, not on :8080.
		DisableMetricsCollection: true,
	}, e2eConfig.GetIntervals(proxy.GetName(), "wait-controllers")...)

	if len(infrastructureZones()) > 0 {
		By("Letting Dockyard's manager run nodes as Pods of the management cluster, in every namespace")
		Expect(capie2e.BindInfrastructureRole(ctx, proxy.GetClient())).To(Succeed())
	}

	// A Deployment is Available when its pod is Ready, and kube-proxy may still lack the
	// webhook Service's new endpoint: the first object a spec created was refused ("connection
	// refused" calling a webhook). Wait until Dockyard's and Cluster API's webhooks answer a
	// dry run: an object accepted, or refused by the webhook, is an answer.
	By("Waiting for Dockyard's and Cluster API's webhooks to answer")
	for _, probe := range []client.Object{
		&infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "webhook-probe"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "webhook-probe"}},
	} {
		Eventually(func() error {
			err := proxy.GetClient().Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				return nil
			}
			return err
		}).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "the webhooks of %T do not answer", probe)
	}

	return []byte(strings.Join([]string{artifactFolder, configPath, clusterctlConfigPath, proxy.GetKubeconfigPath()}, ","))
}, func(data []byte) {
	parts := strings.Split(string(data), ",")
	Expect(parts).To(HaveLen(4))
	artifactFolder, configPath, clusterctlConfigPath = parts[0], parts[1], parts[2]
	if e2eConfig == nil {
		e2eConfig = loadE2EConfig()
	}
	bootstrapClusterProxy = framework.NewClusterProxy("bootstrap", parts[3], initScheme(),
		framework.WithMachineLogCollector(capie2e.LogCollector{}))
	// The self-hosted spec's cluster hosts the providers: its nodes get their images, as
	// Cluster API's suite preloads its images into CAPD's nodes; not the images the
	// management cluster takes only when the engine has them (tryLoad: Cluster API's test
	// extension), which no spec runs there.
	var images []string
	for _, img := range e2eConfig.Images {
		if img.LoadBehavior != clusterctl.TryLoadImage {
			images = append(images, img.Name)
		}
	}
	Expect(os.Setenv("DOCKYARD_PRELOAD_IMAGES", "["+strings.Join(images, ", ")+"]")).To(Succeed())
	// The conformance flavors' nodes get the images Kubernetes' conformance tests run, as make
	// conformance-images lists them in CONFORMANCE_DIR (the conformance specs fail without).
	conformanceImages = nil
	if dir := os.Getenv("CONFORMANCE_DIR"); dir != "" {
		list, err := os.ReadFile(filepath.Join(dir, "images.txt"))
		if !os.IsNotExist(err) {
			Expect(err).ToNot(HaveOccurred())
			conformanceImages = strings.Fields(string(list))
		}
	}
	Expect(os.Setenv("DOCKYARD_CONFORMANCE_IMAGES", "["+strings.Join(conformanceImages, ", ")+"]")).To(Succeed())
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	cancelWatches()
	// Clean up after an interrupt (^C cancels ctx) too, within a bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Minute)
	defer cancel()
	if bootstrapClusterProxy != nil {
		bootstrapClusterProxy.Dispose(ctx)
	}
	if bootstrapClusterProvider == nil {
		return
	}
	if skipCleanup {
		By(fmt.Sprintf("Keeping the management cluster (SKIP_RESOURCE_CLEANUP): kubeconfig %s", bootstrapClusterProvider.GetKubeconfigPath()))
		return
	}
	By("Collecting the management cluster's logs and deleting it")
	bootstrapClusterProvider.Dispose(ctx)

	By("Checking that nothing of any spec's cluster is left on the engine")
	left, err := capie2e.SpecClusters(ctx, runtimes.Config{}, e2eConfig.ManagementClusterName)
	Expect(err).ToNot(HaveOccurred())
	Expect(capie2e.RemoveClusters(ctx, runtimes.Config{}, left)).To(Succeed())
	Expect(capie2e.RemoveNetwork(ctx, runtimes.Config{}, capie2e.ConformanceNetwork)).To(Succeed())
	Expect(left).To(BeEmpty(), "left on the engine after the suite (now removed)")
})

// On failure, say where the evidence is: the framework dumped the spec's objects and every
// machine's logs (capie2e.LogCollector) before cleaning up.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() {
		return
	}
	fmt.Fprintf(GinkgoWriter, "\n%s failed. Evidence under %s:\n"+
		"  clusters/bootstrap/resources/<namespace>/  every Cluster API and Dockyard object of the spec, as YAML\n"+
		"  clusters/<cluster>/machines/<machine>/     each node's journal, kubelet.log, containerd.log, bootstrap-output.log, inspect.json\n"+
		"  clusters/<cluster>/infrastructure/         the load balancer's haproxy.cfg, console and inspect data\n"+
		"  clusters/bootstrap/logs/                   the controllers' logs (Cluster API, cert-manager, Dockyard)\n"+
		"  ginkgo-log.txt                             this run's log, with timestamps\n",
		report.FullText(), artifactFolder)
})

var _ bootstrap.ClusterProvider = &capie2e.ClusterProvider{}
