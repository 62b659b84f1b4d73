//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// The daily loop of a local cluster, as a user does it with the dockyard command line against
// the suite's management cluster: a local registry, a cluster made by `dockyard create
// cluster` (workers publishing a NodePort on the host), a host image loaded into it (and into
// a node that joins later), an image pushed to the registry and pulled by a pod, a NodePort
// and a LoadBalancer Service reached from the host, logs exported, the cluster listed, its
// kubeconfig used from the host, and everything deleted. Labelled engines: make
// test-e2e-engines runs it on Podman and containerd too, as the one end-to-end spec there (a
// cluster created, every node running pods, Service traffic, logs, nothing left after).
var _ = Describe("The daily loop with the dockyard command line", Ordered, Label("engines"), func() {
	c := clusterSpec{name: "e2e-daily", namespace: testNamespacePrefix + "-daily", controlPlane: 1, workers: 1}
	// dailyLabel labels the worker through kind's configuration.
	const dailyLabel = "e2e.dockyard.dev/pool"
	ref := c.namespace + "/" + c.name
	// The manager's default policy lets a namespace load the images named after it.
	appImage := "localhost/" + c.namespace + "/app:dev"
	const (
		appPort   = 30080
		pushedApp = "e2e/app:v1"
	)
	var (
		cli                          *dockyardCLI
		work, registry, registryHost string
		wl                           client.Client
		hostKubeconfig               []byte
	)

	BeforeAll(func(ctx SpecContext) {
		cli = newDockyardCLI(ctx)
		work = cli.dir
		registry = c.namespace + "-registry"
		DeferCleanup(func(ctx SpecContext) {
			_, _ = nodes.DeleteRegistry(ctx, registry, false)
		}, NodeTimeout(time.Minute))
	}, NodeTimeout(5*time.Minute))

	dockyard := func(ctx context.Context, args ...string) string { return cli.run(ctx, args...) }

	It("creates a local registry that the host pushes to", func(ctx SpecContext) {
		port := freePort()
		out := dockyard(ctx, "registry", "create", "--name", registry, "--port", strconv.Itoa(port), "--namespaces", c.namespace)
		registryHost = "localhost:" + strconv.Itoa(port)
		Expect(out).To(ContainSubstring(registryHost))
		By("pushing an image from the host")
		pushed, err := name.ParseReference(registryHost+"/"+pushedApp, name.Insecure)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			return remote.Write(pushed, engineImage(ctx, lbImage), remote.WithContext(ctx))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
	})

	It("creates a cluster with dockyard create cluster from kind's configuration file, lists it and reaches it from the host", func(ctx SpecContext) {
		// kind's v1alpha4 Cluster: its nodes, a worker's label, port and kubelet configuration
		// patches (strategic, then JSON 6902 over it), the API server's runtime config and a flag
		// of a JSON 6902 patch, the nodes' DNS search list and containerd configuration; the spec
		// checks each in the running cluster.
		kindConfig := filepath.Join(work, "kind.yaml")
		Expect(os.WriteFile(kindConfig, fmt.Appendf(nil, `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
runtimeConfig:
  "api/alpha": "false"
networking:
  dnsSearch: [daily.example]
containerdConfigPatches:
- |-
  [metrics]
    address = "127.0.0.1:1338"
containerdConfigPatchesJSON6902:
- |
  - op: replace
    path: /metrics/address
    value: 127.0.0.1:1339
kubeadmConfigPatchesJSON6902:
- group: kubeadm.k8s.io
  version: v1beta4
  kind: ClusterConfiguration
  patch: |
    - op: add
      path: /apiServer/extraArgs/-
      value: {name: event-ttl, value: 2h0m0s}
nodes:
- role: control-plane
- role: worker
  labels: {%s: daily}
  extraPortMappings:
  - containerPort: %d
  kubeadmConfigPatches:
  - |
    kind: KubeletConfiguration
    maxPods: 120
  kubeadmConfigPatchesJSON6902:
  - group: kubelet.config.k8s.io
    version: v1beta1
    kind: KubeletConfiguration
    patch: |
      - op: replace
        path: /maxPods
        value: 150
`, dailyLabel, appPort), 0o600)).To(Succeed())
		start := time.Now()
		dockyard(ctx, "create", "cluster", c.name, "-n", c.namespace, "--config", kindConfig, "--kubernetes-version", kubernetesVersion,
			"--var", "DOCKYARD_LB_IMAGE="+lbImage, "--var", "DOCKYARD_REGISTRY="+registry)
		whenDone("daily loop: dockyard create cluster (1+1, waits for Ready nodes)", start)
		Eventually(func() string { return dockyard(ctx, "get", "clusters") }).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(5 * time.Second).
			Should(MatchRegexp(`%s\s+%s\s+Provisioned\s+1/1\s+1/1`, c.namespace, c.name))

		hostKubeconfig = []byte(dockyard(ctx, "get", "kubeconfig", c.name, "-n", c.namespace))
		Expect(string(hostKubeconfig)).To(ContainSubstring("server: https://127.0.0.1:"))
		out, err := kubectl(hostKubeconfig, "get", "nodes")
		Expect(err).NotTo(HaveOccurred(), out)
		wl, _ = workloadClient(ctx, c)

		By("checking what kind's configuration asked for: the worker's label and maxPods, the API server's flags, the nodes' search list and containerd configuration")
		labelled := &corev1.NodeList{}
		Expect(wl.List(ctx, labelled, client.MatchingLabels{dailyLabel: "daily"})).To(Succeed())
		Expect(labelled.Items).To(HaveLen(1), "the worker's Node carries the label of kind's configuration")
		Expect(labelled.Items[0].Labels).NotTo(HaveKey("node-role.kubernetes.io/control-plane"))
		Expect(labelled.Items[0].Status.Capacity.Pods().Value()).To(BeEquivalentTo(150), "the worker's kubelet runs with the maxPods of the JSON 6902 patch, applied after the strategic one")
		apiServers := &corev1.PodList{}
		Expect(wl.List(ctx, apiServers, client.InNamespace("kube-system"), client.MatchingLabels{"component": "kube-apiserver"})).To(Succeed())
		Expect(apiServers.Items).To(HaveLen(1))
		Expect(apiServers.Items[0].Spec.Containers[0].Command).To(ContainElements("--runtime-config=api/alpha=false", "--event-ttl=2h0m0s"))
		machines := &clusterv1.MachineList{}
		Expect(plane.Client().List(ctx, machines, client.InNamespace(c.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
		Expect(machines.Items).To(HaveLen(2))
		for _, m := range machines.Items {
			out, code := execInNode(ctx, nodeContainer(m), "cat", "/etc/resolv.conf")
			Expect(code).To(BeZero(), out)
			Expect(out).To(MatchRegexp(`(?m)^search daily\.example$`), "node %s searches the domains of networking.dnsSearch", m.Name)
			// containerd serves its metrics where the JSON 6902 patch, applied after the merge
			// patch, said: it runs with the patched file.
			out, code = execInNode(ctx, nodeContainer(m), "curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:1339/v1/metrics")
			Expect(code).To(BeZero(), "containerd of node %s serves metrics at the address of containerdConfigPatchesJSON6902: %s", m.Name, out)
		}
	})

	It("loads a host image into every node, and into a node that joins later", func(ctx SpecContext) {
		By("building a 100 MiB image on the host's engine")
		layer, err := random.Layer(100<<20, types.DockerLayer)
		Expect(err).NotTo(HaveOccurred())
		img, err := mutate.AppendLayers(engineImage(ctx, lbImage), layer)
		Expect(err).NotTo(HaveOccurred())
		putImage(ctx, appImage, img)

		// managerLoads counts the copies of the image into a node that Dockyard's manager made
		// (it logs each one).
		managerLoads := func() int {
			b, err := os.ReadFile(plane.LogPath(framework.DockyardManager))
			Expect(err).NotTo(HaveOccurred())
			n := 0
			for line := range strings.Lines(string(b)) {
				if strings.Contains(line, "Loaded an image into the node") && strings.Contains(line, appImage) {
					n++
				}
			}
			return n
		}

		start := time.Now()
		dockyard(ctx, "load", "image", appImage, "--cluster", ref)
		timings.add("daily loop: dockyard load image, 100 MiB image into a 1+1 cluster", time.Since(start))
		dc := &infrav1.DockyardCluster{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc)).To(Succeed())
		Expect(dc.Spec.LoadImages).To(ContainElement(appImage))
		By("checking that Dockyard finds the image in the nodes the command loaded, instead of copying it again")
		Consistently(managerLoads).WithContext(ctx).WithTimeout(15*time.Second).WithPolling(time.Second).Should(BeZero(),
			"Dockyard's manager copied %s into nodes that dockyard load image had loaded", appImage)
		for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
			runPod(ctx, wl, "app-"+m.Status.NodeRef.Name, m.Status.NodeRef.Name, appImage, corev1.PullNever)
		}

		By("scaling the workers to 2 with dockyard scale cluster: the new node gets the image from Dockyard")
		start = time.Now()
		dockyard(ctx, "scale", "cluster", c.name, "-n", c.namespace, "--workers", "2")
		whenDone("daily loop: dockyard scale cluster, workers 1 → 2 (waits for Ready nodes)", start)
		md := &clusterv1.MachineDeployment{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name + "-md-0"}, md)).To(Succeed())
		Expect(md.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		waitMachinesRunning(ctx, c, 1, 2)
		for _, m := range machines(ctx, c, false) {
			runPod(ctx, wl, "app-late-"+m.Status.NodeRef.Name, m.Status.NodeRef.Name, appImage, corev1.PullNever)
		}
		Expect(managerLoads()).To(Equal(1), "Dockyard's manager copies %s into the node that joined, once", appImage)
	})

	It("runs an image pushed to the local registry", func(ctx SpecContext) {
		runPod(ctx, wl, "pushed", "", registryHost+"/"+pushedApp, corev1.PullAlways)
	})

	It("serves a NodePort through the workers' host port and a LoadBalancer Service on an address the host reaches", func(ctx SpecContext) {
		By("an HTTP server (haproxy answering hello) behind a NodePort Service")
		labels := map[string]string{"app": "hello"}
		server := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "hello", Image: appImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", `printf 'defaults\n  mode http\n  timeout client 10s\n  timeout connect 5s\n  timeout server 10s\nfrontend web\n  bind :8080\n  http-request return status 200 content-type text/plain string hello\n' > /tmp/hello.cfg && exec haproxy -db -f /tmp/hello.cfg`},
				Ports:   []corev1.ContainerPort{{ContainerPort: 8080}},
			}}},
		}
		Expect(wl.Create(ctx, server)).To(Succeed())
		nodePort := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "hello-nodeport", Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: labels,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: appPort}}},
		}
		Expect(wl.Create(ctx, nodePort)).To(Succeed())
		worker := machines(ctx, c, false)[0]
		dm := &infrav1.DockyardMachine{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: worker.Spec.InfrastructureRef.Name}, dm)).To(Succeed())
		Expect(dm.Status.Ports).To(HaveLen(1))
		hostURL := fmt.Sprintf("http://%s:%d/", dm.Status.Ports[0].ListenAddress, dm.Status.Ports[0].HostPort)
		expectHello(ctx, hostURL)

		By("a LoadBalancer Service gets an address and answers there")
		lb := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "hello-lb", Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		start := time.Now()
		Expect(wl.Create(ctx, lb)).To(Succeed())
		var address string
		Eventually(func(g Gomega) {
			got := &corev1.Service{}
			g.Expect(wl.Get(ctx, client.ObjectKeyFromObject(lb), got)).To(Succeed())
			g.Expect(got.Status.LoadBalancer.Ingress).To(HaveLen(1))
			address = got.Status.LoadBalancer.Ingress[0].IP
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		expectHello(ctx, "http://"+address+"/")
		timings.add("daily loop: LoadBalancer Service pending to reachable from the host", time.Since(start))

		By("deleting the Service removes its load balancer")
		Expect(wl.Delete(ctx, lb)).To(Succeed())
		Eventually(func(g Gomega) {
			lbs, err := nodes.ServiceLoadBalancers(ctx, c.key())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lbs).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
	})

	It("exports every node's logs", func(ctx SpecContext) {
		dir := filepath.Join(artifacts, "daily-loop-logs")
		Expect(os.RemoveAll(dir)).To(Succeed())
		dockyard(ctx, "export", "logs", dir, "--cluster", ref)
		for _, m := range append(machines(ctx, c, true), machines(ctx, c, false)...) {
			kubelet, err := os.ReadFile(filepath.Join(dir, nodeContainer(m), "kubelet.log"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(kubelet)).To(ContainSubstring("kubelet"), "the kubelet journal of %s", m.Name)
			images, err := os.ReadFile(filepath.Join(dir, nodeContainer(m), "images.txt"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(images)).To(ContainSubstring(appImage))
		}
	})

	It("deletes the cluster with dockyard delete cluster, leaving nothing on the engine", func(ctx SpecContext) {
		cli.deleteCluster(ctx, c)
		dockyard(ctx, "registry", "delete", "--name", registry)
		r, err := nodes.FindRegistry(ctx, registry)
		Expect(err).NotTo(HaveOccurred())
		Expect(r).To(BeNil())
	})

	AfterAll(func(ctx SpecContext) {
		cleanupCluster(ctx, c, c.namespace)
	}, NodeTimeout(10*time.Minute))
})

// freePort is a TCP port free on the host's 127.0.0.1 now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// engineImage reads an image from the engine.
func engineImage(ctx context.Context, ref string) v1.Image {
	stream, err := engine.SaveImages(ctx, []string{ref})
	Expect(err).NotTo(HaveOccurred())
	archive, err := io.ReadAll(stream)
	_ = stream.Close()
	Expect(err).NotTo(HaveOccurred())
	tag, err := name.NewTag(ref)
	Expect(err).NotTo(HaveOccurred())
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(archive)), nil }, &tag)
	Expect(err).NotTo(HaveOccurred())
	return img
}

// putImage loads an image into the engine under ref, as `docker build -t ref` would.
func putImage(ctx context.Context, ref string, img v1.Image) {
	tag, err := name.NewTag(ref)
	Expect(err).NotTo(HaveOccurred())
	var archive bytes.Buffer
	Expect(tarball.Write(tag, img, &archive)).To(Succeed())
	Expect(engine.LoadImages(ctx, &archive)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { _ = engine.RemoveImage(ctx, ref) })
}

// runPod runs a pod of image (on node, when set) that exits 0, and waits for it.
func runPod(ctx context.Context, wl client.Client, name, node, image string, pull corev1.PullPolicy) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "check", Image: image, ImagePullPolicy: pull, Command: []string{"true"},
		}}},
	}
	Expect(wl.Create(ctx, pod)).To(Succeed())
	Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(wl.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s: %s %+v", name, got.Status.Phase, got.Status.ContainerStatuses)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
}

// expectHello waits until url answers "hello".
func expectHello(ctx context.Context, url string) {
	Eventually(func(g Gomega) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		g.Expect(err).NotTo(HaveOccurred())
		res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		g.Expect(strings.TrimSpace(string(body))).To(Equal("hello"))
	}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "GET %s", url)
}
