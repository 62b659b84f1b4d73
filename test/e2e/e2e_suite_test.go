//go:build e2e

// Package e2e proves Dockyard with Cluster API's own controllers: a management plane of real
// processes (test/framework) drives Dockyard until workload clusters made of node containers
// on a real engine are Ready, scale, survive a manager restart and are deleted without a
// trace. Run with `make test-e2e` (Docker: every spec) and `make test-e2e-engines` (the specs
// labelled "engines" on Podman and containerd: DOCKYARD_CONTAINER_RUNTIME names the engine).
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// Settings, from the environment the Makefile sets.
var (
	kubernetesVersion = envOr("E2E_KUBERNETES_VERSION", "v1.34.4")
	nodeImageRepo     = envOr("E2E_NODE_IMAGE_REPOSITORY", "localhost/dockyard/node")
	lbImage           = envOr("E2E_LB_IMAGE", "localhost/dockyard/haproxy:latest")
	artifacts         = envOr("E2E_ARTIFACTS", filepath.Join(os.TempDir(), "dockyard-e2e"))
)

var (
	plane *framework.ManagementPlane
	// engine is the engine, for what the tests check or break beneath the node layer; nodes is
	// the node layer on it.
	engine  container.Runtime
	nodes   *docker.Manager
	timings = &timingReport{}
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	RunSpecs(t, "Dockyard end-to-end")
}

// The suite runs in parallel processes (make test-e2e: ginkgo -p): each has a management plane
// of its own, so that one process's specs neither see nor slow another's objects, and they
// share the engine. What the engine holds is swept once, by the first process, before any spec
// and after the last; the chaos specs, which restart the engine, are Serial: they run alone.
var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	connectEngine(ctx)
	for _, img := range []string{nodeImageRepo + ":" + kubernetesVersion, lbImage} {
		ok, err := engine.ImageExists(ctx, img)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue(), "image %s is missing on %s: make test-e2e builds it (make engine-images)", img, runtimes.FromEnv())
	}
	sweepEngine(ctx, testNamespacePrefix, cctlNamespacePrefix)
	return nil
}, func(ctx SpecContext, _ []byte) {
	Expect(os.MkdirAll(artifacts, 0o755)).To(Succeed())
	if engine == nil {
		connectEngine(ctx)
	}
	By("starting the management plane: etcd, kube-apiserver, kube-controller-manager, Cluster API and Dockyard")
	// A failed run keeps its work directory for inspection; this run starts from nothing.
	workDir := filepath.Join(artifacts, planeDirName(GinkgoParallelProcess()))
	Expect(os.RemoveAll(workDir)).To(Succeed())
	start := time.Now()
	var err error
	plane, err = framework.Start(ctx, planeOptions(workDir))
	Expect(err).NotTo(HaveOccurred())
	timings.add("management plane started", time.Since(start))
}, NodeTimeout(20*time.Minute))

var _ = SynchronizedAfterSuite(func(ctx SpecContext) {
	if plane != nil {
		if CurrentSpecReport().Failed() {
			plane.KeepWorkDir()
		}
		Expect(plane.Stop(ctx)).To(Succeed())
	}
	_ = os.WriteFile(timingsPath(GinkgoParallelProcess()), []byte(timings.rows()), 0o644)
}, func(ctx SpecContext) {
	if engine != nil {
		sweepEngine(ctx, testNamespacePrefix, cctlNamespacePrefix)
	}
	// Every process's phases, in one table.
	var rows strings.Builder
	suite, _ := GinkgoConfiguration()
	for p := 1; p <= suite.ParallelTotal; p++ {
		data, err := os.ReadFile(timingsPath(p))
		if err == nil {
			rows.Write(data)
			_ = os.Remove(timingsPath(p))
		}
	}
	report := timingsHeader + rows.String()
	fmt.Fprintln(GinkgoWriter, report)
	_ = os.WriteFile(filepath.Join(artifacts, "timings.md"), []byte(report), 0o644)
}, NodeTimeout(5*time.Minute))

// planeOptions are the options of the suite's management planes, whose work directory is
// workDir: the plane of each process, and a plane some specs add (clusterctl move's target).
func planeOptions(workDir string) framework.Options {
	engineConfig := runtimes.FromEnv()
	return framework.Options{
		WorkDir: workDir,
		// As deployed: the suite has the engine to itself.
		GuardEngineHost: true,
		DockyardArgs: []string{
			"--node-image-repository=" + nodeImageRepo,
			"--load-balancer-image=" + lbImage,
			"--container-runtime=" + engineConfig.Name,
			"--container-runtime-endpoint=" + engineConfig.Endpoint,
			// The one network of the engine's that clusters may join: the user's shared network
			// (sharednetwork_test.go); the rest of the policy is the default.
			"--allowed-networks=" + sharedNetwork,
			// Low, so two teams' spec reaches it with a handful of Services (tenants_test.go).
			fmt.Sprintf("--max-service-load-balancers-per-cluster=%d", maxServiceLoadBalancers),
			// In-memory clusters' API servers (inmemory_test.go) apart from the ports the engine
			// publishes on 127.0.0.1 for the other specs' load balancers, which ask for 6443 too.
			"--in-memory-address=" + inMemoryAddress,
		},
		Log: GinkgoWriter,
	}
}

// connectEngine connects to the engine the environment names (DOCKYARD_CONTAINER_RUNTIME).
func connectEngine(ctx context.Context) {
	engineConfig := runtimes.FromEnv()
	rt, err := runtimes.New(engineConfig)
	Expect(err).NotTo(HaveOccurred())
	_, err = rt.Info(ctx)
	Expect(err).NotTo(HaveOccurred(), "the end-to-end suite needs its engine, %s (make test-e2e and make test-e2e-engines start it)", engineConfig)
	engine = rt
	nodes = docker.NewManager(rt, docker.ManagerOptions{})
	fmt.Fprintf(GinkgoWriter, "container engine: %s\n", engineConfig)
}

// planeDirName is the work directory of process p's management plane, below artifacts.
func planeDirName(p int) string {
	if p == 1 {
		return "management-plane"
	}
	return fmt.Sprintf("management-plane-%d", p)
}

func timingsPath(p int) string { return filepath.Join(artifacts, fmt.Sprintf("timings-%d.md", p)) }

// On failure, print what a person needs: Cluster API objects and their conditions, process
// logs, the engine's containers and the tails of the nodes' journals.
var _ = ReportAfterEach(func(ctx SpecContext, report SpecReport) {
	if !report.Failed() || plane == nil {
		return
	}
	var b strings.Builder
	plane.Dump(ctx, &b)
	dumpEngine(ctx, &b)
	path := filepath.Join(artifacts, strings.NewReplacer(" ", "-", "/", "-").Replace(report.LeafNodeText)+".dump.txt")
	_ = os.WriteFile(path, []byte(b.String()), 0o644)
	fmt.Fprintf(GinkgoWriter, "\n===== failure dump (also in %s) =====\n%s\n", path, b.String())
})

// sweepEngine removes what an earlier, interrupted run left on the engine: everything of the
// clusters whose namespace starts with one of prefixes (the suite's namespaces).
func sweepEngine(ctx context.Context, prefixes ...string) {
	clusters, err := nodes.ListClusters(ctx)
	if err != nil {
		fmt.Fprintf(GinkgoWriter, "listing Dockyard's clusters on the engine: %v\n", err)
		return
	}
	for _, c := range clusters {
		for _, p := range prefixes {
			if strings.HasPrefix(c.Cluster.Namespace, p) {
				if err := nodes.RemoveCluster(ctx, c); err != nil {
					fmt.Fprintf(GinkgoWriter, "%v\n", err)
				}
				break
			}
		}
	}
}
