//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// What only Dockyard has to prove about the management cluster the suite installed with
// clusterctl init: everything runs from the images built locally (make component-images), Dockyard's webhooks are served
// with cert-manager's certificate and enforce the manager's policy, and the manager runs under
// its own least-privilege RBAC.
var _ = Describe("Dockyard installed by clusterctl init", blocking, func() {
	It("runs every provider's pods Ready from locally built images, serves its webhooks and keeps to its own RBAC", func(ctx SpecContext) {
		c := bootstrapClusterProxy.GetClient()
		var images []string
		for _, img := range e2eConfig.Images {
			images = append(images, img.Name)
		}

		By("every pod of every provider runs, Ready, from the images the e2e config loads")
		pods := &corev1.PodList{}
		Expect(c.List(ctx, pods)).To(Succeed())
		namespaces := map[string]int{}
		for _, p := range pods.Items {
			if p.Namespace == "kube-system" || p.Namespace == "kube-flannel" {
				continue
			}
			namespaces[p.Namespace]++
			Expect(podReady(&p)).To(BeTrue(), "pod %s/%s is not Ready: %+v", p.Namespace, p.Name, p.Status.Conditions)
			for _, ct := range p.Spec.Containers {
				Expect(images).To(ContainElement(ct.Image), "pod %s/%s runs an image the e2e config does not name", p.Namespace, p.Name)
			}
		}
		Expect(namespaces).To(HaveKey("cert-manager"))
		Expect(namespaces).To(HaveKey("capi-system"))
		Expect(namespaces).To(HaveKey("capi-kubeadm-bootstrap-system"))
		Expect(namespaces).To(HaveKey("capi-kubeadm-control-plane-system"))
		Expect(namespaces).To(HaveKey("dockyard-system"))

		By("Dockyard's webhooks answer with a certificate cert-manager issued")
		webhooks := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		Expect(c.List(ctx, webhooks, client.MatchingLabels{"cluster.x-k8s.io/provider": "infrastructure-dockyard"})).To(Succeed())
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
		Eventually(func() error { return c.Create(ctx, bad.DeepCopy(), client.DryRunAll) }).
			WithContext(ctx).WithTimeout(time.Minute).WithPolling(2 * time.Second).
			Should(MatchError(And(ContainSubstring("admission webhook"), ContainSubstring("must be at least 30s"))))

		By("the manager's policy: the engine's socket may be mounted (DOCKYARD_ALLOWED_HOST_PATHS), the host's root may not")
		socket := &infrav1.DockyardMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "mounts"},
			Spec: infrav1.DockyardMachineSpec{ExtraMounts: []infrav1.Mount{
				{HostPath: "/var/run/docker.sock", ContainerPath: "/var/run/docker.sock"},
			}},
		}
		Expect(c.Create(ctx, socket.DeepCopy(), client.DryRunAll)).To(Succeed())
		root := socket.DeepCopy()
		root.Spec.ExtraMounts[0].HostPath = "/tmp/.."
		Expect(c.Create(ctx, root, client.DryRunAll)).To(MatchError(And(
			ContainSubstring("spec.extraMounts[0].hostPath"), ContainSubstring("DOCKYARD_ALLOWED_HOST_PATHS"))))

		By("every controller of the management cluster keeps its lease through a minute of slow renewals (a loaded host must not restart them)")
		Eventually(func(g Gomega) {
			leases := &coordinationv1.LeaseList{}
			g.Expect(c.List(ctx, leases)).To(Succeed())
			held := 0
			for _, l := range leases.Items {
				if l.Namespace == corev1.NamespaceNodeLease || l.Labels["apiserver.kubernetes.io/identity"] != "" {
					continue // kubelets' heartbeats and API servers' identities, not leaders
				}
				held++
				g.Expect(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)).To(BeNumerically(">=", 60),
					"Lease %s/%s held by %q", l.Namespace, l.Name, ptr.Deref(l.Spec.HolderIdentity, ""))
			}
			// The controller manager, the scheduler, cert-manager's controller and cainjector,
			// Cluster API's three managers and Dockyard's.
			g.Expect(held).To(BeNumerically(">=", 8), "leader leases in the management cluster")
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(3 * time.Second).Should(Succeed())

		By("the manager runs under its own ServiceAccount with the generated RBAC, never cluster-admin")
		deploy := &appsv1.Deployment{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: "dockyard-system", Name: "dockyard-controller-manager"}, deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.ServiceAccountName).To(Equal("dockyard-manager"))
		bindings := &rbacv1.ClusterRoleBindingList{}
		Expect(c.List(ctx, bindings)).To(Succeed())
		for _, b := range bindings.Items {
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "dockyard-system" && s.Name == "dockyard-manager" {
					Expect(b.RoleRef.Name).NotTo(Equal("cluster-admin"), "ClusterRoleBinding %s", b.Name)
				}
			}
		}
		rules := effectiveRules(ctx, bootstrapClusterProxy.GetRESTConfig(), "system:serviceaccount:dockyard-system:dockyard-manager", "dockyard-system")
		fmt.Fprintf(GinkgoWriter, "Effective permissions of Dockyard's manager in dockyard-system:\n  %s\n", strings.Join(rules, "\n  "))
		Expect(rules).NotTo(ContainElement(HavePrefix("*/* ")), "the manager may do anything to anything")
		for _, r := range rules {
			Expect(r).NotTo(MatchRegexp(`\b(escalate|bind|impersonate)\b`), "rule %q", r)
		}
	})
})

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// effectiveRules lists what a user may do in a namespace (cluster-wide rules included), as
// "<groups>/<resources> <verbs>" lines, from a SelfSubjectRulesReview made as that user.
func effectiveRules(ctx context.Context, admin *rest.Config, user, namespace string) []string {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate.UserName = user
	cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
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
