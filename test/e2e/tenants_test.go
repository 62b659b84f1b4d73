//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
	dyscheme "github.com/dockyard-dev/dockyard/pkg/scheme"
)

// maxServiceLoadBalancers is the suite manager's --max-service-load-balancers-per-cluster: low,
// so the bound is reached with a handful of Services (the default is 20).
const maxServiceLoadBalancers = 5

// idleWindow is how long an idle cluster is watched for commands run in its nodes: longer than
// the machines' health poll (a minute), so each machine's periodic reconcile falls in it. Before
// nodes were quiet, a minute held about 10 commands in each node (docs/performance.md).
const idleWindow = 90 * time.Second

// Two teams share the suite's management cluster, each a namespace whose ServiceAccount holds
// only Cluster API's and Dockyard's rights there. Everything one team could ask of Dockyard to
// reach outside its namespace (another team's or the manager's images, host ports and
// addresses, the host's network, the management cluster's Service range, another team's
// registry, unbounded Service load balancers) is tried as that team and refused with the field
// named, while the other team's cluster, images and registry are left as they were. Team A's
// cluster, idle meanwhile, runs no command in its nodes; its logs, collected last (collecting
// runs commands in the nodes), are safe to hand over.
var _ = Describe("Two teams on one management cluster", Ordered, func() {
	teamA := clusterSpec{name: "team-a", namespace: testNamespacePrefix + "-team-a", controlPlane: 1, workers: 1}
	teamB := clusterSpec{name: "team-b", namespace: testNamespacePrefix + "-team-b", controlPlane: 1, workers: 0}
	imageA := "localhost/" + teamA.namespace + "/app:dev"
	imageB := "localhost/" + teamB.namespace + "/app:dev"
	registryB := teamB.namespace + "-registry"
	var (
		registryHostB string
		idleSince     time.Time
		machinesB     map[string]string // Machine name → UID
	)

	BeforeAll(func(ctx SpecContext) {
		DeferCleanup(func(ctx SpecContext) {
			for _, c := range []clusterSpec{teamA, teamB} {
				cleanupCluster(ctx, c, testNamespacePrefix+"-team-")
			}
			_, _ = nodes.DeleteRegistry(ctx, registryB, false)
		}, NodeTimeout(10*time.Minute))

		By("two namespaces, each with a ServiceAccount holding Cluster API's and Dockyard's rights there only")
		teamA.mgmt = tenantClient(ctx, teamA.namespace)
		teamB.mgmt = tenantClient(ctx, teamB.namespace)

		By("team B's local registry, serving team B only, with an image pushed to it")
		img := engineImage(ctx, lbImage)
		reg, err := nodes.CreateRegistry(ctx, docker.RegistrySpec{
			Name: registryB, Image: imagebuild.RegistryImageName(imagebuild.DefaultDistributionVersion),
			HostPort: freePort(), Namespaces: []string{teamB.namespace},
		})
		Expect(err).NotTo(HaveOccurred())
		registryHostB = reg.Host()
		pushed, err := name.ParseReference(registryHostB+"/team-b/app:v1", name.Insecure)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error { return remote.Write(pushed, img, remote.WithContext(ctx)) }).
			WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())

		By("each team's own image on the engine")
		putImage(ctx, imageA, img)
		putImage(ctx, imageB, img)

		By("both clusters, created by their teams: team B's on its registry and with its image")
		start := time.Now()
		createClusterWith(ctx, teamA, nil)
		createClusterWith(ctx, teamB, map[string]string{"DOCKYARD_REGISTRY": registryB})
		setLoadImages(ctx, teamB, imageB)
		setLoadImages(ctx, teamA, imageA)
		waitMachinesRunning(ctx, teamA, 1, 1)
		waitMachinesRunning(ctx, teamB, 1, 0)
		whenDone("two teams: a 1+1 and a 1+0 cluster created by their own ServiceAccounts, Ready", start)
		// What settles after Ready (the Nodes' providerIDs, the images loaded) is done once
		// every DockyardMachine says it holds its images.
		Eventually(func(g Gomega) {
			for _, dm := range dockyardMachines(ctx, teamA) {
				g.Expect(dm.Status.LoadedImages).To(ContainElement(imageA), "DockyardMachine %s", dm.Name)
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
		idleSince = time.Now()
		machinesB = map[string]string{}
		for _, m := range append(machines(ctx, teamB, true), machines(ctx, teamB, false)...) {
			machinesB[m.Name] = string(m.UID)
		}
	}, NodeTimeout(25*time.Minute))

	It("refuses, as team A, everything that reaches outside its namespace, naming the field", func(ctx SpecContext) {
		a := teamA.client()
		dc := &infrav1.DockyardCluster{}
		Expect(a.Get(ctx, client.ObjectKey{Namespace: teamA.namespace, Name: teamA.name}, dc)).To(Succeed())
		refused := func(err error, fields ...string) {
			GinkgoHelper()
			Expect(err).To(HaveOccurred(), "admitted: %v", fields)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "not refused as invalid: %v", err)
			for _, f := range fields {
				Expect(err.Error()).To(ContainSubstring(f))
			}
		}
		patchCluster := func(mutate func(*infrav1.DockyardCluster)) error {
			current := &infrav1.DockyardCluster{}
			Expect(a.Get(ctx, client.ObjectKeyFromObject(dc), current)).To(Succeed())
			original := current.DeepCopy()
			mutate(current)
			return a.Patch(ctx, current, client.MergeFrom(original))
		}

		By("another team's image, cert-manager's and the manager's own, into team A's nodes")
		refused(patchCluster(func(c *infrav1.DockyardCluster) {
			c.Spec.LoadImages = append(c.Spec.LoadImages, "quay.io/jetstack/cert-manager-controller:v1.11.5", "localhost/dockyard/manager:v0.1.0", imageB)
		}), "spec.loadImages[1]", "spec.loadImages[2]", "spec.loadImages[3]", "--allowed-load-image-repositories")

		By("a local registry that serves team B")
		refused(patchCluster(func(c *infrav1.DockyardCluster) { c.Spec.Registry = registryB }), "spec.registry", teamB.namespace)

		By("the host's network, the engine's bridge, the management cluster's Service range, link-local")
		serviceRange := managementServiceRange(ctx)
		for _, tc := range []struct {
			network infrav1.NetworkSpec
			fields  []string
		}{
			{infrav1.NetworkSpec{Existing: infrav1.ExistingNetworkSpec{Name: "host"}}, []string{"spec.network.existing.name", "--allowed-networks"}},
			{infrav1.NetworkSpec{Name: "bridge"}, []string{"spec.network.name"}},
			{infrav1.NetworkSpec{Subnets: []string{serviceRange}}, []string{"spec.network.subnets[0]", "in use"}},
			{infrav1.NetworkSpec{Subnets: []string{"169.254.10.0/24"}}, []string{"spec.network.subnets[0]", "link-local"}},
		} {
			other := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "escape-", Namespace: teamA.namespace},
				Spec: infrav1.DockyardClusterSpec{Network: tc.network}}
			refused(a.Create(ctx, other), tc.fields...)
		}

		By("a kubelet on every host interface, a host port below 1024, etcd on ::, for machines and pools")
		for _, tc := range []struct {
			port   infrav1.PortMapping
			fields []string
		}{
			{infrav1.PortMapping{ContainerPort: 10250, HostPort: 10250, ListenAddress: "0.0.0.0"}, []string{"listenAddress", "--allowed-listen-addresses"}},
			{infrav1.PortMapping{ContainerPort: 10250, HostPort: 80}, []string{"hostPort", "--min-host-port"}},
			{infrav1.PortMapping{ContainerPort: 2379, ListenAddress: "::"}, []string{"listenAddress", "--allowed-listen-addresses"}},
		} {
			spec := infrav1.DockyardMachineSpec{Ports: []infrav1.PortMapping{tc.port}}
			refused(a.Create(ctx, &infrav1.DockyardMachineTemplate{ObjectMeta: metav1.ObjectMeta{GenerateName: "escape-", Namespace: teamA.namespace},
				Spec: infrav1.DockyardMachineTemplateSpec{Template: infrav1.DockyardMachineTemplateResource{Spec: spec}}}),
				append(tc.fields, "spec.template.spec.ports[0]")...)
			refused(a.Create(ctx, &infrav1.DockyardMachinePool{ObjectMeta: metav1.ObjectMeta{GenerateName: "escape-", Namespace: teamA.namespace},
				Spec: infrav1.DockyardMachinePoolSpec{Template: spec}}),
				append(tc.fields, "spec.template.ports[0]")...)
		}
		By("a pool whose nodes would run another image and preload the manager's")
		refused(a.Create(ctx, &infrav1.DockyardMachinePool{ObjectMeta: metav1.ObjectMeta{GenerateName: "escape-", Namespace: teamA.namespace},
			Spec: infrav1.DockyardMachinePoolSpec{Template: infrav1.DockyardMachineSpec{Image: "alpine:3", PreLoadImages: []string{"localhost/dockyard/manager:v0.1.0"}}}}),
			"spec.template.image", "spec.template.preLoadImages[0]")

		By("nothing of it reached team A's cluster or the engine")
		Expect(a.Get(ctx, client.ObjectKeyFromObject(dc), dc)).To(Succeed())
		Expect(dc.Spec.LoadImages).To(Equal([]string{imageA}))
		Expect(dc.Spec.Registry).To(BeEmpty())
		reg, err := nodes.FindRegistry(ctx, registryB)
		Expect(err).NotTo(HaveOccurred())
		Expect(reg.Address(docker.DefaultNetworkName(teamA.key()))).To(BeEmpty(), "team B's registry was attached to team A's network")
	})

	It("bounds team A's Service load balancers, with an Event on the Services it does not serve", func(ctx SpecContext) {
		wl, _ := workloadClient(ctx, teamA)
		const services = maxServiceLoadBalancers + 2
		for i := range services {
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%d", i), Namespace: "default"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "none"},
					Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
			}
			Expect(wl.Create(ctx, svc)).To(Succeed())
			time.Sleep(1100 * time.Millisecond) // distinct creation times: the oldest are served first
		}
		served := func(g Gomega) []string {
			list := &corev1.ServiceList{}
			g.Expect(wl.List(ctx, list, client.InNamespace("default"))).To(Succeed())
			var out []string
			for _, s := range list.Items {
				if len(s.Status.LoadBalancer.Ingress) > 0 {
					out = append(out, s.Name)
				}
			}
			sort.Strings(out)
			return out
		}
		Eventually(func(g Gomega) {
			lbs, err := nodes.ServiceLoadBalancers(ctx, teamA.key())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lbs).To(HaveLen(maxServiceLoadBalancers))
			g.Expect(served(g)).To(Equal([]string{"lb-0", "lb-1", "lb-2", "lb-3", "lb-4"}))
			for _, svc := range []string{"lb-5", "lb-6"} {
				events := &corev1.EventList{}
				g.Expect(wl.List(ctx, events, client.InNamespace("default"))).To(Succeed())
				found := false
				for _, e := range events.Items {
					if e.InvolvedObject.Name == svc && e.Reason == "ServiceLoadBalancerLimit" {
						found = strings.Contains(e.Message, "--max-service-load-balancers-per-cluster")
					}
				}
				g.Expect(found).To(BeTrue(), "no ServiceLoadBalancerLimit Event naming the flag on Service %s", svc)
			}
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())

		By("deleting a served Service lets the oldest waiting one in")
		Expect(wl.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb-0", Namespace: "default"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(served(g)).To(Equal([]string{"lb-1", "lb-2", "lb-3", "lb-4", "lb-5"}))
			lbs, err := nodes.ServiceLoadBalancers(ctx, teamA.key())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(lbs).To(HaveLen(maxServiceLoadBalancers))
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
	})

	It("leaves team B's cluster, images and registry as they were", func(ctx SpecContext) {
		now := map[string]string{}
		for _, m := range append(machines(ctx, teamB, true), machines(ctx, teamB, false)...) {
			now[m.Name] = string(m.UID)
		}
		Expect(now).To(Equal(machinesB), "team B's Machines changed")
		waitMachinesRunning(ctx, teamB, 1, 0)
		for _, n := range clusterNodes(ctx, teamB) {
			images, _ := execInNode(ctx, n, "ctr", "--namespace", "k8s.io", "images", "list", "-q")
			Expect(images).To(ContainSubstring(imageB))
			Expect(images).NotTo(ContainSubstring(imageA))
		}
		pushed, err := name.ParseReference(registryHostB+"/team-b/app:v1", name.Insecure)
		Expect(err).NotTo(HaveOccurred())
		_, err = remote.Head(pushed, remote.WithContext(ctx))
		Expect(err).NotTo(HaveOccurred(), "team B's image is gone from its registry")
		reg, err := nodes.FindRegistry(ctx, registryB)
		Expect(err).NotTo(HaveOccurred())
		Expect(reg.Namespaces()).To(Equal([]string{teamB.namespace}))
	})

	It("ran no command in team A's idle nodes for a minute and a half", func(ctx SpecContext) {
		if wait := time.Until(idleSince.Add(idleWindow)); wait > 0 {
			By(fmt.Sprintf("waiting %s more for the idle window to end", wait.Round(time.Second)))
			time.Sleep(wait)
		}
		until := time.Now()
		for _, n := range clusterNodes(ctx, teamA) {
			execs := execsInto(ctx, n, idleSince, until)
			Expect(execs).To(BeZero(), "node %s: %d commands run in it from %s to %s", n, execs, idleSince.Format(time.TimeOnly), until.Format(time.TimeOnly))
		}
		timings.add(fmt.Sprintf("two teams: idle 1+1 watched for %s, commands run in its nodes: 0", until.Sub(idleSince).Round(time.Second)), until.Sub(idleSince))
	})

	It("writes team A's logs 0700/0600 with no bootstrap token in them", func(ctx SpecContext) {
		token := bootstrapToken(ctx, teamA)
		dir := filepath.Join(GinkgoT().TempDir(), "logs")
		logs, err := logdir.Open(dir, false)
		Expect(err).NotTo(HaveOccurred())
		defer logs.Close()
		list, err := nodes.Nodes(ctx, teamA.key(), "")
		Expect(err).NotTo(HaveOccurred())
		for _, n := range list {
			sub, err := logs.Dir(n.Name)
			Expect(err).NotTo(HaveOccurred())
			Expect(n.CollectLogs(ctx, sub)).To(Succeed())
		}
		files := 0
		Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if d.IsDir() {
				Expect(info.Mode().Perm()).To(Equal(fs.FileMode(0o700)), "directory %s", path)
				return nil
			}
			files++
			Expect(info.Mode().Perm()).To(Equal(fs.FileMode(0o600)), "file %s", path)
			data, err := os.ReadFile(path)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(data)).NotTo(ContainSubstring(token), "file %s holds the cluster's bootstrap token", path)
			return nil
		})).To(Succeed())
		Expect(files).To(BeNumerically(">", 20))
	})
})

// tenantClient makes namespace, a ServiceAccount "tenant" in it bound to a Role with every
// right on Cluster API's and Dockyard's kinds there (and reading its Secrets: the clusters'
// kubeconfigs), and returns a client acting as that ServiceAccount.
func tenantClient(ctx context.Context, namespace string) client.Client {
	admin := plane.Client()
	Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: namespace}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: namespace}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{clusterv1.GroupVersion.Group, "controlplane.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", infrav1.GroupVersion.Group},
			Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "tenant", Namespace: namespace}}}
	for _, o := range []client.Object{sa, role, binding} {
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, o))).To(Succeed())
	}
	cfg := rest.CopyConfig(plane.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":tenant",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	c, err := client.New(cfg, client.Options{Scheme: dyscheme.New()})
	Expect(err).NotTo(HaveOccurred())
	// What the tenant may not do, it may not: a Secret of the management cluster's own.
	err = c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "anything"}, &corev1.Secret{})
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the tenant reads kube-system's Secrets: %v", err)
	return c
}

// setLoadImages sets a cluster's spec.loadImages, as its team.
func setLoadImages(ctx context.Context, c clusterSpec, images ...string) {
	Eventually(func() error {
		dc := &infrav1.DockyardCluster{}
		if err := c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc); err != nil {
			return err
		}
		original := dc.DeepCopy()
		dc.Spec.LoadImages = images
		return c.client().Patch(ctx, dc, client.MergeFrom(original))
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
}

func dockyardMachines(ctx context.Context, c clusterSpec) []infrav1.DockyardMachine {
	list := &infrav1.DockyardMachineList{}
	Expect(c.client().List(ctx, list, client.InNamespace(c.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.name})).To(Succeed())
	return list.Items
}

// clusterNodes names the node containers of a cluster.
func clusterNodes(ctx context.Context, c clusterSpec) []string {
	list, err := nodes.Nodes(ctx, c.key(), "")
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, n := range list {
		out = append(out, n.Name)
	}
	Expect(out).NotTo(BeEmpty())
	return out
}

// managementServiceRange is the suite's management cluster's Service range, from its
// ServiceCIDRs.
func managementServiceRange(ctx context.Context) string {
	list := &networkingv1.ServiceCIDRList{}
	Expect(plane.Client().List(ctx, list)).To(Succeed())
	Expect(list.Items).NotTo(BeEmpty())
	Expect(list.Items[0].Spec.CIDRs).NotTo(BeEmpty())
	return list.Items[0].Spec.CIDRs[0]
}

// bootstrapTokenPattern is a kubeadm bootstrap token.
var bootstrapTokenPattern = regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`)

// bootstrapToken is the join token in the bootstrap data of a cluster's worker.
func bootstrapToken(ctx context.Context, c clusterSpec) string {
	for _, m := range machines(ctx, c, false) {
		secret := &corev1.Secret{}
		Expect(c.client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: *m.Spec.Bootstrap.DataSecretName}, secret)).To(Succeed())
		if token := bootstrapTokenPattern.FindString(string(secret.Data["value"])); token != "" {
			Expect(bootstrap.Redact(token)).NotTo(Equal(token), "the token pattern of this test is not one Redact knows")
			return token
		}
	}
	Fail("no worker's bootstrap data holds a token")
	return ""
}

// execsInto counts the commands the engine ran in a container from since to until, from the
// engine's events (Docker's exec_start).
func execsInto(ctx context.Context, container string, since, until time.Time) int {
	cmd := exec.CommandContext(ctx, "docker", "events", "--since", since.Format(time.RFC3339Nano), "--until", until.Format(time.RFC3339Nano),
		"--filter", "type=container", "--filter", "event=exec_start", "--filter", "container="+container, "--format", "{{.Action}}")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "docker events: %s", out)
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "exec_start") {
			fmt.Fprintf(GinkgoWriter, "%s: %s\n", container, line)
			n++
		}
	}
	return n
}
