//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiyaml "sigs.k8s.io/cluster-api/util/yaml"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/mgmt"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/envtest"
)

// Dockyard installed the way users install it: a management cluster in node containers
// (pkg/mgmt), the real `clusterctl init` with the release repository `make release-manifests`
// writes (every pod from images built on this machine), a workload cluster made by the
// manager running as a pod, and a self-hosted pivot into a workload cluster and back.
var _ = Describe("Installed with clusterctl in a management cluster of containers", Ordered, func() {
	const (
		mgmtName       = "dockyard-e2e-mgmt"
		managerSA      = "system:serviceaccount:dockyard-system:dockyard-manager"
		providerLabel  = "cluster.x-k8s.io/provider"
		installTimeout = 15 * time.Minute
	)
	var (
		config          = envOr("E2E_CLUSTERCTL_CONFIG", filepath.Join(envtest.RepoRoot(), "out", "clusterctl.yaml"))
		nodes           *docker.Manager
		images          []string
		mc              *mgmt.Cluster
		mgmtClient      client.Client
		mgmtKubeconfig  string
		imageVariables  map[string]string
		initVariables   map[string]string
		mgmtConnections = func(ctx context.Context) map[string]bool {
			c, err := engine.InspectContainer(ctx, mgmt.NodeName(mgmtName))
			Expect(err).NotTo(HaveOccurred())
			out := map[string]bool{}
			for n := range c.Networks {
				out[n] = true
			}
			return out
		}
	)

	BeforeAll(func(ctx SpecContext) {
		nodes = docker.NewManager(engine, docker.ManagerOptions{})
		var err error
		images, err = mgmt.ComponentImages(config)
		Expect(err).NotTo(HaveOccurred(), "make test-e2e writes the repository first (make release-manifests)")
		for _, img := range images {
			ok, err := engine.ImageExists(ctx, img)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue(), "image %s is missing: make component-images builds it", img)
		}
		Expect(mgmt.Delete(ctx, nodes, mgmtName)).To(Succeed(), "removing what an interrupted run left")
		DeferCleanup(func(ctx SpecContext) {
			sweepEngine(ctx, testNamespacePrefix+"-inst")
			Expect(mgmt.Delete(ctx, nodes, mgmtName)).To(Succeed())
		})

		By("making the management cluster: Kubernetes in one node container, component images preloaded")
		start := time.Now()
		mc, err = mgmt.Create(ctx, nodes, mgmt.Options{
			Name: mgmtName, NodeImage: nodeImageRepo + ":" + kubernetesVersion, KubernetesVersion: kubernetesVersion,
			Images: images, Logf: func(f string, a ...any) { fmt.Fprintf(GinkgoWriter, f+"\n", a...) },
		})
		Expect(err).NotTo(HaveOccurred())
		timings.add("installed: management cluster created (node Ready, CoreDNS Ready)", time.Since(start))
		mgmtKubeconfig = filepath.Join(artifacts, mgmtName+".kubeconfig")
		Expect(os.WriteFile(mgmtKubeconfig, mc.Kubeconfig, 0o600)).To(Succeed())
		mgmtClient = kubeClient(mc.Kubeconfig)
		imageVariables = map[string]string{
			"DOCKYARD_NODE_IMAGE":            nodeImageRepo + ":" + kubernetesVersion,
			"DOCKYARD_LB_IMAGE":              lbImage,
			"DOCKYARD_NODE_IMAGE_REPOSITORY": nodeImageRepo,
		}
		// The management clusters of the self-hosted pivot let workload nodes mount the engine's
		// socket, and nothing else of the host.
		initVariables = maps.Clone(imageVariables)
		initVariables["DOCKYARD_ALLOWED_HOST_PATHS"] = mgmt.DefaultEngineSocket
	}, NodeTimeout(20*time.Minute))

	AfterEach(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() && mc != nil {
			dumpManagementCluster(mc.Kubeconfig)
		}
	})

	It("installs cert-manager, Cluster API and Dockyard with clusterctl init: every pod Ready, webhooks served, the manager under its own RBAC", func(ctx SpecContext) {
		start := time.Now()
		clusterctl(ctx, initVariables, "init", "--infrastructure", "dockyard", "--config", config,
			"--kubeconfig", mgmtKubeconfig, "--wait-providers", "--wait-provider-timeout", "900")
		timings.add("installed: clusterctl init to every provider's pods Ready", time.Since(start))

		By("every pod of every provider runs, Ready, from the images built here")
		pods := &corev1.PodList{}
		Expect(mgmtClient.List(ctx, pods)).To(Succeed())
		namespaces := map[string]int{}
		for _, p := range pods.Items {
			if p.Namespace == "kube-system" || p.Namespace == "kube-flannel" {
				continue
			}
			namespaces[p.Namespace]++
			Expect(podIsReady(&p)).To(BeTrue(), "pod %s/%s is not Ready: %+v", p.Namespace, p.Name, p.Status.Conditions)
			for _, c := range p.Spec.Containers {
				Expect(images).To(ContainElement(c.Image), "pod %s/%s runs an image the repository does not name", p.Namespace, p.Name)
			}
		}
		Expect(namespaces).To(HaveKey("cert-manager"))
		Expect(namespaces).To(HaveKey("capi-system"))
		Expect(namespaces).To(HaveKey("capi-kubeadm-bootstrap-system"))
		Expect(namespaces).To(HaveKey("capi-kubeadm-control-plane-system"))
		Expect(namespaces).To(HaveKey("dockyard-system"))

		By("Dockyard's webhooks answer with a certificate cert-manager issued")
		webhooks := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		Expect(mgmtClient.List(ctx, webhooks, client.MatchingLabels{providerLabel: "infrastructure-dockyard"})).To(Succeed())
		Expect(webhooks.Items).NotTo(BeEmpty())
		for _, w := range webhooks.Items {
			Expect(w.Annotations).To(HaveKey("cert-manager.io/inject-ca-from"))
			for _, hook := range w.Webhooks {
				Expect(hook.ClientConfig.CABundle).NotTo(BeEmpty(), "cert-manager's cainjector left %s without a CA", hook.Name)
			}
		}
		bad := &infrav1.DockyardMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "too-quick"},
			Spec:       infrav1.DockyardMachineSpec{BootstrapTimeout: &metav1.Duration{Duration: time.Second}},
		}
		// The webhook's Service routes to the pod a few seconds after the pod is Ready.
		Eventually(func() error { return mgmtClient.Create(ctx, bad.DeepCopy(), client.DryRunAll) }).
			WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).
			Should(MatchError(ContainSubstring("must be at least 30s")), "the validating webhook must reject it")
		err := mgmtClient.Create(ctx, bad, client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("admission webhook")))

		By("the manager's policy: the engine's socket may be mounted, the host's root may not")
		socket := &infrav1.DockyardMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mounts"},
			Spec: infrav1.DockyardMachineSpec{ExtraMounts: []infrav1.Mount{
				{HostPath: mgmt.DefaultEngineSocket, ContainerPath: mgmt.DefaultEngineSocket},
			}},
		}
		Expect(mgmtClient.Create(ctx, socket.DeepCopy(), client.DryRunAll)).To(Succeed())
		root := socket.DeepCopy()
		root.Spec.ExtraMounts[0].HostPath = "/tmp/.."
		Expect(mgmtClient.Create(ctx, root, client.DryRunAll)).To(MatchError(And(
			ContainSubstring("spec.extraMounts[0].hostPath"), ContainSubstring("--allowed-host-paths"))))

		By("the manager runs under its own ServiceAccount with the generated RBAC, never cluster-admin")
		deploy := &appsv1.Deployment{}
		Expect(mgmtClient.Get(ctx, client.ObjectKey{Namespace: "dockyard-system", Name: "dockyard-controller-manager"}, deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.ServiceAccountName).To(Equal("dockyard-manager"))
		bindings := &rbacv1.ClusterRoleBindingList{}
		Expect(mgmtClient.List(ctx, bindings)).To(Succeed())
		for _, b := range bindings.Items {
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "dockyard-system" && s.Name == "dockyard-manager" {
					Expect(b.RoleRef.Name).NotTo(Equal("cluster-admin"), "ClusterRoleBinding %s", b.Name)
				}
			}
		}
		rules := effectiveRules(ctx, mc.Kubeconfig, managerSA, "dockyard-system")
		fmt.Fprintf(GinkgoWriter, "Effective permissions of %s in dockyard-system:\n  %s\n", managerSA, strings.Join(rules, "\n  "))
		Expect(rules).NotTo(ContainElement(HavePrefix("*/* ")), "the manager may do anything to anything")
		for _, r := range rules {
			Expect(r).NotTo(MatchRegexp(`\b(escalate|bind|impersonate)\b`), "rule %q", r)
		}
	})

	It("creates a workload cluster from the default flavor with the in-cluster manager: Nodes and CoreDNS Ready, then deletes it without a trace", func(ctx SpecContext) {
		c := clusterSpec{name: "inst-default", namespace: testNamespacePrefix + "-inst-default", controlPlane: 1, workers: 1, mgmt: mgmtClient}
		objs := generateCluster(ctx, c, config, mgmtKubeconfig, imageVariables)
		start := time.Now()
		createObjects(ctx, mgmtClient, c.namespace, objs)
		verifyRunningWith(ctx, mgmtClient, c, 1, 1)
		timings.add("installed: 1+1 cluster by the in-cluster manager, objects created to Nodes Ready", time.Since(start))
		wl, _ := workloadClient(ctx, c)
		expectCoreDNSReady(ctx, wl)

		By("the management node joined the cluster's network, so the controllers in pods reach its endpoint")
		Expect(mgmtConnections(ctx)).To(HaveKey(docker.DefaultNetworkName(c.key())))

		start = time.Now()
		deleteWith(ctx, mgmtClient, c)
		timings.add("installed: 1+1 cluster deleted, nothing left on the engine", time.Since(start))
		Expect(mgmtConnections(ctx)).NotTo(HaveKey(docker.DefaultNetworkName(c.key())))
	})

	It("pivots: clusterctl init and move into a workload cluster, which scales its own workers, then moves back and is deleted", func(ctx SpecContext) {
		c := clusterSpec{name: "inst-pivot", namespace: testNamespacePrefix + "-inst-pivot", controlPlane: 1, workers: 1, mgmt: mgmtClient}
		objs := generateCluster(ctx, c, config, mgmtKubeconfig, imageVariables)
		// To host the providers the nodes need their images (no registry) and the engine.
		for i := range objs {
			if objs[i].GetKind() != "DockyardMachineTemplate" {
				continue
			}
			Expect(unstructured.SetNestedStringSlice(objs[i].Object, images, "spec", "template", "spec", "preLoadImages")).To(Succeed())
			Expect(unstructured.SetNestedSlice(objs[i].Object, []any{map[string]any{
				"hostPath": mgmt.DefaultEngineSocket, "containerPath": mgmt.DefaultEngineSocket,
			}}, "spec", "template", "spec", "extraMounts")).To(Succeed())
		}
		start := time.Now()
		createObjects(ctx, mgmtClient, c.namespace, objs)
		verifyRunningWith(ctx, mgmtClient, c, 1, 1)
		timings.add("pivot: 1+1 cluster with the component images preloaded, to Nodes Ready", time.Since(start))
		wl, wlKubeconfigData := workloadClient(ctx, c)
		wlKubeconfig := filepath.Join(artifacts, c.name+".kubeconfig")
		Expect(os.WriteFile(wlKubeconfig, wlKubeconfigData, 0o600)).To(Succeed())
		before := containerIDs(ctx, c)

		By("clusterctl init into the workload cluster")
		start = time.Now()
		clusterctl(ctx, initVariables, "init", "--infrastructure", "dockyard", "--config", config,
			"--kubeconfig", wlKubeconfig, "--wait-providers", "--wait-provider-timeout", "900")
		timings.add("pivot: clusterctl init into the workload cluster", time.Since(start))

		By("clusterctl move into it")
		start = time.Now()
		clusterctl(ctx, nil, "move", "--kubeconfig", mgmtKubeconfig, "--to-kubeconfig", wlKubeconfig, "--namespace", c.namespace)
		self := c
		self.mgmt = wl
		verifyRunningWith(ctx, wl, self, 1, 1)
		timings.add("pivot: clusterctl move in, to the cluster Running on itself", time.Since(start))
		Expect(containerIDs(ctx, c)).To(Equal(before), "moving must not replace node containers")

		By("the self-hosted cluster scales its own workers 1 → 2 → 1")
		start = time.Now()
		scaleWorkers(ctx, wl, c, 2)
		verifyRunningWith(ctx, wl, self, 1, 2)
		scaleWorkers(ctx, wl, c, 1)
		verifyRunningWith(ctx, wl, self, 1, 1)
		Eventually(func() map[string]string { return containerIDs(ctx, c) }).WithContext(ctx).
			WithTimeout(3*time.Minute).WithPolling(poll).Should(Equal(before), "the original node containers stay, the added one goes")
		timings.add("pivot: self-hosted scale 1 → 2 → 1 workers", time.Since(start))

		By("clusterctl move back, then delete from the management cluster")
		start = time.Now()
		clusterctl(ctx, nil, "move", "--kubeconfig", wlKubeconfig, "--to-kubeconfig", mgmtKubeconfig, "--namespace", c.namespace)
		verifyRunningWith(ctx, mgmtClient, c, 1, 1)
		timings.add("pivot: clusterctl move back", time.Since(start))
		Expect(containerIDs(ctx, c)).To(Equal(before))
		start = time.Now()
		deleteWith(ctx, mgmtClient, c)
		timings.add("pivot: cluster deleted, nothing left on the engine", time.Since(start))
	})
})

// kubeClient is a client of a cluster for a kubeconfig.
func kubeClient(kubeconfig []byte) client.Client {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.Timeout = 20 * time.Second
	cl, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// generateCluster renders the repository's default flavor with `clusterctl generate cluster`,
// setting only the image variables.
func generateCluster(ctx context.Context, c clusterSpec, config, kubeconfig string, vars map[string]string) []unstructured.Unstructured {
	out := clusterctl(ctx, vars, "generate", "cluster", c.name, "--config", config, "--kubeconfig", kubeconfig,
		"--infrastructure", "dockyard", "--target-namespace", c.namespace, "--kubernetes-version", kubernetesVersion,
		"--control-plane-machine-count", fmt.Sprint(c.controlPlane), "--worker-machine-count", fmt.Sprint(c.workers))
	objs, err := capiyaml.ToUnstructured([]byte(out))
	Expect(err).NotTo(HaveOccurred())
	return objs
}

// containerIDs maps the cluster's node containers (not its load balancer) to their IDs.
func containerIDs(ctx context.Context, c clusterSpec) map[string]string {
	out := map[string]string{}
	for name, ct := range clusterContainers(ctx, c) {
		if ct.Labels[docker.KindRoleLabel] != string(docker.RoleLoadBalancer) {
			out[name] = ct.ID
		}
	}
	return out
}

// scaleWorkers sets the replicas of the cluster's MachineDeployment; scaling down removes the
// newest machines first, so the containers made before a move stay.
func scaleWorkers(ctx context.Context, cl client.Client, c clusterSpec, replicas int32) {
	md := &clusterv1.MachineDeployment{}
	Expect(cl.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name + "-md-0"}, md)).To(Succeed())
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To(replicas)
	md.Spec.Deletion.Order = clusterv1.NewestMachineSetDeletionOrder
	Expect(cl.Patch(ctx, md, patch)).To(Succeed())
}

func expectCoreDNSReady(ctx context.Context, wl client.Client) {
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(wl.List(ctx, pods, client.InNamespace("kube-system"), client.MatchingLabels{"k8s-app": "kube-dns"})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		for _, p := range pods.Items {
			g.Expect(podIsReady(&p)).To(BeTrue(), "CoreDNS pod %s", p.Name)
		}
	}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(poll).Should(Succeed())
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// effectiveRules lists what a user may do in a namespace (cluster-wide rules included), as
// "<groups>/<resources> <verbs>" lines, from a SelfSubjectRulesReview made as that user.
func effectiveRules(ctx context.Context, kubeconfig []byte, user, namespace string) []string {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.Impersonate.UserName = user
	cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:dockyard-system", "system:authenticated"}
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: namespace},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	var rules []string
	for _, r := range review.Status.ResourceRules {
		groups := strings.Join(r.APIGroups, ",")
		if groups == "" {
			groups = "core"
		}
		sort.Strings(r.Verbs)
		rules = append(rules, fmt.Sprintf("%s/%s %s", groups, strings.Join(r.Resources, ","), strings.Join(r.Verbs, ",")))
	}
	sort.Strings(rules)
	return rules
}

// dumpManagementCluster prints what a person needs when a spec on the management cluster
// fails: every pod, recent events and the providers' logs.
func dumpManagementCluster(kubeconfig []byte) {
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"get", "clusters,machines,dockyardmachines,kubeadmcontrolplanes", "-A", "-o", "wide"},
		{"-n", "dockyard-system", "logs", "deploy/dockyard-controller-manager", "--tail=200"},
		{"-n", "capi-system", "logs", "deploy/capi-controller-manager", "--tail=100"},
		{"-n", "capi-kubeadm-control-plane-system", "logs", "deploy/capi-kubeadm-control-plane-controller-manager", "--tail=100"},
		{"-n", "cert-manager", "logs", "deploy/cert-manager", "--tail=50"},
	} {
		out, err := kubectl(kubeconfig, args...)
		fmt.Fprintf(GinkgoWriter, "\n===== kubectl %s (%v)\n%s\n", strings.Join(args, " "), err, tailLines(out, 200))
	}
}
