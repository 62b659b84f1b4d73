//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/envtest"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// The specs whose clusters clusterctl generates from the shipped flavors (ipfamilies_test.go,
// machinepool_test.go, sharednetwork_test.go) use their own namespace prefix, so their sweeps
// and those of the rest of the suite never remove each other's containers.
const cctlNamespacePrefix = "dockyard-cctl-e2e"

// clusterctl runs the clusterctl binary the plane was built with, as a user would: a private
// HOME, no version check against GitHub, the given variables. It returns the combined output.
func clusterctl(ctx context.Context, vars map[string]string, args ...string) string {
	home, err := os.MkdirTemp("", "dockyard-cctl-home-")
	Expect(err).NotTo(HaveOccurred())
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, plane.Binaries().Clusterctl, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"CLUSTERCTL_DISABLE_VERSIONCHECK=true"}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	fmt.Fprintf(GinkgoWriter, "clusterctl %s (%s):\n%s%s\n", strings.Join(args, " "), time.Since(start).Round(time.Millisecond),
		tailLines(stdout.String(), 300), stderr.String())
	Expect(err).NotTo(HaveOccurred(), "clusterctl %s:\n%s\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String()
}

func tailLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		return fmt.Sprintf("... (%d lines)\n", len(lines)-n) + strings.Join(lines[len(lines)-n:], "")
	}
	return s
}

// generateFromTemplate renders a file of templates/ with `clusterctl generate cluster --from`
// (or `generate yaml --from` when c is zero) and returns the objects.
func generateFromTemplate(ctx context.Context, file string, c clusterSpec, vars map[string]string) []unstructured.Unstructured {
	path := filepath.Join(envtest.RepoRoot(), "templates", file)
	var out string
	if c.name == "" {
		out = clusterctl(ctx, vars, "generate", "yaml", "--from", path)
	} else {
		out = clusterctl(ctx, vars, "generate", "cluster", c.name, "--from", path,
			"--target-namespace", c.namespace, "--kubernetes-version", kubernetesVersion,
			"--control-plane-machine-count", fmt.Sprint(c.controlPlane), "--worker-machine-count", fmt.Sprint(c.workers))
	}
	objs, err := capiyaml.ToUnstructured([]byte(out))
	Expect(err).NotTo(HaveOccurred())
	Expect(out).NotTo(ContainSubstring("${"), "clusterctl left variables unset")
	return objs
}

// createObjects creates objects (setting a namespace on namespaced ones that lack it). Right
// after `clusterctl init` a provider's webhook Service may not route to its Ready pod yet
// (kube-proxy programs it a few seconds later), so a failed webhook call is retried for a while,
// as Cluster API's own e2e framework does; any other error fails at once.
func createObjects(ctx context.Context, cl client.Client, namespace string, objs []unstructured.Unstructured) {
	Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	for i := range objs {
		if objs[i].GetNamespace() == "" {
			objs[i].SetNamespace(namespace)
		}
		Eventually(func() error {
			err := cl.Create(ctx, objs[i].DeepCopy())
			if err != nil && !strings.Contains(err.Error(), "failed calling webhook") {
				return StopTrying("not a webhook that is still starting").Wrap(err)
			}
			return err
		}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(poll).
			Should(Succeed(), "creating %s %s", objs[i].GetKind(), objs[i].GetName())
	}
}

// clusterContainers lists the engine's containers of a cluster by name.
func clusterContainers(ctx context.Context, c clusterSpec) map[string]container.Container {
	cs, err := engine.ListContainers(ctx, c.key().ClusterLabels())
	Expect(err).NotTo(HaveOccurred())
	out := map[string]container.Container{}
	for _, ct := range cs {
		out[ct.Name] = ct
	}
	return out
}

// verifyRunningOn waits until the cluster on a management plane has exactly the given
// Machines, all Running, their Nodes Ready and carrying the DockyardMachine's providerID; it
// returns the DockyardMachines by name.
func verifyRunningOn(ctx context.Context, mp *framework.ManagementPlane, c clusterSpec, controlPlanes, workers int) map[string]*infrav1.DockyardMachine {
	return verifyRunningWith(ctx, mp.Client(), c, controlPlanes, workers)
}

// verifyRunningWith is verifyRunningOn for a management cluster's client.
func verifyRunningWith(ctx context.Context, cl client.Client, c clusterSpec, controlPlanes, workers int) map[string]*infrav1.DockyardMachine {
	var dms map[string]*infrav1.DockyardMachine
	Eventually(func(g Gomega) {
		dms = map[string]*infrav1.DockyardMachine{}
		list := &clusterv1.MachineList{}
		g.Expect(cl.List(ctx, list, client.InNamespace(c.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
		cps := 0
		for _, m := range list.Items {
			if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
				cps++
			}
		}
		g.Expect(cps).To(Equal(controlPlanes), "control plane machines")
		g.Expect(len(list.Items)-cps).To(Equal(workers), "worker machines")

		secret := &corev1.Secret{}
		g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name + "-kubeconfig"}, secret)).To(Succeed())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
		g.Expect(err).NotTo(HaveOccurred())
		cfg.Timeout = 10 * time.Second
		wl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range list.Items {
			g.Expect(m.Status.Phase).To(Equal(string(clusterv1.MachinePhaseRunning)), "machine %s phase", m.Name)
			g.Expect(m.Status.NodeRef.IsDefined()).To(BeTrue(), "machine %s has no node yet", m.Name)
			dm := &infrav1.DockyardMachine{}
			g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: m.Spec.InfrastructureRef.Name}, dm)).To(Succeed())
			node := &corev1.Node{}
			g.Expect(wl.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node)).To(Succeed())
			g.Expect(node.Spec.ProviderID).To(Equal(dm.Spec.ProviderID), "node %s providerID", node.Name)
			g.Expect(node.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
			g.Expect(nodeReady(node)).To(BeTrue(), "node %s is not Ready", node.Name)
			dms[dm.Name] = dm
		}
	}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
	return dms
}

// deleteOn deletes Clusters on a management plane and waits until neither the plane nor the
// engine keeps anything of them: no Dockyard object, no container, volume or network with a
// cluster's label.
func deleteOn(ctx context.Context, mp *framework.ManagementPlane, cs ...clusterSpec) {
	deleteWith(ctx, mp.Client(), cs...)
}

// deleteWith is deleteOn for a management cluster's client. The Clusters are deleted together,
// then each is waited for: until its objects are gone and nothing with its label is left on the
// engine.
func deleteWith(ctx context.Context, cl client.Client, cs ...clusterSpec) {
	for _, c := range cs {
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name}}
		Expect(client.IgnoreNotFound(cl.Delete(ctx, cluster))).To(Succeed())
	}
	for _, c := range cs {
		Eventually(func(g Gomega) {
			err := cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, &clusterv1.Cluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster %s/%s still exists: %v", c.namespace, c.name, err)
			for _, list := range []client.ObjectList{&clusterv1.MachineList{}, &infrav1.DockyardMachineList{}, &infrav1.DockyardClusterList{}} {
				g.Expect(cl.List(ctx, list, client.InNamespace(c.namespace))).To(Succeed())
				g.Expect(meta(list)).To(BeZero(), "%T left in %s", list, c.namespace)
			}
		}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
		Eventually(func(g Gomega) {
			labels := c.key().ClusterLabels()
			cs, err := engine.ListContainers(ctx, labels)
			g.Expect(err).NotTo(HaveOccurred())
			vs, err := engine.ListVolumes(ctx, labels)
			g.Expect(err).NotTo(HaveOccurred())
			ns, err := engine.ListNetworks(ctx, labels)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cs).To(BeEmpty(), "containers of %s/%s left on the engine", c.namespace, c.name)
			g.Expect(vs).To(BeEmpty(), "volumes of %s/%s left on the engine", c.namespace, c.name)
			g.Expect(ns).To(BeEmpty(), "networks of %s/%s left on the engine", c.namespace, c.name)
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
	}
}

// cleanupCluster is what a spec leaves when it ends, failed or not: its Cluster deleted (and
// waited for), its namespace deleted, and the engine swept of what carries the sweep prefix.
func cleanupCluster(ctx context.Context, c clusterSpec, sweepPrefix string) {
	cl := plane.Client()
	_ = cl.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name}})
	Eventually(func() bool {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, &clusterv1.Cluster{}))
	}).WithContext(ctx).WithTimeout(5 * time.Minute).Should(BeTrue())
	_ = cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}})
	sweepEngine(ctx, sweepPrefix)
}
