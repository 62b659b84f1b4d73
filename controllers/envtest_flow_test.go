package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/kubeconfig"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/inmemory"
)

// eventually polls until check returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// envCluster creates a Cluster and its DockyardCluster (changed by specs, when given) in a new
// namespace, the way Cluster API and a user's template would, with the workload kubeconfig
// pointing at the envtest API server.
func envCluster(ctx context.Context, t testing.TB, name string, paused bool, specs ...func(*infrav1.DockyardClusterSpec)) (*clusterv1.Cluster, *infrav1.DockyardCluster) {
	t.Helper()
	ns, err := env.CreateNamespace(ctx, "flow")
	if err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
		Spec: clusterv1.ClusterSpec{
			Paused: ptr.To(paused),
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "DockyardCluster", Name: name,
			},
		},
	}
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	// Deleting the Cluster makes the ClusterCache drop its connection to the "workload
	// cluster" (this API server), so no watch outlives the test.
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
	dc := &infrav1.DockyardCluster{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns.Name, Labels: map[string]string{clusterv1.ClusterNameLabel: name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cluster.UID}},
	}}
	for _, spec := range specs {
		spec(&dc.Spec)
	}
	if err := env.Client.Create(ctx, dc); err != nil {
		t.Fatal(err)
	}
	secret := kubeconfig.GenerateSecret(cluster, kubeconfig.FromEnvTestConfig(env.Config, cluster))
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	return cluster, dc
}

// envMachine creates a Machine, its bootstrap secret and its DockyardMachine.
func envMachine(ctx context.Context, t testing.TB, cluster *clusterv1.Cluster, name string, controlPlane bool) {
	t.Helper()
	if err := createEnvMachine(ctx, cluster, name, controlPlane); err != nil {
		t.Fatal(err)
	}
}

// createEnvMachine is envMachine for goroutines: it returns the error.
func createEnvMachine(ctx context.Context, cluster *clusterv1.Cluster, name string, controlPlane bool) error {
	m, dm, secret := machineObjects(name, controlPlane)
	for _, o := range []client.Object{m, dm, secret} {
		o.SetNamespace(cluster.Namespace)
		labels := o.GetLabels()
		labels[clusterv1.ClusterNameLabel] = cluster.Name
		o.SetLabels(labels)
	}
	m.Spec.ClusterName = cluster.Name
	m.UID = ""
	if err := env.Client.Create(ctx, secret); err != nil {
		return errors.Wrapf(err, "creating the bootstrap secret of %s", name)
	}
	if err := env.Client.Create(ctx, m); err != nil {
		return errors.Wrapf(err, "creating Machine %s", name)
	}
	dm.OwnerReferences[0].UID = m.UID
	return errors.Wrapf(env.Client.Create(ctx, dm), "creating DockyardMachine %s", name)
}

func getDM(ctx context.Context, ns, name string) (*infrav1.DockyardMachine, error) {
	dm := &infrav1.DockyardMachine{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, dm)
	return dm, err
}

func TestEnvtestClusterAndMachinesThroughTheFlow(t *testing.T) {
	ctx := context.Background()
	cluster, dc := envCluster(ctx, t, "flow1", false)
	ns := cluster.Namespace

	// The DockyardCluster gets its load balancer and endpoint.
	eventually(t, 30*time.Second, "DockyardCluster provisioned", func() error {
		got := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), got); err != nil {
			return err
		}
		if !ptr.Deref(got.Status.Initialization.Provisioned, false) || got.Spec.ControlPlaneEndpoint.Host == "" {
			return errors.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})

	// A control plane machine waits for the Cluster's infrastructure, like the contract says.
	envMachine(ctx, t, cluster, "flow1-cp-1", true)
	envMachine(ctx, t, cluster, "flow1-md-1", false)
	eventually(t, 30*time.Second, "machines wait for the cluster infrastructure", func() error {
		for _, n := range []string{"flow1-cp-1", "flow1-md-1"} {
			dm, err := getDM(ctx, ns, n)
			if err != nil {
				return err
			}
			if conditions.GetReason(dm, infrav1.ContainerProvisionedCondition) != infrav1.WaitingForClusterInfrastructureReason {
				return errors.Errorf("%s: %+v", n, dm.Status.Conditions)
			}
		}
		return nil
	})

	// Cluster API marks the infrastructure provisioned; the machines provision.
	patchClusterStatus(ctx, t, cluster, func(c *clusterv1.Cluster) {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	})
	for _, n := range []string{"flow1-cp-1", "flow1-md-1"} {
		// The kubelet of each node registers its Node in the "workload cluster".
		if err := env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"flow1-cp-1", "flow1-md-1"} {
		eventually(t, 60*time.Second, n+" provisioned with its Node's providerID", func() error {
			dm, err := getDM(ctx, ns, n)
			if err != nil {
				return err
			}
			if !ptr.Deref(dm.Status.Initialization.Provisioned, false) || !conditions.IsTrue(dm, clusterv1.ReadyCondition) {
				return errors.Errorf("conditions %+v", dm.Status.Conditions)
			}
			node := &corev1.Node{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: n}, node); err != nil {
				return err
			}
			if node.Spec.ProviderID != dm.Spec.ProviderID || dm.Spec.ProviderID != "dockyard:////"+n+"."+ns {
				return errors.Errorf("node providerID %q, machine providerID %q", node.Spec.ProviderID, dm.Spec.ProviderID)
			}
			return nil
		})
	}
	var cfg string
	envRuntime.WithContainer(docker.LoadBalancerName(docker.ClusterKey{Namespace: ns, Name: "flow1"}), func(c *inmemory.Container) { cfg = string(c.Files[docker.LoadBalancerConfigPath]) })
	if !strings.Contains(cfg, "server flow1-cp-1."+ns+" ") || strings.Contains(cfg, "flow1-md-1") {
		t.Errorf("load balancer backends:\n%s", cfg)
	}

	// Deleting the machines and then the DockyardCluster leaves nothing on the engine.
	for _, n := range []string{"flow1-cp-1", "flow1-md-1"} {
		dm, err := getDM(ctx, ns, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, dm); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Delete(ctx, dc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "everything deleted", func() error {
		list := &infrav1.DockyardMachineList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return errors.Errorf("%d DockyardMachines left", len(list.Items))
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), &infrav1.DockyardCluster{}); !apierrors.IsNotFound(err) {
			return errors.Errorf("DockyardCluster still there (%v)", err)
		}
		labels := docker.ClusterKey{Namespace: ns, Name: "flow1"}.ClusterLabels()
		cs, _ := envRuntime.ListContainers(ctx, labels)
		vs, _ := envRuntime.ListVolumes(ctx, labels)
		nets, _ := envRuntime.ListNetworks(ctx, labels)
		if len(cs)+len(vs)+len(nets) > 0 {
			return errors.Errorf("left on the engine: %d containers, %d volumes, %d networks", len(cs), len(vs), len(nets))
		}
		return nil
	})
}

func patchClusterStatus(ctx context.Context, t testing.TB, cluster *clusterv1.Cluster, mutate func(*clusterv1.Cluster)) {
	t.Helper()
	c := &clusterv1.Cluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
		t.Fatal(err)
	}
	original := c.DeepCopy()
	mutate(c)
	if err := env.Client.Status().Patch(ctx, c, client.MergeFrom(original)); err != nil {
		t.Fatal(err)
	}
}

func TestEnvtestPausedClusterStopsReconciliation(t *testing.T) {
	ctx := context.Background()
	cluster, dc := envCluster(ctx, t, "paused1", true)
	_ = cluster
	eventually(t, 30*time.Second, "DockyardCluster reports Paused", func() error {
		got := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), got); err != nil {
			return err
		}
		if !conditions.IsTrue(got, clusterv1.PausedCondition) {
			return errors.Errorf("conditions %+v", got.Status.Conditions)
		}
		if ptr.Deref(got.Status.Initialization.Provisioned, false) {
			return errors.Errorf("provisioned while paused")
		}
		return nil
	})
	if _, err := envRuntime.InspectContainer(ctx, docker.LoadBalancerName(docker.ClusterKey{Namespace: cluster.Namespace, Name: "paused1"})); err == nil {
		t.Error("load balancer created for a paused cluster")
	}
}

// The engine's events wake the reconcilers up: a killed load balancer is started again on the
// endpoint's address and a stopped node is reported within seconds, not at the next resync
// (hours away in this manager).
func TestEnvtestEngineEventsWakeTheReconcilers(t *testing.T) {
	ctx := context.Background()
	cluster, dc := envCluster(ctx, t, "events1", false)
	ns := cluster.Namespace
	key := docker.ClusterKey{Namespace: ns, Name: "events1"}
	var endpoint string
	eventually(t, 30*time.Second, "DockyardCluster provisioned", func() error {
		got := &infrav1.DockyardCluster{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), got); err != nil {
			return err
		}
		endpoint = got.Spec.ControlPlaneEndpoint.Host
		if !conditions.IsTrue(got, infrav1.LoadBalancerAvailableCondition) || endpoint == "" {
			return errors.Errorf("endpoint %q, conditions %+v", endpoint, got.Status.Conditions)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // the reconciles that writing the endpoint and status caused are done
	lbName := docker.LoadBalancerName(key)
	envRuntime.StopContainer(lbName, 137)
	eventually(t, 15*time.Second, "load balancer running again on the endpoint's address", func() error {
		lb, err := envRuntime.InspectContainer(ctx, lbName)
		if err != nil {
			return err
		}
		if !lb.Running || lb.Networks[docker.DefaultNetworkName(key)].IPv4 != endpoint {
			return errors.Errorf("running %v at %v, want %s", lb.Running, lb.Networks, endpoint)
		}
		return nil
	})

	patchClusterStatus(ctx, t, cluster, func(c *clusterv1.Cluster) {
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	})
	envMachine(ctx, t, cluster, "events1-md-1", false)
	eventually(t, 30*time.Second, "node container provisioned", func() error {
		dm, err := getDM(ctx, ns, "events1-md-1")
		if err != nil {
			return err
		}
		if !conditions.IsTrue(dm, infrav1.ContainerProvisionedCondition) {
			return errors.Errorf("conditions %+v", dm.Status.Conditions)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	envRuntime.StopContainer(docker.NodeName(key, "events1-md-1"), 137)
	eventually(t, 15*time.Second, "stopped node reported", func() error {
		dm, err := getDM(ctx, ns, "events1-md-1")
		if err != nil {
			return err
		}
		if reason := conditions.GetReason(dm, infrav1.ContainerProvisionedCondition); reason != infrav1.ContainerStoppedReason {
			return errors.Errorf("reason %s", reason)
		}
		return nil
	})
}

// The ConfigMap of a custom load balancer template is labelled to move with its cluster, by a
// manager that has only the permissions config/ grants.
func TestEnvtestTemplateConfigMapMovesWithItsCluster(t *testing.T) {
	ctx := context.Background()
	cluster, dc := envCluster(ctx, t, "tmpl1", true) // paused while the reference is set
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "tmpl1-haproxy"},
		Data: map[string]string{"value": "# tmpl1\nfrontend f\n  bind *:{{ .FrontendPort }}\n"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(dc.DeepCopy())
	dc.Spec.LoadBalancer.ConfigTemplateRef = &infrav1.ConfigMapReference{Name: cm.Name}
	if err := env.Client.Patch(ctx, dc, patch); err != nil {
		t.Fatal(err)
	}
	clusterPatch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Paused = ptr.To(false)
	if err := env.Client.Patch(ctx, cluster, clusterPatch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ConfigMap labelled for clusterctl move", func() error {
		got := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got); err != nil {
			return err
		}
		if _, ok := got.Labels["clusterctl.cluster.x-k8s.io/move"]; !ok {
			return errors.Errorf("labels %v", got.Labels)
		}
		return nil
	})
}

// The manager's cache keeps no managedFields: at 10,000 machines they were a large part of
// every cached DockyardMachine and Machine, and nothing in the manager reads them.
func TestEnvtestManagerCacheDropsManagedFields(t *testing.T) {
	ctx := context.Background()
	cluster, dc := envCluster(ctx, t, "nofields", true)
	live := &infrav1.DockyardCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dc), live); err != nil {
		t.Fatal(err)
	}
	if len(live.ManagedFields) == 0 {
		t.Fatal("the API server wrote no managedFields: nothing to check")
	}
	eventually(t, 30*time.Second, "the cached DockyardCluster and Cluster without managedFields", func() error {
		for _, obj := range []client.Object{&infrav1.DockyardCluster{}, &clusterv1.Cluster{}} {
			if err := env.Manager.GetCache().Get(ctx, client.ObjectKeyFromObject(cluster), obj); err != nil {
				return err
			}
			if n := len(obj.GetManagedFields()); n != 0 {
				return errors.Errorf("cached %T has %d managedFields entries", obj, n)
			}
		}
		return nil
	})
}
