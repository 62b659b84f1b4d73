//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
	"github.com/dockyard-dev/dockyard/pkg/scheme"
	"github.com/dockyard-dev/dockyard/test/framework"
)

// clusterctl move of a provisioned cluster from the suite's management plane to a second one.
// Both planes run Dockyard against the same engine, as two management clusters on one host
// would. clusterctl pauses the cluster, copies every object (the API server drops status on
// create), deletes the source's and unpauses the target's. Dockyard must keep its hands off
// while paused on both sides and then adopt the nodes from the engine: same containers, kubeadm
// run once, status rebuilt.
var _ = Describe("clusterctl move to another management plane", Ordered, func() {
	c := clusterSpec{name: "cctl-move", namespace: cctlNamespacePrefix + "-move", controlPlane: 1, workers: 0}
	var target *framework.ManagementPlane

	BeforeAll(func(ctx SpecContext) {
		sweepEngine(ctx, cctlNamespacePrefix)
		By("registering the suite's plane in clusterctl's provider inventory and starting a target plane")
		Expect(plane.InstallClusterctlInventory(ctx)).To(Succeed())
		start := time.Now()
		var err error
		target, err = framework.Start(ctx, framework.Options{
			WorkDir:             filepath.Join(artifacts, "management-plane-move-target"),
			ClusterctlInventory: true,
			DockyardArgs: []string{
				"--node-image-repository=" + nodeImageRepo,
				"--load-balancer-image=" + lbImage,
			},
			Log: GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		timings.add("move: target management plane started", time.Since(start))
		DeferCleanup(func(ctx SpecContext) {
			for _, mp := range []*framework.ManagementPlane{plane, target} {
				_ = mp.Client().Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name}})
			}
			Eventually(func() int {
				n := 0
				for _, mp := range []*framework.ManagementPlane{plane, target} {
					list := &clusterv1.ClusterList{}
					if err := mp.Client().List(ctx, list, client.InNamespace(c.namespace)); err == nil {
						n += len(list.Items)
					}
				}
				return n
			}).WithContext(ctx).WithTimeout(5 * time.Minute).Should(BeZero())
			if CurrentSpecReport().Failed() {
				var b strings.Builder
				target.Dump(ctx, &b)
				fmt.Fprintf(GinkgoWriter, "\n===== target plane =====\n%s\n", b.String())
				target.KeepWorkDir()
			}
			Expect(target.Stop(ctx)).To(Succeed())
			sweepEngine(ctx, cctlNamespacePrefix)
		}, NodeTimeout(8*time.Minute))
	})

	It("moves a provisioned cluster; the target adopts its nodes without recreating or re-bootstrapping them", func(ctx SpecContext) {
		start := time.Now()
		// The load balancer renders a template of the user's: its ConfigMap must move too.
		const marker = "# cctl-move: the user's template"
		template := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name + "-haproxy"},
			Data: map[string]string{"value": marker + "\n" + haproxy.DefaultTemplate}}
		Expect(client.IgnoreAlreadyExists(plane.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.namespace}}))).To(Succeed())
		Expect(plane.Client().Create(ctx, template)).To(Succeed())
		createCluster(ctx, c)
		dc := &infrav1.DockyardCluster{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dc)).To(Succeed())
		dcPatch := client.MergeFrom(dc.DeepCopy())
		dc.Spec.LoadBalancer.ConfigTemplateRef = &infrav1.ConfigMapReference{Name: template.Name}
		Expect(plane.Client().Patch(ctx, dc, dcPatch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(clusterAvailable(getCluster(ctx, c))).To(BeTrue())
		}).WithContext(ctx).WithTimeout(clusterTimeout).WithPolling(poll).Should(Succeed())
		before := verifyRunningOn(ctx, plane, c, 1, 0)
		whenDone("move: source cluster Available (1 control plane)", start)

		By("recording the engine's containers, the bootstrap output and Dockyard's objects")
		containers := clusterContainers(ctx, c)
		Expect(containers).To(HaveLen(2), "a node and a load balancer")
		var node string
		for name, ct := range containers {
			if ct.Labels[docker.KindRoleLabel] != string(docker.RoleLoadBalancer) {
				node = name
			}
			fmt.Fprintf(GinkgoWriter, "before the move: %s id %s started %s\n", name, ct.ID, ct.StartedAt)
		}
		bootstrapBefore, code := execInNode(ctx, node, "cat", "/var/lib/dockyard/bootstrap/output.log")
		Expect(code).To(Equal(0), bootstrapBefore)
		Expect(strings.Count(bootstrapBefore, "Your Kubernetes control-plane has initialized successfully")).To(Equal(1), bootstrapBefore)
		dcBefore := &infrav1.DockyardCluster{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dcBefore)).To(Succeed())

		source := watchDockyard(ctx, plane, c.namespace)
		dest := watchDockyard(ctx, target, c.namespace)

		By("clusterctl move")
		moveStart := time.Now()
		clusterctl(ctx, nil, "move", "--kubeconfig", plane.Kubeconfig(), "--to-kubeconfig", target.Kubeconfig(), "--namespace", c.namespace)
		whenDone("move: clusterctl move (1 control plane)", moveStart)

		By("the source keeps nothing of the cluster")
		src := plane.Client()
		for _, list := range []client.ObjectList{
			&clusterv1.ClusterList{}, &clusterv1.MachineList{}, &controlplanev1.KubeadmControlPlaneList{},
			&bootstrapv1.KubeadmConfigList{}, &bootstrapv1.KubeadmConfigTemplateList{}, &clusterv1.MachineDeploymentList{},
			crsList(), &infrav1.DockyardClusterList{}, &infrav1.DockyardMachineList{},
			&infrav1.DockyardMachineTemplateList{},
		} {
			Expect(src.List(ctx, list, client.InNamespace(c.namespace))).To(Succeed())
			Expect(listLen(list)).To(BeZero(), "%T left in the source", list)
		}
		secrets := &corev1.SecretList{}
		Expect(src.List(ctx, secrets, client.InNamespace(c.namespace))).To(Succeed())
		for _, s := range secrets.Items {
			Expect(s.Name).NotTo(HavePrefix(c.name), "secret %s left in the source", s.Name)
		}

		By("the target's Dockyard adopts the cluster: Machines Running, Nodes Ready with the same providerIDs")
		after := verifyRunningOn(ctx, target, c, 1, 0)
		Eventually(func(g Gomega) {
			cluster := &clusterv1.Cluster{}
			g.Expect(target.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, cluster)).To(Succeed())
			g.Expect(ptr.Deref(cluster.Spec.Paused, false)).To(BeFalse())
			g.Expect(clusterAvailable(cluster)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(poll).Should(Succeed())
		whenDone("move: to the cluster Available on the target", moveStart)
		Expect(after).To(HaveLen(len(before)))
		for name, dm := range before {
			got := after[name]
			Expect(got).NotTo(BeNil(), "DockyardMachine %s did not arrive", name)
			Expect(got.Spec.ProviderID).To(Equal(dm.Spec.ProviderID))
			Expect(got.Spec.Image).To(Equal(dm.Spec.Image))
			Expect(got.Status.Addresses).To(Equal(dm.Status.Addresses), "addresses rebuilt from the same container")
			Expect(ptr.Deref(got.Status.Initialization.Provisioned, false)).To(BeTrue())
			for _, cond := range []string{clusterv1.ReadyCondition, infrav1.ContainerProvisionedCondition, infrav1.BootstrapSucceededCondition} {
				Expect(conditions.IsTrue(got, cond)).To(BeTrue(), "%s of DockyardMachine %s: %s", cond, name, conditions.GetMessage(got, cond))
			}
		}
		dcAfter := &infrav1.DockyardCluster{}
		Eventually(func(g Gomega) {
			g.Expect(target.Client().Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: c.name}, dcAfter)).To(Succeed())
			g.Expect(ptr.Deref(dcAfter.Status.Initialization.Provisioned, false)).To(BeTrue())
			g.Expect(conditions.IsTrue(dcAfter, clusterv1.ReadyCondition)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(poll).Should(Succeed())
		Expect(dcAfter.Spec.ControlPlaneEndpoint).To(Equal(dcBefore.Spec.ControlPlaneEndpoint))

		By("the template's ConfigMap moved with the cluster, and the load balancer still renders it")
		Expect(target.Client().Get(ctx, client.ObjectKeyFromObject(template), &corev1.ConfigMap{})).To(Succeed())
		Expect(apierrors.IsNotFound(src.Get(ctx, client.ObjectKeyFromObject(template), &corev1.ConfigMap{}))).To(BeTrue(), "the ConfigMap stayed in the source")
		Expect(conditions.IsTrue(dcAfter, infrav1.LoadBalancerAvailableCondition)).To(BeTrue(), conditions.GetMessage(dcAfter, infrav1.LoadBalancerAvailableCondition))
		cfg, code := execInNode(ctx, docker.LoadBalancerName(c.key()), "cat", docker.LoadBalancerConfigPath)
		Expect(code).To(Equal(0), cfg)
		Expect(cfg).To(HavePrefix(marker))

		By("the same containers run: no node or load balancer was recreated or restarted")
		now := clusterContainers(ctx, c)
		Expect(now).To(HaveLen(len(containers)))
		for name, ct := range containers {
			Expect(now).To(HaveKey(name))
			Expect(now[name].ID).To(Equal(ct.ID), "container %s was recreated", name)
			Expect(now[name].StartedAt).To(Equal(ct.StartedAt), "container %s was restarted", name)
			Expect(now[name].Running).To(BeTrue())
		}

		By("kubeadm ran once in the node: its bootstrap output is unchanged")
		bootstrapAfter, code := execInNode(ctx, node, "cat", "/var/lib/dockyard/bootstrap/output.log")
		Expect(code).To(Equal(0), bootstrapAfter)
		Expect(bootstrapAfter).To(Equal(bootstrapBefore))

		By("Dockyard respected the pause on both planes")
		source.stop()
		dest.stop()
		fmt.Fprintf(GinkgoWriter, "Dockyard's objects on the source during the move:\n%s\non the target:\n%s\n", source, dest)
		for _, kind := range []string{"DockyardCluster", "DockyardMachine"} {
			Expect(source.pausedSeen(kind)).To(BeTrue(), "the source's %s never reported Paused while clusterctl moved it:\n%s", kind, source.String())
			Expect(dest.pausedSeen(kind)).To(BeTrue(), "the target's %s never reported Paused before clusterctl unpaused it:\n%s", kind, dest.String())
		}
		Expect(dest.reasons()).NotTo(ContainElements(infrav1.ContainerStartingReason, infrav1.BootstrapRunningReason, infrav1.LoadBalancerStartingReason),
			"the target's Dockyard started something:\n%s", dest.String())
		for _, mp := range []*framework.ManagementPlane{plane, target} {
			events := &corev1.EventList{}
			Expect(mp.Client().List(ctx, events, client.InNamespace(c.namespace))).To(Succeed())
			for _, e := range events.Items {
				if e.LastTimestamp.Time.Before(moveStart.Add(-time.Second)) && e.EventTime.Time.Before(moveStart.Add(-time.Second)) {
					continue
				}
				Expect(e.Reason).NotTo(BeElementOf("NodeCreated", "NodeDeleted", "BootstrapStarted", "Deleted"),
					"event after the move started: %s %s: %s", e.InvolvedObject.Kind, e.Reason, e.Message)
			}
		}

		By("clusterctl describe on the target shows Dockyard's conditions")
		expectDescribeHealthy(ctx, target, c, []string{node})
	})

	It("deletes the moved cluster from the target, leaving nothing on the engine", func(ctx SpecContext) {
		start := time.Now()
		deleteOn(ctx, target, c)
		whenDone("move: delete on the target until nothing is left", start)
	})
})

// crsList lists ClusterResourceSets (not in the plane client's scheme).
func crsList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "addons.cluster.x-k8s.io", Version: "v1beta2", Kind: "ClusterResourceSetList"})
	return l
}

func listLen(list client.ObjectList) int {
	switch l := list.(type) {
	case *bootstrapv1.KubeadmConfigList:
		return len(l.Items)
	case *bootstrapv1.KubeadmConfigTemplateList:
		return len(l.Items)
	case *clusterv1.MachineDeploymentList:
		return len(l.Items)
	case *unstructured.UnstructuredList:
		return len(l.Items)
	case *clusterv1.ClusterList:
		return len(l.Items)
	case *clusterv1.MachineList:
		return len(l.Items)
	case *controlplanev1.KubeadmControlPlaneList:
		return len(l.Items)
	case *infrav1.DockyardClusterList:
		return len(l.Items)
	case *infrav1.DockyardMachineList:
		return len(l.Items)
	case *infrav1.DockyardMachineTemplateList:
		return len(l.Items)
	}
	return -1
}

// dockyardWatch records every version of the DockyardClusters and DockyardMachines of a
// namespace a plane's API server sends: whether Dockyard marked them Paused, and the reasons
// of their conditions.
type dockyardWatch struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    sync.WaitGroup
	paused  map[string]bool
	seen    map[string]bool
	history []string
}

func watchDockyard(ctx context.Context, mp *framework.ManagementPlane, namespace string) *dockyardWatch {
	wc, err := client.NewWithWatch(mp.RESTConfig(), client.Options{Scheme: scheme.New()})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(ctx)
	w := &dockyardWatch{cancel: cancel, paused: map[string]bool{}, seen: map[string]bool{}}
	for _, list := range []client.ObjectList{&infrav1.DockyardClusterList{}, &infrav1.DockyardMachineList{}} {
		wi, err := wc.Watch(ctx, list, client.InNamespace(namespace))
		Expect(err).NotTo(HaveOccurred())
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			defer wi.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
						w.record(ev)
					}
				}
			}
		}()
	}
	return w
}

func (w *dockyardWatch) record(ev watch.Event) {
	var kind string
	var conds []metav1.Condition
	switch o := ev.Object.(type) {
	case *infrav1.DockyardCluster:
		kind, conds = "DockyardCluster", o.Status.Conditions
	case *infrav1.DockyardMachine:
		kind, conds = "DockyardMachine", o.Status.Conditions
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var line []string
	for _, cond := range conds {
		line = append(line, fmt.Sprintf("%s=%s/%s", cond.Type, cond.Status, cond.Reason))
		if cond.Type == clusterv1.PausedCondition && cond.Status == metav1.ConditionTrue {
			w.paused[kind] = true
		}
		w.seen[cond.Reason] = true
	}
	w.history = append(w.history, fmt.Sprintf("%s %s %s", ev.Type, kind, strings.Join(line, " ")))
}

func (w *dockyardWatch) stop() {
	w.cancel()
	w.done.Wait()
}

func (w *dockyardWatch) pausedSeen(kind string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused[kind]
}

func (w *dockyardWatch) reasons() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for r := range w.seen {
		out = append(out, r)
	}
	return out
}

func (w *dockyardWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.history, "\n")
}
