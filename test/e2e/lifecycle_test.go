//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
)

// Lifecycle chaos (make test-e2e-lifecycle, with the engine's restart under a management cluster
// in containers of the chaos spec): whatever happens to the manager, the infrastructure or the
// namespace, every deletion ends, nothing is left on the engine, and no object is held by a
// finalizer for more than five minutes without a condition saying why.
var _ = Describe("Lifecycle chaos: every deletion ends and leaves nothing", Ordered, Serial, Label("lifecycle"), func() {
	// One namespace per cluster (deleteOn waits for a namespace to hold no Dockyard object), and
	// one deleted whole.
	ns := testNamespacePrefix + "-lifecycle"
	namespaces := []string{ns + "-a", ns + "-b", ns + "-infra", ns + "-pods", ns + "-gone"}
	var watch *stuckWatch

	BeforeAll(func(ctx SpecContext) {
		watch = watchStuck(ctx, namespaces...)
		DeferCleanup(func(ctx SpecContext) {
			for _, n := range namespaces {
				_ = plane.Client().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
			}
			sweepEngine(ctx, ns)
		}, NodeTimeout(5*time.Minute))
	})
	AfterEach(func() {
		Expect(watch.found()).To(BeEmpty(), "objects held by a finalizer for more than 5 minutes without a condition saying why")
	})

	It("creates and deletes clusters with MachinePools while the manager is killed at random", func(ctx SpecContext) {
		a := clusterSpec{name: "lc-pool-a", namespace: ns + "-a", controlPlane: 1, workers: 2}
		b := clusterSpec{name: "lc-pool-b", namespace: ns + "-b", controlPlane: 1, workers: 1}
		start := time.Now()
		// Created while the manager runs: its webhooks admit the objects.
		for _, c := range []clusterSpec{a, b} {
			createObjects(ctx, plane.Client(), c.namespace, generateFromTemplate(ctx, "cluster-template-machinepool.yaml", c, map[string]string{
				"DOCKYARD_NODE_IMAGE": nodeImageRepo + ":" + kubernetesVersion, "DOCKYARD_LB_IMAGE": lbImage,
			}))
		}
		killer := killManagerAtRandom(ctx, 3*time.Second, 15*time.Second)
		waitMachinesRunning(ctx, a, 1, 2)
		waitMachinesRunning(ctx, b, 1, 1)
		timings.add("lifecycle: two clusters with MachinePools (1+2, 1+1) Ready, the manager killed at random", time.Since(start))
		expectBootstrappedOnce(ctx, a)
		expectBootstrappedOnce(ctx, b)

		By("scaling one pool to 0 and deleting the other cluster, still killing the manager")
		start = time.Now()
		mp := &clusterv1.MachinePool{}
		Expect(plane.Client().Get(ctx, client.ObjectKey{Namespace: b.namespace, Name: b.name + "-mp-0"}, mp)).To(Succeed())
		patch := client.MergeFrom(mp.DeepCopy())
		mp.Spec.Replicas = ptr.To[int32](0)
		Expect(plane.Client().Patch(ctx, mp, patch)).To(Succeed())
		deleteOn(ctx, plane, a)
		waitMachinesRunning(ctx, b, 1, 0)
		kills := killer.stop()
		timings.add(fmt.Sprintf("lifecycle: a pool scaled to 0 and a cluster deleted, the manager killed at random (%d kills in all)", kills), time.Since(start))
		Expect(kills).To(BeNumerically(">=", 5), "the manager was killed only %d times", kills)
		deleteOn(ctx, plane, b)
	})

	It("ends the deletion of clusters whose infrastructure cluster was deleted under them", func(ctx SpecContext) {
		infra := clusterSpec{name: "lc-infra", namespace: ns + "-infra", controlPlane: 1}
		onPods := clusterSpec{name: "lc-on-pods", namespace: ns + "-pods", controlPlane: 1, workers: 1}
		pods := onPods.namespace
		createCluster(ctx, infra)
		waitMachinesRunning(ctx, infra, 1, 0)
		infraClient, kubeconfig := workloadClient(ctx, infra)
		// The Pods' namespace on the infrastructure cluster is its administrator's to make.
		Expect(client.IgnoreAlreadyExists(infraClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pods,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}))).To(Succeed())
		// A Secret of any name holds the infrastructure cluster's kubeconfig.
		Expect(client.IgnoreAlreadyExists(plane.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pods}}))).To(Succeed())
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pods, Name: "infra"},
			Data: map[string][]byte{infrav1.InfrastructureKubeconfigKey: kubeconfig}}
		Expect(plane.Client().Create(ctx, secret)).To(Succeed())
		createObjects(ctx, plane.Client(), pods, generateFromTemplate(ctx, "cluster-template-kubernetes.yaml", onPods, map[string]string{
			"DOCKYARD_NODE_IMAGE": nodeImageRepo + ":" + kubernetesVersion, "DOCKYARD_LB_IMAGE": lbImage,
			"DOCKYARD_INFRASTRUCTURE_KUBECONFIG_SECRET": secret.Name,
		}))
		By("Dockyard records where it makes the cluster, and makes it there")
		Eventually(func(g Gomega) {
			dc := getDockyardCluster(ctx, onPods)
			g.Expect(dc.Status.Engine).To(Equal("secret/"+pods+"/infra/"+pods), "status.engine; LoadBalancerAvailable: %s",
				conditions.GetMessage(dc, infrav1.LoadBalancerAvailableCondition))
			wl, _ := workloadClient(ctx, infra)
			services := &corev1.ServiceList{}
			g.Expect(wl.List(ctx, services, client.InNamespace(pods))).To(Succeed())
			g.Expect(services.Items).NotTo(BeEmpty(), "the cluster's Services on the infrastructure cluster")
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())

		By("deleting the infrastructure cluster, then the cluster on it")
		deleteOn(ctx, plane, infra)
		Expect(plane.Client().Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: pods, Name: onPods.name}})).To(Succeed())
		start := time.Now()
		Eventually(func(g Gomega) {
			dc := getDockyardCluster(ctx, onPods)
			g.Expect(conditions.GetReason(dc, clusterv1.ReadyCondition)).To(Equal(infrav1.InfrastructureUnavailableReason), conditions.GetMessage(dc, clusterv1.ReadyCondition))
			g.Expect(conditions.GetMessage(dc, clusterv1.ReadyCondition)).To(ContainSubstring(infrav1.AbandonAnnotation))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(poll).Should(Succeed())
		timings.add("lifecycle: infrastructure cluster gone → the deletion says what blocks it and the ways out", time.Since(start))

		By("abandoning what is on the infrastructure cluster")
		start = time.Now()
		abandon := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+infrav1.AbandonAnnotation+`":"true"}}}`))
		Expect(plane.Client().Patch(ctx, &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{Namespace: pods, Name: onPods.name}}, abandon)).To(Succeed())
		deleteOn(ctx, plane, onPods)
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(plane.Client().Get(ctx, client.ObjectKeyFromObject(secret), s)).To(Succeed(), "the Secret stays: nobody deleted it")
			g.Expect(s.Finalizers).NotTo(ContainElement(infrastructure.SecretFinalizer))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed(), "the Secret released once no cluster's nodes may run there")
		Expect(plane.Client().Delete(ctx, secret)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(plane.Client().Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(poll).Should(BeTrue(), "the Secret, no longer marked, goes when deleted")
		timings.add("lifecycle: abandoned → cluster deleted and its kubeconfig Secret released", time.Since(start))
		events := &corev1.EventList{}
		Expect(plane.Client().List(ctx, events, client.InNamespace(pods))).To(Succeed())
		Expect(slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Reason == "Abandoned" && e.InvolvedObject.Name == onPods.name
		})).To(BeTrue(), "an Abandoned event names what was left")
	})

	It("deletes a namespace holding clusters that are still coming up", func(ctx SpecContext) {
		gone := ns + "-gone"
		cs := []clusterSpec{
			{name: "lc-ns-a", namespace: gone, controlPlane: 1, workers: 1},
			{name: "lc-ns-b", namespace: gone, controlPlane: 1},
		}
		for _, c := range cs {
			createCluster(ctx, c)
		}
		// Nodes are booting when the namespace goes.
		Eventually(func(g Gomega) {
			g.Expect(clusterContainers(ctx, cs[0])).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
		start := time.Now()
		Expect(plane.Client().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gone}})).To(Succeed())
		Eventually(func() error {
			err := plane.Client().Get(ctx, client.ObjectKey{Name: gone}, &corev1.Namespace{})
			if err == nil {
				return errors.Errorf("namespace %s still there; Dockyard's objects in it: %s", gone, dockyardObjects(ctx, gone))
			}
			return client.IgnoreNotFound(err)
		}).WithContext(ctx).WithTimeout(10 * time.Minute).WithPolling(poll).Should(Succeed())
		timings.add("lifecycle: a namespace with two clusters coming up deleted → gone", time.Since(start))
		for _, c := range cs {
			left, err := nodes.Leftovers(ctx, c.key())
			Expect(err).NotTo(HaveOccurred())
			Expect(left).To(BeNil(), "what the namespace's deletion left of %s on the engine", c.name)
		}
	})
})

// managerKiller SIGKILLs the management plane's Dockyard manager at random moments, as crashes
// at any point of a reconcile would, and starts it again after a random pause.
type managerKiller struct {
	done  chan struct{}
	kills chan int
}

// killManagerAtRandom kills the manager every min to max (uniformly), each time down for up to
// 3 s, until stop. The moments follow the suite's random seed, and each is logged.
func killManagerAtRandom(ctx context.Context, minEvery, maxEvery time.Duration) *managerKiller {
	seed := uint64(GinkgoRandomSeed())
	r := rand.New(rand.NewPCG(seed, seed))
	k := &managerKiller{done: make(chan struct{}), kills: make(chan int, 1)}
	start := time.Now()
	go func() {
		defer GinkgoRecover()
		n := 0
		defer func() { k.kills <- n }()
		for {
			wait := minEvery + time.Duration(r.Int64N(int64(maxEvery-minEvery)))
			select {
			case <-k.done:
				return
			case <-ctx.Done():
				// The spec ended without stop (it failed, or was interrupted): the manager
				// runs for its cleanup.
				return
			case <-time.After(wait):
			}
			Expect(plane.KillDockyard()).To(Succeed())
			n++
			down := time.Duration(r.Int64N(int64(3 * time.Second)))
			fmt.Fprintf(GinkgoWriter, "manager killed at +%s, down %s\n", time.Since(start).Round(100*time.Millisecond), down.Round(100*time.Millisecond))
			time.Sleep(down)
			Expect(plane.StartDockyard(context.WithoutCancel(ctx))).To(Succeed())
		}
	}()
	return k
}

// stop ends the kills and returns their number; the manager runs when it returns.
func (k *managerKiller) stop() int {
	close(k.done)
	return <-k.kills
}

// stuckWatch looks, every 10 s, for Dockyard's objects of some namespaces that are held by a
// finalizer more than five minutes after their deletion and whose Ready condition does not say
// why (its reason is Deleting, or it has none).
type stuckWatch struct {
	mu    sync.Mutex
	stuck map[string]string
}

func watchStuck(ctx context.Context, namespaces ...string) *stuckWatch {
	w := &stuckWatch{stuck: map[string]string{}}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
			for _, ns := range namespaces {
				for _, list := range []client.ObjectList{&infrav1.DockyardClusterList{}, &infrav1.DockyardMachineList{}, &infrav1.DockyardMachinePoolList{}} {
					if err := plane.Client().List(ctx, list, client.InNamespace(ns)); err != nil {
						continue
					}
					w.check(list)
				}
			}
		}
	}()
	return w
}

// conditioned is an object with conditions.
type conditioned interface {
	client.Object
	conditions.Getter
}

// items are the objects of a list that have conditions.
func items(list client.ObjectList) []conditioned {
	all, _ := apimeta.ExtractList(list)
	var out []conditioned
	for _, o := range all {
		if c, ok := o.(conditioned); ok {
			out = append(out, c)
		}
	}
	return out
}

func (w *stuckWatch) check(list client.ObjectList) {
	for _, o := range items(list) {
		deleted := o.GetDeletionTimestamp()
		if deleted == nil || time.Since(deleted.Time) < 5*time.Minute || len(o.GetFinalizers()) == 0 {
			continue
		}
		reason := conditions.GetReason(o, clusterv1.ReadyCondition)
		if reason != "" && reason != infrav1.DeletingReason {
			continue
		}
		w.mu.Lock()
		w.stuck[fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())] = fmt.Sprintf("deleted %s ago, Ready %q: %s",
			time.Since(deleted.Time).Round(time.Second), reason, conditions.GetMessage(o, clusterv1.ReadyCondition))
		w.mu.Unlock()
	}
}

// found lists what the watch found so far.
func (w *stuckWatch) found() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k, v := range w.stuck {
		out = append(out, k+": "+v)
	}
	slices.Sort(out)
	return out
}

// dockyardObjects describes Dockyard's objects of a namespace: each with its finalizers and
// its Ready condition.
func dockyardObjects(ctx context.Context, ns string) string {
	var out []string
	for _, list := range []client.ObjectList{&infrav1.DockyardClusterList{}, &infrav1.DockyardMachineList{}, &clusterv1.ClusterList{}, &clusterv1.MachineList{}} {
		if err := plane.Client().List(ctx, list, client.InNamespace(ns)); err != nil {
			out = append(out, err.Error())
			continue
		}
		for _, o := range items(list) {
			out = append(out, fmt.Sprintf("%T %s finalizers %v, Ready %s: %s", o, o.GetName(), o.GetFinalizers(),
				conditions.GetReason(o, clusterv1.ReadyCondition), conditions.GetMessage(o, clusterv1.ReadyCondition)))
		}
	}
	return strings.Join(out, "; ")
}
