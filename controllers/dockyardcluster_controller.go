package controllers

import (
	"context"
	"fmt"
	goNet "net"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// DockyardClusterReconciler reconciles DockyardClusters: a container network and a haproxy load
// balancer whose address becomes the cluster's control plane endpoint.
type DockyardClusterReconciler struct {
	Client   client.Client
	Nodes    *docker.Manager
	Recorder record.EventRecorder
	// EngineEvents, when set, wake the reconciler up when a cluster's load balancer or control
	// plane container starts, stops or vanishes, or a network goes away.
	EngineEvents     *docker.EngineEvents
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardclusters;dockyardclusters/status;dockyardclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the reconciler: it watches DockyardClusters, and Clusters to learn
// about ownership and pausing.
func (r *DockyardClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "dockyardcluster")
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.DockyardCluster{}).
		Named("dockyardcluster").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx, infrav1.GroupVersion.WithKind("DockyardCluster"), mgr.GetClient(), &infrav1.DockyardCluster{})),
			builder.WithPredicates(predicates.ClusterPausedTransitions(mgr.GetScheme(), log)),
		)
	if r.EngineEvents != nil {
		b = b.WatchesRawSource(engineEventSource(r.EngineEvents, r.clusterRequests))
	}
	return b.Complete(r)
}

// Reconcile follows the InfraCluster contract: owner, external management, pause, finalizer,
// then the load balancer and the endpoint; one deferred patch writes spec and status.
func (r *DockyardClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	log := ctrl.LoggerFrom(ctx)

	dc := &infrav1.DockyardCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, dc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, errors.Wrapf(err, "getting DockyardCluster %s", req.NamespacedName)
	}

	// The owner Cluster; it may be gone while the DockyardCluster is deleted.
	cluster, err := util.GetOwnerCluster(ctx, r.Client, dc.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, errors.Wrapf(err, "getting the owner Cluster of DockyardCluster %s", req.NamespacedName)
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	}

	// Someone else provides this cluster's infrastructure.
	if annotations.IsExternallyManaged(dc) {
		log.V(4).Info("DockyardCluster is externally managed, nothing to do")
		return ctrl.Result{}, nil
	}

	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, dc); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}

	// The finalizer goes on once a Cluster owns the object: until then nothing was created.
	if cluster != nil {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, dc, infrav1.ClusterFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(dc, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := patchDockyardCluster(ctx, helper, dc); err != nil {
			rerr = kerrors.NewAggregate([]error{rerr, err})
		}
	}()

	if !dc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, dc)
	}
	if cluster == nil {
		setCondition(dc, infrav1.LoadBalancerAvailableCondition, metav1.ConditionFalse, infrav1.WaitingForOwnerClusterReason,
			"Waiting for a Cluster to reference this DockyardCluster in spec.infrastructureRef")
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, cluster, dc)
}

// networkRetry is how often a cluster whose network the user has to create or change looks
// again.
const networkRetry = 10 * time.Second

func (r *DockyardClusterReconciler) reconcileNormal(ctx context.Context, cluster *clusterv1.Cluster, dc *infrav1.DockyardCluster) (ctrl.Result, error) {
	key := docker.ClusterKey{Namespace: dc.Namespace, Name: cluster.Name}
	network, err := clusterNetwork(ctx, r.Nodes, dc, key)
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NetworkFailedReason, "%v", err)
		return ctrl.Result{}, err
	}

	net, err := r.Nodes.EnsureClusterNetwork(ctx, key, networkSpec(cluster, dc, network))
	if ne, ok := docker.IsNetworkError(err); ok {
		// The user has to act (create the network, or choose another); look again later.
		reason := infrav1.NetworkNotUsableReason
		if ne.NotFound {
			reason = infrav1.NetworkNotFoundReason
		}
		setLoadBalancerCondition(dc, metav1.ConditionFalse, reason, "%v", err)
		ctrl.LoggerFrom(ctx).Info("The cluster's network cannot be used", "network", network, "reason", reason, "detail", ne.Detail)
		return ctrl.Result{RequeueAfter: networkRetry}, nil
	}
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NetworkFailedReason, "Creating network %s failed: %v", network, err)
		return ctrl.Result{}, err
	}

	image := dc.Spec.LoadBalancer.Image
	if image == "" {
		image = docker.DefaultLoadBalancerImage
	}
	// The load balancer serves the endpoint's port (defaulted like the webhook does).
	if dc.Spec.ControlPlaneEndpoint.Port == 0 {
		dc.Spec.ControlPlaneEndpoint.Port = infrav1.DefaultAPIServerPort
	}
	port := int(dc.Spec.ControlPlaneEndpoint.Port)
	lb, err := r.Nodes.EnsureLoadBalancer(ctx, docker.LoadBalancerSpec{Cluster: key, Image: image, Network: network, Port: port})
	if policy.IsRefused(err) {
		// Retrying cannot help; the manager reconciles everything again when it restarts with
		// another policy.
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NotAllowedReason, "%v", err)
		return ctrl.Result{}, nil
	}
	if err != nil {
		reason := infrav1.LoadBalancerFailedReason
		if docker.IsImageError(err) {
			reason = infrav1.LoadBalancerImageFailedReason
		}
		setLoadBalancerCondition(dc, metav1.ConditionFalse, reason, "%v", err)
		return ctrl.Result{}, err
	}
	address := lb.Address(network)
	if !lb.Running() || address == "" {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerStartingReason,
			"Load balancer %s is %s", lb.Name, lb.State())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}

	tmpl, err := loadBalancerTemplate(ctx, r.Client, dc)
	if err == nil {
		err = moveWithCluster(ctx, r.Client, dc)
	}
	if err == nil {
		_, err = lb.Update(ctx, tmpl, controlPlaneBackends(r.Client, r.Nodes, key, network))
	}
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerConfigFailedReason, "%v", err)
		return ctrl.Result{}, err
	}

	// The endpoint: a host the user set is kept.
	if dc.Spec.ControlPlaneEndpoint.Host == "" {
		dc.Spec.ControlPlaneEndpoint.Host = address
	}
	if host := dc.Spec.ControlPlaneEndpoint.Host; host != address && inSubnets(host, net.Subnets) {
		// The endpoint is an address on the cluster network the load balancer no longer has:
		// it was replaced (after it stopped) and the engine gave it another address.
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerAddressChangedReason,
			"The load balancer was replaced and now answers on %s, but the cluster's endpoint is %s, which certificates and kubeconfigs name; recreate the cluster",
			address, host)
		return ctrl.Result{}, nil
	}
	dc.Status.FailureDomains = dc.Spec.FailureDomains

	if !ptr.Deref(dc.Status.Initialization.Provisioned, false) {
		r.Recorder.Event(dc, corev1.EventTypeNormal, "LoadBalancerReady", loadBalancerMessage(lb, address, port))
	}
	dc.Status.Initialization.Provisioned = ptr.To(true)
	// Where it answers is in spec.controlPlaneEndpoint and the LoadBalancerReady event: a True
	// condition carries no message (conditions.go).
	setLoadBalancerCondition(dc, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason, "")
	if r.Nodes.HasManagementNodes() {
		// Nodes that join the management cluster later must join this network too.
		return ctrl.Result{RequeueAfter: docker.ManagementResync}, nil
	}
	return ctrl.Result{}, nil
}

// loadBalancerMessage tells where the load balancer answers, on the network and on the host.
func loadBalancerMessage(lb *docker.LoadBalancer, address string, port int) string {
	msg := fmt.Sprintf("Load balancer %s serves %s:%d", lb.Name, address, port)
	if hostIP, hostPort := lb.PublishedPort(port); hostPort != 0 {
		msg += fmt.Sprintf(" (published on %s:%d)", hostIP, hostPort)
	}
	return msg
}

func (r *DockyardClusterReconciler) reconcileDelete(ctx context.Context, dc *infrav1.DockyardCluster) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := clusterNameOf(dc.ObjectMeta)
	if name == "" || deletedForMove(dc) {
		// Never owned by a Cluster (nothing was created), or moved to another management
		// cluster by clusterctl move, whose Dockyard now owns the load balancer and network.
		controllerutil.RemoveFinalizer(dc, infrav1.ClusterFinalizer)
		return ctrl.Result{}, nil
	}
	key := docker.ClusterKey{Namespace: dc.Namespace, Name: name}

	// Node containers belong to DockyardMachines, which delete them (and leave the load
	// balancer) first; Cluster API deletes the machines before the infrastructure cluster.
	remaining, err := machinesWithNodes(ctx, r.Client, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if remaining > 0 {
		setCondition(dc, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason,
			fmt.Sprintf("Waiting for %d DockyardMachines of the cluster to be deleted", remaining))
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}

	network, err := clusterNetwork(ctx, r.Nodes, dc, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Nodes.DeleteCluster(ctx, key, network); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, "deleting the containers, volumes and network of cluster %s", key)
	}
	log.Info("Deleted the load balancer and network of the cluster")
	r.Recorder.Eventf(dc, corev1.EventTypeNormal, "Deleted", "Deleted the load balancer and network of cluster %s", key)
	controllerutil.RemoveFinalizer(dc, infrav1.ClusterFinalizer)
	return ctrl.Result{}, nil
}

func setLoadBalancerCondition(dc *infrav1.DockyardCluster, status metav1.ConditionStatus, reason, format string, args ...any) {
	setCondition(dc, infrav1.LoadBalancerAvailableCondition, status, reason, fmt.Sprintf(format, args...))
}

// patchDockyardCluster summarizes the conditions into Ready and patches the object once.
func patchDockyardCluster(ctx context.Context, helper *patch.Helper, dc *infrav1.DockyardCluster) error {
	if dc.DeletionTimestamp.IsZero() {
		if err := setReadySummary(dc, infrav1.LoadBalancerAvailableCondition); err != nil {
			return err
		}
	} else if !conditions.Has(dc, clusterv1.ReadyCondition) || conditions.GetReason(dc, clusterv1.ReadyCondition) != infrav1.DeletingReason {
		setCondition(dc, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "Deleting the load balancer and network")
	}
	return helper.Patch(ctx, dc, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.ReadyCondition, infrav1.LoadBalancerAvailableCondition, clusterv1.PausedCondition,
	}})
}

// inSubnets reports whether host is an IP address inside one of the subnets.
func inSubnets(host string, subnets []string) bool {
	ip := goNet.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, cidr := range subnets {
		if _, n, err := goNet.ParseCIDR(cidr); err == nil && n.Contains(ip) {
			return true
		}
	}
	return false
}
