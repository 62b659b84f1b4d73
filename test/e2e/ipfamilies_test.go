//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The IP family flavors booted for real, as CAPD's suite does for its IPv6 and dual-stack
// flavors: templates/cluster-template-{ipv6,dual-stack,dual-stack-ipv6-primary}.yaml rendered
// by clusterctl, each cluster 1 control plane + 1 worker on a dual-stack network, and pods on
// the two nodes talking over every family the cluster has. The three clusters come up side by
// side, which also proves their networks' IPv6 subnets do not collide.
var _ = Describe("IP family flavors (IPv6, dual-stack IPv4-primary and IPv6-primary)", Ordered, func() {
	type family struct {
		flavor string
		// families the pods get, primary first
		pods []string
	}
	families := []family{
		{"ipv6", []string{"IPv6"}},
		{"dual-stack", []string{"IPv4", "IPv6"}},
		{"dual-stack-ipv6-primary", []string{"IPv6", "IPv4"}},
	}
	specs := map[string]clusterSpec{}
	for _, f := range families {
		name := "cctl-" + strings.ReplaceAll(strings.ReplaceAll(f.flavor, "dual-stack", "ds"), "ipv6-primary", "6p")
		specs[f.flavor] = clusterSpec{name: name, namespace: cctlNamespacePrefix + "-" + f.flavor, controlPlane: 1, workers: 1}
	}

	BeforeAll(func(ctx SpecContext) {
		for _, f := range families {
			c := specs[f.flavor]
			DeferCleanup(func(ctx SpecContext) { cleanupCluster(ctx, c, c.namespace) }, NodeTimeout(6*time.Minute))
		}
	})

	It("brings up 1 control plane and 1 worker of each flavor, pods talking across nodes in every family", func(ctx SpecContext) {
		start := time.Now()
		for _, f := range families {
			c := specs[f.flavor]
			objs := generateFromTemplate(ctx, "cluster-template-"+f.flavor+".yaml", c, map[string]string{
				"DOCKYARD_NODE_IMAGE": nodeImageRepo + ":" + kubernetesVersion,
				"DOCKYARD_LB_IMAGE":   lbImage,
			})
			createObjects(ctx, plane.Client(), c.namespace, objs)
		}
		for _, f := range families {
			c := specs[f.flavor]
			verifyRunningOn(ctx, plane, c, 1, 1)
			whenDone(fmt.Sprintf("%s flavor: to all Machines Running and Nodes Ready (1+1, three clusters at once)", f.flavor), start)
		}

		for _, f := range families {
			c := specs[f.flavor]
			By(f.flavor + ": the load balancer and the nodes have an address of each family on the cluster's network")
			for name, ct := range clusterContainers(ctx, c) {
				for _, ep := range ct.Networks {
					Expect(ep.IPv4).NotTo(BeEmpty(), "container %s: %+v", name, ct.Networks)
					Expect(ep.IPv6).NotTo(BeEmpty(), "container %s: %+v", name, ct.Networks)
				}
			}

			By(f.flavor + ": pods on the two nodes talk over " + strings.Join(f.pods, " and "))
			wl, kubeconfig := workloadClient(ctx, c)
			expectPodTraffic(ctx, wl, kubeconfig, machines(ctx, c, true)[0].Status.NodeRef.Name, machines(ctx, c, false)[0].Status.NodeRef.Name, f.pods)
		}
		whenDone("IP family flavors: three clusters up and pod traffic checked in every family", start)
	})

	It("deletes the clusters and leaves nothing on the engine", func(ctx SpecContext) {
		start := time.Now()
		all := make([]clusterSpec, 0, len(families))
		for _, f := range families {
			all = append(all, specs[f.flavor])
		}
		deleteOn(ctx, plane, all...)
		whenDone("IP family flavors: delete three clusters until nothing is left", start)
	})
})

// expectPodTraffic runs a server pod on one node and a client pod on another: the server
// answers on every address family (one dual-stack socket), the client connects to each of the
// server's pod IPs and checks the answer. The pods' IPs must be of the families given, primary
// first.
func expectPodTraffic(ctx SpecContext, wl client.Client, kubeconfig []byte, clientNode, serverNode string, families []string) {
	const port = "8080"
	tolerations := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	server := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "traffic-server", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: serverNode, Tolerations: tolerations,
			Containers: []corev1.Container{{
				Name: "server", Image: flannelImage(), ImagePullPolicy: corev1.PullIfNotPresent,
				// perl's IO::Socket::IP on "::" with V6Only off takes both families.
				Command: []string{"perl", "-MIO::Socket::IP", "-e", `my $s = IO::Socket::IP->new(LocalHost => "::", LocalPort => ` + port + `, Listen => 16, ReuseAddr => 1, V6Only => 0) or die "listen: $@";
while (my $c = $s->accept) { print $c "hello from the server\n"; close $c }`},
			}},
		},
	}
	Expect(wl.Create(ctx, server)).To(Succeed())
	var ips []string
	Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(wl.Get(ctx, client.ObjectKeyFromObject(server), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "server pod: %+v", got.Status)
		ips = nil
		for _, ip := range got.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		g.Expect(ips).To(HaveLen(len(families)), "server pod IPs")
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
	for i, ip := range ips {
		a, err := netip.ParseAddr(ip)
		Expect(err).NotTo(HaveOccurred())
		want := families[i] == "IPv6"
		Expect(a.Is6()).To(Equal(want), "pod IP %d is %s, want %s (IPs %v)", i, ip, families[i], ips)
	}

	// The client retries each address for a while: the server may still be binding.
	var script strings.Builder
	for _, ip := range ips {
		fmt.Fprintf(&script, `ok=; for i in $(seq 30); do if exec 3<>"/dev/tcp/%s/%s" && read -r line <&3 && [ "$line" = "hello from the server" ]; then ok=1; exec 3<&-; break; fi; sleep 2; done; [ -n "$ok" ] || { echo "no answer from %s"; exit 1; }; echo "answer from %s"
`, ip, port, ip, ip)
	}
	cl := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "traffic-client", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName: clientNode, Tolerations: tolerations, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: flannelImage(), ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"bash", "-c", script.String()},
			}},
		},
	}
	Expect(wl.Create(ctx, cl)).To(Succeed())
	Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(wl.Get(ctx, client.ObjectKeyFromObject(cl), got)).To(Succeed())
		if got.Status.Phase == corev1.PodFailed {
			logs, _ := kubectl(kubeconfig, "logs", "-n", "default", cl.Name)
			StopTrying(fmt.Sprintf("client pod failed (server at %v), its output:\n%s", ips, logs)).Now()
		}
		g.Expect(got.Status.Phase).To(Equal(corev1.PodSucceeded), "client pod (server at %v): %+v", ips, got.Status)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
	out, _ := kubectl(kubeconfig, "logs", "-n", "default", cl.Name)
	fmt.Fprint(GinkgoWriter, out)
}
