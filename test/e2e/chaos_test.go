//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/test/envtest"
)

// Chaos: what breaks outside Dockyard is seen in seconds and survived. A load balancer killed
// comes back on the endpoint's address; a worker killed is reported and replaced by a
// MachineHealthCheck; the engine restarted brings the whole cluster back on the same addresses.
// Serial: restarting the engine would break what other processes of the suite run on it, and
// the MachineHealthCheck's 20 s are measured on a machine that runs nothing else.
var _ = Describe("Chaos: failures outside Dockyard are seen in seconds and survived", Ordered, Serial, func() {
	c := clusterSpec{name: "e2e-chaos", namespace: testNamespacePrefix + "-chaos", controlPlane: 1, workers: 1}
	// hostKubeconfig is the kubeconfig a user gets when the cluster is made: the load
	// balancer's port on the host's 127.0.0.1.
	var hostKubeconfig string
	// A management cluster in containers, as dockyard quickstart makes it, with a cluster of its
	// own, so that its node is on a workload network too: the engine's restart must leave it
	// where it was. The workload network's name sorts before the management cluster's, so the
	// engine gives it the node's default route when it restarts (as dockyard-dev.default before
	// dockyard-mgmt after a quick start).
	own := ownManagement{name: testNamespacePrefix + "-chaos-mgmt",
		cluster: clusterSpec{name: "e2e-chaos-app", namespace: testNamespacePrefix + "-chaos-own", controlPlane: 1}}

	BeforeAll(func(ctx SpecContext) {
		start := time.Now()
		made := own.create(ctx)
		DeferCleanup(own.delete, NodeTimeout(10*time.Minute))
		createCluster(ctx, c)
		DeferCleanup(func(ctx SpecContext) { deleteOn(ctx, plane, c) }, NodeTimeout(10*time.Minute))
		waitMachinesRunning(ctx, c, 1, 1)
		whenDone("chaos: 1+1 cluster Ready", start)
		Expect(<-made).To(Succeed(), "dockyard create management, then a cluster of its own")
		whenDone("chaos: beside it, a management cluster in containers and a cluster of its own Ready", start)
		// Replaces a worker whose infrastructure reports it is gone or stopped (Dockyard's
		// ContainerProvisioned, mirrored into the Machine's InfrastructureReady). Made once the
		// cluster is up: InfrastructureReady is False from a Machine's creation until its node
		// has bootstrapped, so a 20 s check made earlier replaces a worker still joining, and the
		// Node it registered before its Machine had a nodeRef stays behind in the workload cluster.
		mhc := &clusterv1.MachineHealthCheck{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name + "-workers"},
			Spec: clusterv1.MachineHealthCheckSpec{
				ClusterName: c.name,
				Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineDeploymentNameLabel: c.name + "-md-0"}},
				Checks: clusterv1.MachineHealthCheckChecks{
					UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{
						{Type: clusterv1.InfrastructureReadyCondition, Status: metav1.ConditionFalse, TimeoutSeconds: ptr.To[int32](20)},
					},
				},
			},
		}
		Expect(plane.Client().Create(ctx, mhc)).To(Succeed())
		hostKubeconfig = writeHostKubeconfig(ctx, c)
	}, NodeTimeout(20*time.Minute))

	It("brings a killed load balancer back on the endpoint's address and host port; API requests through it resume", func(ctx SpecContext) {
		dc := getDockyardCluster(ctx, c)
		endpoint := dc.Spec.ControlPlaneEndpoint.Host
		lb := docker.LoadBalancerName(c.key())
		before, err := engine.InspectContainer(ctx, lb)
		Expect(err).NotTo(HaveOccurred())
		wl, _ := workloadClient(ctx, c)

		killed := time.Now()
		Expect(engine.SignalContainer(ctx, lb, "SIGKILL")).To(Succeed())
		Eventually(func(g Gomega) {
			now, err := engine.InspectContainer(ctx, lb)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now.Running).To(BeTrue())
			g.Expect(now.Networks[docker.DefaultNetworkName(c.key())].IPv4).To(Equal(endpoint))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		timings.add("chaos: load balancer killed → running again on the endpoint's address", time.Since(killed))
		Eventually(func() error {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			return wl.List(rctx, &corev1.NamespaceList{})
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		timings.add("chaos: load balancer killed → API requests through it answered again", time.Since(killed))

		By("the kubeconfig written when the cluster was made still works from the host")
		expectHostKubeconfigWorks(ctx, hostKubeconfig)

		now, err := engine.InspectContainer(ctx, lb)
		Expect(err).NotTo(HaveOccurred())
		Expect(now.ID).To(Equal(before.ID), "started again, not replaced: it keeps its configuration")
		Eventually(func(g Gomega) {
			g.Expect(conditions.IsTrue(getDockyardCluster(ctx, c), infrav1.LoadBalancerAvailableCondition)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
	})

	It("reports a killed worker in seconds, and its MachineHealthCheck replaces it", func(ctx SpecContext) {
		old := machines(ctx, c, false)[0]
		container := nodeContainer(old)
		killed := time.Now()
		Expect(engine.SignalContainer(ctx, container, "SIGKILL")).To(Succeed())
		Eventually(func(g Gomega) {
			dm := &infrav1.DockyardMachine{}
			g.Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: old.Spec.InfrastructureRef.Name}, dm)).To(Succeed())
			g.Expect(conditions.GetReason(dm, infrav1.ContainerProvisionedCondition)).To(Equal(infrav1.ContainerStoppedReason))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		timings.add("chaos: worker killed → reported (ContainerStopped)", time.Since(killed))

		Eventually(func(g Gomega) {
			ws := machines(ctx, c, false)
			g.Expect(ws).To(HaveLen(1))
			g.Expect(ws[0].Name).NotTo(Equal(old.Name), "the killed worker's Machine is still there")
		}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
		waitMachinesRunning(ctx, c, 1, 1)
		timings.add("chaos: worker killed → replaced by the MachineHealthCheck, new Node Ready (timeout 20s)", time.Since(killed))
		Expect(clusterContainers(ctx, c)).NotTo(HaveKey(container), "the killed worker's container is removed with its Machine")
	})

	It("survives the engine's restart: the cluster is Available again on the same addresses", Label("engine-restart"), func(ctx SpecContext) {
		addresses := func() map[string]string {
			out := map[string]string{}
			for name, ct := range clusterContainers(ctx, c) {
				full, err := engine.InspectContainer(ctx, name)
				Expect(err).NotTo(HaveOccurred())
				// The fixed address the node layer gave it, and the one it has.
				out[name] = full.Networks[docker.DefaultNetworkName(c.key())].IPv4 + " " + ct.Labels["dockyard.x-k8s.io/ipv4"]
			}
			return out
		}
		before := addresses()
		for name, a := range before {
			Expect(strings.Fields(a)).To(HaveLen(2), "container %s has no fixed address: %q", name, a)
		}
		mgmtAddress := own.nodeAddress(ctx)
		Expect(own.internalIP(ctx)).To(Equal(mgmtAddress), "the management node's Node, before the restart")
		restarted, back := restartEngine(ctx)
		timings.add("chaos: engine restarted → answering again", back.Sub(restarted))
		own.waitWebhooks(ctx)
		timings.add("chaos: engine answering again → the management cluster in containers admits objects through its webhooks", time.Since(back))
		Expect(own.nodeAddress(ctx)).To(Equal(mgmtAddress), "the management node's fixed address on its own network")
		Expect(own.internalIP(ctx)).To(Equal(mgmtAddress), "the management node's Node after the restart: its address on its own network, not a workload network's")
		own.expectSettledBeforeKubelet(ctx)
		waitClusterAvailable(ctx, c, clusterTimeout)
		waitMachinesRunning(ctx, c, 1, 1)
		wl, _ := workloadClient(ctx, c)
		Eventually(func() error { return wl.List(ctx, &corev1.NamespaceList{}) }).
			WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
		timings.add("chaos: engine restarted → cluster Available, Nodes Ready, API answering", time.Since(restarted))
		By("the kubeconfig written when the cluster was made still works from the host")
		expectHostKubeconfigWorks(ctx, hostKubeconfig)
		Eventually(addresses).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Equal(before))
		Eventually(func(g Gomega) {
			dc := getDockyardCluster(ctx, c)
			g.Expect(conditions.IsTrue(dc, clusterv1.ReadyCondition)).To(BeTrue(), conditions.GetMessage(dc, clusterv1.ReadyCondition))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
		own.waitNodesReady(ctx)
		timings.add("chaos: engine restarted → the management cluster's own cluster's Node Ready through it", time.Since(restarted))
	})
})

// A manager killed every few seconds still brings a cluster up, bootstrapping each node once.
// It kills only its own process's manager, so it runs beside the suite's other specs.
var _ = Describe("Chaos: a manager killed every few seconds", func() {
	It("brings a cluster up while the manager is killed every few seconds, bootstrapping each node once, leaking nothing", func(ctx SpecContext) {
		mk := clusterSpec{name: "e2e-chaos-mk", namespace: testNamespacePrefix + "-chaos-mk", controlPlane: 1, workers: 1}
		start := time.Now()
		// Created while the manager runs: its webhooks admit the objects.
		createCluster(ctx, mk)
		killer := killManagerAtRandom(ctx, 4*time.Second, 6*time.Second)
		waitMachinesRunning(ctx, mk, 1, 1)
		n := killer.stop()
		timings.add(fmt.Sprintf("chaos: 1+1 quick start with the manager SIGKILLed every 4–6 s (%d kills) → Nodes Ready", n), time.Since(start))
		Expect(n).To(BeNumerically(">=", 3), "the manager was killed only %d times", n)
		expectBootstrappedOnce(ctx, mk)
		Expect(clusterContainers(ctx, mk)).To(HaveLen(3), "a control plane, a worker and a load balancer, nothing more")
		deleteOn(ctx, plane, mk)
	})
})

func getDockyardCluster(ctx context.Context, c clusterSpec) *infrav1.DockyardCluster {
	dc := &infrav1.DockyardCluster{}
	Expect(c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc)).To(Succeed())
	return dc
}

// expectBootstrappedOnce checks in every node that kubeadm succeeded once and the bootstrap
// runner started once.
func expectBootstrappedOnce(ctx context.Context, c clusterSpec) {
	for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
		node := nodeContainer(m)
		out, code := execInNode(ctx, node, "cat", "/var/lib/dockyard/bootstrap/output.log")
		Expect(code).To(Equal(0), out)
		marker := "This node has joined the cluster"
		if _, isCP := m.Labels[clusterv1.MachineControlPlaneLabel]; isCP {
			marker = "Your Kubernetes control-plane has initialized successfully"
		}
		Expect(strings.Count(out, marker)).To(Equal(1), "node %s: kubeadm success lines in its bootstrap output:\n%s", node, out)
		Expect(strings.Count(out, "dockyard: step 1:")+strings.Count(out, "dockyard: step 1\n")).To(Equal(1),
			"node %s: the bootstrap runner started more than once:\n%s", node, out)
	}
}

// restartEngine restarts the Docker engine and returns when it sent the stop signal and when
// the engine answered again. A dockerd
// that hack/ensure-docker.sh started is stopped by the PID the script recorded (the suite stops
// nothing it did not start) and started again with the script; a Docker the host's systemd
// runs is restarted by systemd. On any other engine the spec fails, saying how to leave it out:
// it is the only proof that clusters survive an engine restart, so it never passes unseen.
func restartEngine(ctx context.Context) (stopped, back time.Time) {
	cache := os.Getenv("DOCKYARD_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "dockyard")
	}
	raw, pidErr := os.ReadFile(filepath.Join(cache, "dockerd", "pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if pidErr == nil && pid > 0 && strings.TrimSpace(string(comm)) == "dockerd" {
		By(fmt.Sprintf("restarting the Docker engine (dockerd, pid %d, started by hack/ensure-docker.sh)", pid))
		stopped := time.Now()
		Expect(syscall.Kill(pid, syscall.SIGTERM)).To(Succeed())
		Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).
			ShouldNot(Succeed(), "dockerd did not exit")
		out, err := exec.CommandContext(ctx, filepath.Join(envtest.RepoRoot(), "hack", "ensure-docker.sh")).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "starting the engine again:\n%s", out)
		fmt.Fprintf(GinkgoWriter, "%s", out)
		return stopped, time.Now()
	}
	if exec.CommandContext(ctx, "systemctl", "is-active", "--quiet", "docker").Run() == nil {
		By("restarting the Docker engine (systemctl restart docker)")
		stopped := time.Now()
		out, err := exec.CommandContext(ctx, "systemctl", "restart", "docker").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "systemctl restart docker:\n%s", out)
		return stopped, time.Now()
	}
	Fail(fmt.Sprintf("cannot restart this Docker engine: hack/ensure-docker.sh did not start it (pid file: %v, process %q) "+
		"and systemd does not run it. Run the suite on an engine the script starts, or leave this spec out with "+
		"E2E_FLAGS=--label-filter='!engine-restart'", pidErr, strings.TrimSpace(string(comm))))
	return time.Time{}, time.Time{}
}

// writeHostKubeconfig writes the cluster's kubeconfig as `dockyard get kubeconfig` gives it to
// the user (the load balancer's host port on 127.0.0.1, which spec.loadBalancer.hostPort
// keeps) and returns its path.
func writeHostKubeconfig(ctx context.Context, c clusterSpec) string {
	var port int32
	Eventually(func(g Gomega) {
		port = getDockyardCluster(ctx, c).Spec.LoadBalancer.HostPort
		g.Expect(port).NotTo(BeZero(), "spec.loadBalancer.hostPort not recorded")
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
	_, kubeconfig := workloadClient(ctx, c)
	cfg, err := clientcmd.Load(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	for _, cluster := range cfg.Clusters {
		cluster.Server = fmt.Sprintf("https://127.0.0.1:%d", port) // the templates add 127.0.0.1 to the API server's certificate
	}
	path := filepath.Join(GinkgoT().TempDir(), c.name+".kubeconfig")
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// expectHostKubeconfigWorks waits until kubectl with the kubeconfig file lists the Nodes.
func expectHostKubeconfigWorks(ctx context.Context, path string) {
	raw, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error {
		out, err := kubectl(raw, "get", "nodes", "--request-timeout=5s")
		if err != nil {
			return errors.Wrap(err, out)
		}
		return nil
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
}
