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
	"sigs.k8s.io/controller-runtime/pkg/handler"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// DockyardClusterReconciler reconciles DockyardClusters: a container network and a haproxy load
// balancer whose address becomes the cluster's control plane endpoint.
type DockyardClusterReconciler struct {
	Client client.Client
	// Engines gives each cluster the node layer of the engine its nodes run on.
	Engines  *infrastructure.Engines
	Recorder record.EventRecorder
	// EngineEvents, when set, wake the reconciler up when a cluster's load balancer or control
	// plane container starts, stops or vanishes, or a network goes away.
	EngineEvents     *docker.EngineEvents
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardclusters;dockyardclusters/status;dockyardclusters/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;clusters/status,verbs=get;list;watch
// ConfigMaps (haproxy templates) are read and labelled for clusterctl move with the rules of
// config/rbac/secrets_role.yaml, bound only where the manager reconciles.
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
	if found, err := getTarget(ctx, r.Client, req.NamespacedName, dc); !found || err != nil {
		return ctrl.Result{}, err
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

	// The finalizer goes on once a Cluster owns the object: until then nothing was created.
	helper, stop, err := begin(ctx, r.Client, cluster, dc, infrav1.ClusterFinalizer, cluster != nil)
	if stop || err != nil {
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
	// The engine the cluster's nodes run on, chosen once for the whole reconcile.
	nodes, err := r.Engines.For(ctx, dc)
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrastructureReason(err), "%v", err)
		return ctrl.Result{RequeueAfter: networkRetry}, nil
	}
	return r.reconcileNormal(ctx, &clusterScope{dc: dc, cluster: cluster, nodes: nodes, key: docker.ClusterKey{Namespace: dc.Namespace, Name: cluster.Name}})
}

// networkRetry is how often a cluster whose network the user has to create or change looks
// again.
const networkRetry = 10 * time.Second

// clusterScope is what one reconcile of a DockyardCluster works with; the phases fill it in.
type clusterScope struct {
	dc      *infrav1.DockyardCluster
	cluster *clusterv1.Cluster
	// nodes is the node layer of the engine the cluster's nodes run on.
	nodes *docker.Manager
	key   docker.ClusterKey
	// network is the name of the cluster's network, subnets its address ranges.
	network string
	subnets []string
	// lb is the running load balancer and address its address on the network.
	lb      *docker.LoadBalancer
	address string
	// zoned is true when the cluster's engine has zones, which come and go (zones.go).
	zoned bool
}

// clusterPhase is one step of a DockyardCluster's reconcileNormal; next is false when the
// reconcile ends with it (LoadBalancerAvailable says why, the result when to look again).
type clusterPhase func(ctx context.Context, s *clusterScope) (result ctrl.Result, next bool, err error)

// reconcileNormal runs the phases of a cluster in order; they all report through
// LoadBalancerAvailable:
//
//  0. engine: where the cluster's network and load balancer are made is recorded
//     (status.engine) before anything is made there, so that a deletion knows what to remove
//     and where; a kubeconfig Secret the nodes run on is marked, so that it stays as long as
//     they do;
//  1. network: the cluster's container network exists (created, or the user's, which must be
//     usable);
//  2. load balancer: a running haproxy on it serving the endpoint's port, published on the
//     host port kept in spec.loadBalancer.hostPort (LoadBalancerHostPortKept says when it is
//     not), its configuration rendered with the running control plane nodes as backends;
//  3. endpoint: spec.controlPlaneEndpoint (a host the user set is kept; a load balancer that
//     came back on another address is reported, since certificates name the old one), failure
//     domains and initialization.provisioned.
func (r *DockyardClusterReconciler) reconcileNormal(ctx context.Context, s *clusterScope) (ctrl.Result, error) {
	for _, phase := range []clusterPhase{r.reconcileEngine, r.reconcileNetwork, r.reconcileLoadBalancer, r.reconcileEndpoint} {
		result, next, err := phase(ctx, s)
		if err != nil || !next {
			return result, err
		}
	}
	if s.zoned {
		// A zone whose hosts all went (or came back) leaves (or joins) the failure domains.
		return ctrl.Result{RequeueAfter: zoneResync}, nil
	}
	if s.nodes.HasManagementNodes() {
		// Nodes that join the management cluster later must join this network too.
		return ctrl.Result{RequeueAfter: docker.ManagementResync}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileNetwork makes sure the cluster's network exists; one the user has to create or
// change is looked at again every networkRetry.
func (r *DockyardClusterReconciler) reconcileNetwork(ctx context.Context, s *clusterScope) (ctrl.Result, bool, error) {
	dc := s.dc
	var err error
	if s.network, err = clusterNetwork(ctx, s.nodes, dc, s.key); err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NetworkFailedReason, "%v", err)
		return ctrl.Result{}, false, err
	}
	subnets, err := s.nodes.EnsureNetwork(ctx, s.key, networkSpec(s.cluster, dc, s.network))
	if policy.IsRefused(err) {
		// A subnet in use now may be free later (its network removed): looked at again.
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NotAllowedReason, "Network %s: %v", s.network, err)
		return ctrl.Result{RequeueAfter: networkRetry}, false, nil
	}
	if ne, ok := docker.IsNetworkError(err); ok {
		reason := infrav1.NetworkNotUsableReason
		if ne.NotFound {
			reason = infrav1.NetworkNotFoundReason
		}
		setLoadBalancerCondition(dc, metav1.ConditionFalse, reason, "%v", err)
		ctrl.LoggerFrom(ctx).Info("The cluster's network cannot be used", "network", s.network, "reason", reason, "detail", ne.Detail)
		return ctrl.Result{RequeueAfter: networkRetry}, false, nil
	}
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NetworkFailedReason, "Creating network %s failed: %v", s.network, err)
		return ctrl.Result{}, false, err
	}
	s.subnets = subnets
	return ctrl.Result{}, true, nil
}

// reconcileLoadBalancer makes the load balancer run on the cluster's network, serving the
// endpoint's port (defaulted like the webhook does), with the running control plane nodes as
// its backends.
func (r *DockyardClusterReconciler) reconcileLoadBalancer(ctx context.Context, s *clusterScope) (ctrl.Result, bool, error) {
	dc := s.dc
	image := dc.Spec.LoadBalancer.Image
	if image == "" {
		image = docker.DefaultLoadBalancerImage
	}
	port := dc.Spec.ControlPlaneEndpoint.Port
	if port == 0 {
		port = infrav1.DefaultAPIServerPort
	}
	lb, err := s.nodes.EnsureLoadBalancer(ctx, docker.LoadBalancerSpec{
		Cluster: s.key, Image: image, Network: s.network,
		Port: int(port), HostPort: int(dc.Spec.LoadBalancer.HostPort),
	})
	if policy.IsRefused(err) {
		// Retrying cannot help; the manager reconciles everything again when it restarts with
		// another policy.
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.NotAllowedReason, "%v", err)
		return ctrl.Result{}, false, nil
	}
	if err != nil {
		reason := infrav1.LoadBalancerFailedReason
		if docker.IsImageError(err) {
			reason = infrav1.LoadBalancerImageFailedReason
		}
		setLoadBalancerCondition(dc, metav1.ConditionFalse, reason, "%v", err)
		return ctrl.Result{}, false, err
	}
	s.lb, s.address = lb, lb.Address(s.network)
	if lb.Pending != "" {
		// Given by the infrastructure cluster, maybe never: looked at again, not at once.
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerWaitingForAddressReason, "Load balancer %s has no address yet: %s", lb.Name, lb.Pending)
		return ctrl.Result{RequeueAfter: 5 * time.Second}, false, nil
	}
	if !lb.Running || s.address == "" {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerStartingReason, "Load balancer %s is %s", lb.Name, lb.State)
		return ctrl.Result{RequeueAfter: time.Second}, false, nil
	}
	r.keepHostPort(s)

	tmpl, err := loadBalancerTemplate(ctx, r.Client, dc)
	if err == nil {
		err = moveWithCluster(ctx, r.Client, dc)
	}
	if err == nil {
		_, err = lb.Update(ctx, tmpl, controlPlaneBackends(r.Client, s.nodes, s.key, s.network))
	}
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerConfigFailedReason, "%v", err)
		return ctrl.Result{}, false, err
	}
	return ctrl.Result{}, true, nil
}

// keepHostPort records the host port the running load balancer publishes in
// spec.loadBalancer.hostPort when it is empty (the engine's pick at the first creation, or the
// port a load balancer made before host ports were kept has), so the load balancer is created
// on it from then on; and reports in LoadBalancerHostPortKept whether it publishes the kept
// port. It changes nothing else: the cluster works on another host port, only kubeconfigs
// naming the kept one do not.
func (r *DockyardClusterReconciler) keepHostPort(s *clusterScope) {
	dc := s.dc
	hostIP, published := s.lb.PublishedPort(int(dc.Spec.ControlPlaneEndpoint.Port))
	if published == 0 {
		return
	}
	if dc.Spec.LoadBalancer.HostPort == 0 {
		dc.Spec.LoadBalancer.HostPort = int32(published) //nolint:gosec // a port, at most 65535
	}
	kept := int(dc.Spec.LoadBalancer.HostPort)
	if published == kept {
		setCondition(dc, infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionTrue, infrav1.LoadBalancerHostPortKeptReason, "")
		return
	}
	why := fmt.Sprintf("it was created before that port was kept, on one the engine picked; it moves to port %d the next time it is re-created", kept)
	if s.lb.TakenHostPort == kept {
		why = fmt.Sprintf("another process or container held port %d when the load balancer was created; Dockyard tries it again each time it re-creates the load balancer", kept)
	}
	command := "dockyard get kubeconfig " + s.cluster.Name
	if s.cluster.Namespace != "default" {
		command += " -n " + s.cluster.Namespace
	}
	msg := fmt.Sprintf("The load balancer publishes the API server on %s:%d, not on spec.loadBalancer.hostPort %d: %s. "+
		"Kubeconfigs naming port %d, such as the one written when the cluster was created, fail until the load balancer is back on that port; `%s` prints one for port %d",
		hostIP, published, kept, why, kept, command, published)
	if prev := conditions.Get(dc, infrav1.LoadBalancerHostPortKeptCondition); prev == nil || prev.Message != msg {
		r.Recorder.Event(dc, corev1.EventTypeWarning, infrav1.LoadBalancerHostPortChangedReason, msg)
	}
	setCondition(dc, infrav1.LoadBalancerHostPortKeptCondition, metav1.ConditionFalse, infrav1.LoadBalancerHostPortChangedReason, msg)
}

// reconcileEndpoint publishes the load balancer's address, and the port where it serves the
// API server, as the control plane endpoint.
func (r *DockyardClusterReconciler) reconcileEndpoint(ctx context.Context, s *clusterScope) (ctrl.Result, bool, error) {
	dc := s.dc
	if dc.Spec.ControlPlaneEndpoint.Host == "" {
		dc.Spec.ControlPlaneEndpoint.Host = s.address
		if s.lb.Port != 0 {
			// The port asked for, or the one the in-memory engine's front got instead.
			dc.Spec.ControlPlaneEndpoint.Port = int32(s.lb.Port) //nolint:gosec // a port, at most 65535
		}
	}
	if dc.Spec.ControlPlaneEndpoint.Port == 0 {
		dc.Spec.ControlPlaneEndpoint.Port = infrav1.DefaultAPIServerPort
	}
	if host := dc.Spec.ControlPlaneEndpoint.Host; host != s.address && inSubnets(host, s.subnets) {
		// The endpoint is an address on the cluster network the load balancer no longer has:
		// it was replaced (after it stopped) and the engine gave it another address.
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerAddressChangedReason,
			"The load balancer was replaced and now answers on %s, but the cluster's endpoint is %s, which certificates and kubeconfigs name; recreate the cluster",
			s.address, host)
		return ctrl.Result{}, false, nil
	}
	zones, err := s.nodes.Zones(ctx)
	if err != nil {
		setLoadBalancerCondition(dc, metav1.ConditionFalse, infrav1.LoadBalancerFailedReason, "%v", err)
		return ctrl.Result{}, false, err
	}
	dc.Status.FailureDomains = failureDomains(dc.Spec.FailureDomains, zones)
	if len(zones) > 0 {
		s.zoned = true
	}
	if !ptr.Deref(dc.Status.Initialization.Provisioned, false) {
		r.Recorder.Event(dc, corev1.EventTypeNormal, "LoadBalancerReady", loadBalancerMessage(s.lb, s.address, int(dc.Spec.ControlPlaneEndpoint.Port)))
	}
	dc.Status.Initialization.Provisioned = ptr.To(true)
	// Where it answers is in spec.controlPlaneEndpoint and the LoadBalancerReady event: a True
	// condition carries no message (conditions.go).
	setLoadBalancerCondition(dc, metav1.ConditionTrue, infrav1.LoadBalancerAvailableReason, "")
	return ctrl.Result{}, true, nil
}

// loadBalancerMessage tells where the load balancer answers, on the network and on the host.
func loadBalancerMessage(lb *docker.LoadBalancer, address string, port int) string {
	msg := fmt.Sprintf("Load balancer %s serves %s:%d", lb.Name, address, port)
	if hostIP, hostPort := lb.PublishedPort(port); hostPort != 0 {
		msg += fmt.Sprintf(" (published on %s:%d)", hostIP, hostPort)
	}
	return msg
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
	} else if r := conditions.GetReason(dc, clusterv1.ReadyCondition); r != infrav1.DeletingReason && r != infrav1.InfrastructureUnavailableReason {
		setCondition(dc, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "Deleting the load balancer and network")
	}
	ctx, cancel := patchContext(ctx)
	defer cancel()
	return helper.Patch(ctx, dc, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.ReadyCondition, infrav1.LoadBalancerAvailableCondition, infrav1.LoadBalancerHostPortKeptCondition, clusterv1.PausedCondition,
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
