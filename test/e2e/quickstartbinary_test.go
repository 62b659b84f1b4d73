//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/repository/embedded"
)

// dockyard quickstart as a new user runs it, from a directory that holds only the binary: the
// management cluster in a node container, cert-manager, Cluster API and Dockyard installed with
// clusterctl's library from the repository the binary carries, and a 1+1 cluster. The engine's
// manager image of the binary's version is removed first, so the binary makes it of itself (it
// runs as the manager when called so). dockyard delete management then leaves nothing.
var _ = Describe("dockyard quickstart from a directory holding only the binary", Ordered, Label("release"), func() {
	mgmtName := testNamespacePrefix + "-qsbin"
	wl := clusterSpec{name: "e2e-qsbin", namespace: "default", controlPlane: 1, workers: 1}
	var cli *dockyardCLI

	It("makes the management cluster with the binary's own manager image, a Ready 1+1 cluster, and deletes both", func(ctx SpecContext) {
		cli = newDockyardCLI(ctx)
		r, err := embedded.Repository()
		Expect(err).NotTo(HaveOccurred())
		version, err := r.Version()
		Expect(err).NotTo(HaveOccurred())
		manager := imagebuild.ManagerImageName(version)
		if ok, err := engine.ImageExists(ctx, manager); err == nil && ok {
			Expect(engine.RemoveImage(ctx, manager)).To(Succeed())
		}

		start := time.Now()
		cli.runOwn(ctx, mgmtName, "quickstart", "--name", wl.name, "--workers", "1")
		whenDone("quickstart from the binary alone: management cluster, providers, 1+1 Ready", start)
		Expect(engine.ImageExists(ctx, manager)).To(BeTrue(), "the binary made %s", manager)

		By("Dockyard's manager runs in the management cluster")
		mgmt := kubeClient(filepath.Join(cli.dir, mgmtName+".kubeconfig"))
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(mgmt.List(ctx, pods, client.InNamespace("dockyard-system"))).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			g.Expect(pods.Items[0].Spec.Containers[0].Image).To(Equal(manager))
			g.Expect(podReady(&pods.Items[0])).To(BeTrue())
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())

		By("the workload cluster's two nodes are Ready")
		kubeconfig := cli.runOwn(ctx, mgmtName, "get", "kubeconfig", wl.name)
		path := filepath.Join(cli.dir, wl.name+".conf")
		Expect(os.WriteFile(path, []byte(kubeconfig), 0o600)).To(Succeed())
		workload := kubeClient(path)
		Eventually(func(g Gomega) {
			list := &corev1.NodeList{}
			g.Expect(workload.List(ctx, list)).To(Succeed())
			g.Expect(list.Items).To(HaveLen(2))
			for _, n := range list.Items {
				g.Expect(nodeReady(&n)).To(BeTrue(), "node %s", n.Name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())

		By("dockyard delete management leaves nothing")
		start = time.Now()
		cli.runOwn(ctx, mgmtName, "delete", "management")
		whenDone("quickstart from the binary alone: delete management (the 1+1 through Cluster API first)", start)
		for _, key := range []docker.ClusterKey{{Name: mgmtName}, wl.key()} {
			left, err := nodes.Leftovers(ctx, key)
			Expect(err).NotTo(HaveOccurred())
			Expect(left).To(BeNil(), "what dockyard delete management left of %v", key)
		}
	})

	AfterAll(func(ctx SpecContext) {
		if cli != nil {
			cli.tryOwn(ctx, mgmtName, "delete", "management")
		}
		for _, key := range []docker.ClusterKey{{Name: mgmtName}, wl.key()} {
			if left, err := nodes.Leftovers(ctx, key); err == nil && left != nil {
				_ = nodes.RemoveCluster(ctx, *left)
			}
		}
	}, NodeTimeout(10*time.Minute))
})

// kubeClient is a client of the cluster the kubeconfig file reaches.
func kubeClient(path string) client.Client {
	kubeconfig, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return clientFor(kubeconfig)
}

// runOwn runs the command line with a management cluster of its own in containers, named
// mgmtName, instead of the suite's management plane.
func (c *dockyardCLI) runOwn(ctx context.Context, mgmtName string, args ...string) string {
	out, err := c.exec(ctx, []string{"--management-name", mgmtName}, args...)
	Expect(err).NotTo(HaveOccurred(), "dockyard %s", strings.Join(args, " "))
	return out
}

// tryOwn is runOwn for cleanups: a failure is logged, not asserted.
func (c *dockyardCLI) tryOwn(ctx context.Context, mgmtName string, args ...string) {
	if _, err := c.exec(ctx, []string{"--management-name", mgmtName}, args...); err != nil {
		fmt.Fprintf(GinkgoWriter, "dockyard %s: %v\n", strings.Join(args, " "), err)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
