//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/test/framework"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// Two teams, each with its own management namespace, run nodes as Pods of one infrastructure
// cluster (the management cluster, whose CNI enforces NetworkPolicies: make
// test-e2e-kubernetes makes it with kube-router's firewall). Team A's namespace is placed by
// its administrator (a node selector and a runtime class, config/infrastructure/
// placement_policy.yaml applied). Team A's nodes reach their own control plane and nothing of
// team B's; team A cannot make a Pod outside its placement; and a cluster of team A aimed at
// team B's namespace with a kubeconfig is refused without touching team B's objects.
var _ = Describe("Two teams on one infrastructure cluster", kubernetesInfra, func() {
	It("keeps their nodes, state and objects apart", func(specCtx SpecContext) {
		infra := infrastructure()
		c := infra.GetClient()
		suffix := rand.String(5)
		teamA, teamB := "team-a-"+suffix, "team-b-"+suffix
		runtimeClass := "dockyard-e2e-" + suffix
		for _, ns := range []string{teamA, teamB} {
			framework.CreateNamespace(specCtx, framework.CreateNamespaceInput{Creator: c, Name: ns})
		}
		policy := applyPlacementPolicy(specCtx, c)
		Expect(c.Create(specCtx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: runtimeClass}, Handler: "runc"})).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			if skipCleanup {
				return
			}
			for _, ns := range []string{teamA, teamB} {
				framework.DeleteAllClustersAndWait(ctx, framework.DeleteAllClustersAndWaitInput{ClusterProxy: infra, ClusterctlConfigPath: clusterctlConfigPath, Namespace: ns},
					e2eConfig.GetIntervals("default", "wait-delete-cluster")...)
			}
			By("Checking that neither team left anything in the infrastructure cluster")
			for _, ns := range []string{teamA, teamB} {
				expectNothingLeft(ctx, c, ns)
				framework.DeleteNamespace(ctx, framework.DeleteNamespaceInput{Deleter: c, Name: ns})
			}
			for _, o := range append(policy, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: runtimeClass}}) {
				Expect(client.IgnoreNotFound(c.Delete(ctx, o))).To(Succeed())
			}
		}, NodeTimeout(20*time.Minute))

		By("Team A's namespace placed by its administrator")
		ns := &corev1.Namespace{}
		Expect(c.Get(specCtx, client.ObjectKey{Name: teamA}, ns)).To(Succeed())
		patch := client.MergeFrom(ns.DeepCopy())
		ns.Annotations = map[string]string{
			"scheduler.alpha.kubernetes.io/node-selector": "kubernetes.io/os=linux",
			"dockyard.x-k8s.io/runtime-class-name":        runtimeClass,
		}
		Expect(c.Patch(specCtx, ns, patch)).To(Succeed())

		start := time.Now()
		createCluster(specCtx, infra, "kubernetes", teamA, "a", 1, 1, nil)
		createCluster(specCtx, infra, "kubernetes", teamB, "b", 1, 0, nil)
		report("two teams' clusters of nodes as Pods (1+1, 1+0) Ready in %s", time.Since(start).Round(time.Second))

		By("Team A's node Pods run where its administrator placed them")
		aPlane, aWorker := nodePod(specCtx, c, teamA, "a-control-plane-"), nodePod(specCtx, c, teamA, "a-md-0-")
		bPlane := nodePod(specCtx, c, teamB, "b-control-plane-")
		for _, p := range []*corev1.Pod{aPlane, aWorker} {
			Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("kubernetes.io/os", "linux"), "Pod %s's node selector", p.Name)
			Expect(p.Spec.RuntimeClassName).To(HaveValue(Equal(runtimeClass)), "Pod %s's runtime class", p.Name)
		}
		By("A Pod team A makes itself outside the placement is refused")
		own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "elsewhere"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: aWorker.Spec.Containers[0].Image}}}}
		err := c.Create(specCtx, own)
		Expect(err).To(HaveOccurred(), "a Pod without the namespace's node selector")
		Expect(err.Error()).To(ContainSubstring("spec.nodeSelector"))

		By("Team A's worker reaches its own control plane, and nothing of team B's")
		cfg := infra.GetRESTConfig()
		Eventually(func() error {
			return connects(specCtx, cfg, aWorker, aPlane.Status.PodIP, 6443)
		}).WithTimeout(2*time.Minute).WithPolling(5*time.Second).Should(Succeed(), "team A's worker to its control plane")
		for _, port := range []int{6443, 10250, 2379} {
			Expect(connects(specCtx, cfg, aWorker, bPlane.Status.PodIP, port)).NotTo(Succeed(),
				"team A's worker connected to team B's control plane %s:%d", bPlane.Status.PodIP, port)
		}
		front := &corev1.Service{}
		Expect(c.Get(specCtx, client.ObjectKey{Namespace: teamB, Name: frontOf(specCtx, c, teamB)}, front)).To(Succeed())
		Expect(connects(specCtx, cfg, aWorker, front.Spec.ClusterIP, 6443)).NotTo(Succeed(),
			"team A's worker connected to team B's front %s:6443", front.Spec.ClusterIP)

		By("A cluster of team A aimed at team B's namespace is refused, and team B's objects stay as they are")
		before := podUIDs(specCtx, c, teamB)
		intruder := aimAt(specCtx, infra, teamA, teamB)
		Eventually(func(g Gomega) {
			dc := &infrav1.DockyardCluster{}
			g.Expect(c.Get(specCtx, client.ObjectKey{Namespace: teamA, Name: intruder}, dc)).To(Succeed())
			var said []string
			for _, cond := range dc.Status.Conditions {
				said = append(said, cond.Type+"="+cond.Reason+": "+cond.Message)
			}
			g.Expect(strings.Join(said, "\n")).To(ContainSubstring("spec.infrastructure.kubernetes.namespace"))
		}).WithTimeout(3 * time.Minute).WithPolling(3 * time.Second).Should(Succeed())
		Expect(podUIDs(specCtx, c, teamB)).To(Equal(before), "team B's Pods")
		var svcs corev1.ServiceList
		Expect(c.List(specCtx, &svcs, client.InNamespace(teamB))).To(Succeed())
		for _, s := range svcs.Items {
			Expect(s.Name).NotTo(ContainSubstring(intruder), "a Service of team A's cluster in team B's namespace")
		}
	})
})

// applyPlacementPolicy applies config/infrastructure/placement_policy.yaml and returns its
// objects, for the cleanup.
func applyPlacementPolicy(ctx context.Context, c client.Client) []client.Object {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "infrastructure", "placement_policy.yaml"))
	Expect(err).NotTo(HaveOccurred())
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []client.Object
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		Expect(client.IgnoreAlreadyExists(c.Create(ctx, o))).To(Succeed(), "applying %s %s", o.GetKind(), o.GetName())
		out = append(out, o)
	}
	Expect(out).To(HaveLen(2), "the placement policy and its binding")
	// The binding takes a moment to reach admission.
	time.Sleep(3 * time.Second)
	return out
}

// nodePod is the running node Pod of namespace whose name starts with prefix.
func nodePod(ctx context.Context, c client.Client, namespace, prefix string) *corev1.Pod {
	var pods corev1.PodList
	Expect(c.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if strings.HasPrefix(p.Name, prefix) && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p
		}
	}
	Fail(fmt.Sprintf("no running Pod %s… in namespace %s", prefix, namespace))
	return nil
}

// frontOf names the Service in front of a namespace's cluster's control plane.
func frontOf(ctx context.Context, c client.Client, namespace string) string {
	var svcs corev1.ServiceList
	Expect(c.List(ctx, &svcs, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/managed-by": "dockyard"})).To(Succeed())
	for _, s := range svcs.Items {
		if len(s.Spec.Ports) > 0 && s.Spec.Ports[0].Name == "front" {
			return s.Name
		}
	}
	Fail("no front Service in namespace " + namespace)
	return ""
}

func podUIDs(ctx context.Context, c client.Client, namespace string) map[string]string {
	var pods corev1.PodList
	Expect(c.List(ctx, &pods, client.InNamespace(namespace))).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// connects opens a TCP connection from a node Pod's main container to address:port, giving up
// after 5 s (a NetworkPolicy drops, so a refused connection would be quicker).
func connects(ctx context.Context, cfg *rest.Config, from *corev1.Pod, address string, port int) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	probe := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", address, port)
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(from.Namespace).Name(from.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "node", Command: []string{"timeout", "5", "bash", "-c", probe}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
		return errors.Wrapf(err, "%s → %s:%d: %s", from.Name, address, port, out.String())
	}
	return nil
}

// aimAt makes, in namespace, a Cluster and a DockyardCluster whose nodes would be Pods of the
// infrastructure cluster in namespace target, through a kubeconfig Secret of the management
// cluster (reached in-cluster); returns its name.
func aimAt(ctx context.Context, infra framework.ClusterProxy, namespace, target string) string {
	c := infra.GetClient()
	kc, err := clientcmd.LoadFromFile(infra.GetKubeconfigPath())
	Expect(err).NotTo(HaveOccurred())
	for _, cl := range kc.Clusters {
		cl.Server = "https://kubernetes.default.svc"
	}
	raw, err := clientcmd.Write(*kc)
	Expect(err).NotTo(HaveOccurred())
	name := "intruder"
	Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "infra"},
		Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: raw}})).To(Succeed())
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: infrav1.DockyardClusterSpec{Infrastructure: infrav1.InfrastructureSpec{Kubernetes: &infrav1.KubernetesInfrastructure{
			KubeconfigSecret: "infra", Namespace: target}}}}
	Expect(c.Create(ctx, dc)).To(Succeed())
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: name}}}
	err = c.Create(ctx, cluster)
	Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "creating Cluster %s: %v", name, err)
	return name
}
