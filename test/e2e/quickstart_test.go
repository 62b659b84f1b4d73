//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
)

var _ = Describe("Quick start with the default template", Ordered, func() {
	c := clusterSpec{name: "e2e-qs", namespace: testNamespacePrefix + "-qs", controlPlane: 1, workers: 1}
	var created time.Time

	// The specs labelled "engines" run on every engine (make test-e2e-engines), the rest on
	// Docker only.
	It("brings up 1 control plane and 1 worker, Ready, with CoreDNS, DNS from a pod and kubectl from the host", func(ctx SpecContext) {
		created = time.Now()
		createCluster(ctx, c)

		waitClusterAvailable(ctx, c, clusterTimeout)
		whenDone("quick start: to first control plane initialized and cluster Available", created)

		waitMachinesRunning(ctx, c, 1, 1)
		whenDone("quick start: to all Machines Running and Nodes Ready (1+1)", created)

		wl, kubeconfig := workloadClient(ctx, c)
		By("CoreDNS runs")
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(wl.List(ctx, pods, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-dns"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				for _, cs := range p.Status.ContainerStatuses {
					g.Expect(cs.Ready).To(BeTrue(), "container %s of %s", cs.Name, p.Name)
				}
			}
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(poll).Should(Succeed())
		whenDone("quick start: to CoreDNS Ready", created)

		worker := machines(ctx, c, false)[0].Status.NodeRef.Name
		By("the workers' DockyardMachineTemplate publishes the worker Node's capacity (autoscaling from zero)")
		expectTemplateMatchesNode(ctx, c, wl, worker)

		By("a pod on the worker resolves kubernetes.default")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "dns-check", Namespace: "default"},
			Spec: corev1.PodSpec{
				NodeName:      worker,
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "check", Image: flannelImage(), ImagePullPolicy: corev1.PullIfNotPresent,
					Command: []string{"getent", "hosts", "kubernetes.default"},
				}},
			},
		}
		Expect(wl.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &corev1.Pod{}
			g.Expect(wl.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(corev1.PodSucceeded), "pod phase %s: %+v", got.Status.Phase, got.Status.ContainerStatuses)
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())

		By("kubectl on the host reaches the API server through the load balancer")
		out, err := kubectl(kubeconfig, "get", "nodes", "-o", "wide")
		Expect(err).NotTo(HaveOccurred(), out)
		fmt.Fprintln(GinkgoWriter, out)
		Expect(strings.Count(out, " Ready ")).To(Equal(2), out)

		By("no image was pulled in any node")
		for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
			out, _ := execInNode(ctx, nodeContainer(m), "sh", "-c", "journalctl -u containerd --no-pager | grep -c 'PullImage' || true")
			Expect(strings.TrimSpace(out)).To(Equal("0"), "node %s pulled images", m.Status.NodeRef.Name)
		}

		By("no kubelet garbage-collects the preloaded images, however full the host's disk")
		cp := nodeContainer(machines(ctx, c, true)[0])
		for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
			out, code := execInNode(ctx, cp, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "--raw", "/api/v1/nodes/"+m.Status.NodeRef.Name+"/proxy/configz")
			Expect(code).To(Equal(0), out)
			Expect(out).To(ContainSubstring(`"imageGCHighThresholdPercent":100`), "kubelet of node %s", m.Status.NodeRef.Name)
		}
	})

	It("scales the control plane from 1 to 3 behind the load balancer without failed API requests", func(ctx SpecContext) {
		poller := startAPIPoller(ctx, c)
		start := time.Now()
		kcp := &controlplanev1.KubeadmControlPlane{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name + "-control-plane"}, kcp)).To(Succeed())
		patch := client.MergeFrom(kcp.DeepCopy())
		kcp.Spec.Replicas = ptr.To[int32](3)
		Expect(plane.Client().Patch(ctx, kcp, patch)).To(Succeed())

		waitMachinesRunning(ctx, c, 3, 1)
		Eventually(func(g Gomega) {
			got := &controlplanev1.KubeadmControlPlane{}
			g.Expect(plane.Client().Get(ctx, client.ObjectKeyFromObject(kcp), got)).To(Succeed())
			g.Expect(ptr.Deref(got.Status.ReadyReplicas, 0)).To(BeEquivalentTo(3))
			g.Expect(ptr.Deref(got.Status.AvailableReplicas, 0)).To(BeEquivalentTo(3))
		}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
		var cpNodes []string
		for _, m := range machines(ctx, c, true) {
			cpNodes = append(cpNodes, nodeContainer(m)) // haproxy's server names
		}
		Eventually(func() []string { return loadBalancerBackends(ctx, c) }).WithContext(ctx).
			WithTimeout(2 * time.Minute).Should(ConsistOf(cpNodes))
		whenDone("control plane 1 -> 3", start)

		total, failures := poller.finish()
		fmt.Fprintf(GinkgoWriter, "API requests through the load balancer during the rollout: %d, failed: %d\n%s\n",
			total, len(failures), strings.Join(failures, "\n"))
		timings.add(fmt.Sprintf("control plane 1 -> 3: API requests %d, failed %d", total, len(failures)), 0)
		Expect(failures).To(BeEmpty(), "requests through the load balancer failed during the rollout")
	})

	It("deletes the cluster and leaves nothing behind", func(ctx SpecContext) {
		start := time.Now()
		deleteOn(ctx, plane, c)
		whenDone("delete the cluster until nothing is left", start)
	})
})

// flannelImage is the CNI image the node image preloads; it has getent.
func flannelImage() string {
	return envOr("E2E_PROBE_IMAGE", "localhost/dockyard/flannel:v0.28.10")
}

var _ = context.Background
