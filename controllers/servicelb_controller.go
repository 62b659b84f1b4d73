package controllers

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

// ServiceLoadBalancerReconciler gives every Service of type LoadBalancer in a Dockyard
// workload cluster an address the engine's host reaches, as a cloud provider would: a haproxy
// container on the cluster's network forwards each TCP port to its NodePort on every node
// (docker.ServiceLoadBalancer), and the Service's status.loadBalancer.ingress names the
// container's address. It follows the cluster's Services and Nodes (watched through Cluster
// API's ClusterCache) and removes the containers of Services that are gone or changed type;
// the cluster's deletion removes the rest. Services with a spec.loadBalancerClass are another
// implementation's, and UDP ports are not served (haproxy forwards TCP).
type ServiceLoadBalancerReconciler struct {
	Client       client.Client
	ClusterCache clustercache.ClusterCache
	Nodes        *docker.Manager
	// Image is the haproxy image of the Services' load balancers: the manager's
	// --load-balancer-image.
	Image            string
	Recorder         record.EventRecorder
	WatchFilterValue string

	controller controller.Controller
}

// serviceResync is how often a cluster with Service load balancers is looked at again, to
// catch a container stopped or removed outside Dockyard.
const serviceResync = time.Minute

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager registers the reconciler: it reconciles Clusters whose infrastructure is a
// DockyardCluster, when they change, when their workload cluster connects, and when a Service
// or Node changes in it.
func (r *ServiceLoadBalancerReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "servicelb")
	self := func(_ context.Context, o client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}, builder.WithPredicates(predicate.NewPredicateFuncs(isDockyardCluster))).
		Named("servicelb").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		WatchesRawSource(r.ClusterCache.GetClusterSource("servicelb", self)).
		Build(r)
	if err != nil {
		return errors.Wrap(err, "setting up the Service load balancer controller")
	}
	r.controller = c
	return nil
}

func isDockyardCluster(o client.Object) bool {
	c, ok := o.(*clusterv1.Cluster)
	return ok && c.Spec.InfrastructureRef.Kind == "DockyardCluster" && c.Spec.InfrastructureRef.APIGroup == infrav1.GroupVersion.Group
}

// Reconcile makes the load balancers of a cluster's Services of type LoadBalancer match them.
func (r *ServiceLoadBalancerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isDockyardCluster(cluster) || annotations.IsPaused(cluster, cluster) || !cluster.DeletionTimestamp.IsZero() ||
		!ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false) {
		return ctrl.Result{}, nil // the deletion removes the load balancers with the cluster's containers
	}
	remote, err := r.ClusterCache.GetClient(ctx, req.NamespacedName)
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		log.V(4).Info("Waiting for the connection to the workload cluster")
		return ctrl.Result{RequeueAfter: workloadNodePoll}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.watchWorkload(ctx, req.NamespacedName); err != nil {
		return ctrl.Result{}, err
	}
	dc := &infrav1.DockyardCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.InfrastructureRef.Name}, dc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	key := docker.ClusterKey{Namespace: cluster.Namespace, Name: cluster.Name}
	network, err := clusterNetwork(ctx, r.Nodes, dc, key)
	if err != nil {
		return ctrl.Result{}, err
	}

	services := &corev1.ServiceList{}
	if err := remote.List(ctx, services); err != nil {
		return ctrl.Result{}, errors.Wrap(err, "listing the workload cluster's Services")
	}
	backends, err := serviceBackends(ctx, remote)
	if err != nil {
		return ctrl.Result{}, err
	}
	wanted := map[string]bool{}
	var errs []error
	for i := range services.Items {
		svc := &services.Items[i]
		ports := loadBalancerPorts(svc)
		if ports == nil {
			continue
		}
		name := svc.Namespace + "/" + svc.Name
		wanted[name] = true
		if err := r.serve(ctx, remote, cluster, svc, docker.ServiceLoadBalancerSpec{
			Cluster: key, Service: name, UID: string(svc.UID), Image: orDefault(r.Image, docker.DefaultLoadBalancerImage), Network: network, Ports: ports, Nodes: backends,
		}); err != nil {
			errs = append(errs, err)
		}
	}
	existing, err := r.Nodes.ServiceLoadBalancers(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, lb := range existing {
		if wanted[lb.Service] {
			continue
		}
		if err := r.Nodes.DeleteServiceLoadBalancer(ctx, lb); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("Removed the load balancer of a Service that is gone or no longer of type LoadBalancer", "service", lb.Service, "container", lb.Name)
	}
	if len(errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(errs)
	}
	if len(wanted) > 0 {
		return ctrl.Result{RequeueAfter: serviceResync}, nil
	}
	return ctrl.Result{}, nil
}

// serve makes a Service's load balancer run and publishes its address in the Service's status.
func (r *ServiceLoadBalancerReconciler) serve(ctx context.Context, remote client.Client, cluster *clusterv1.Cluster, svc *corev1.Service, spec docker.ServiceLoadBalancerSpec) error {
	lb, err := r.Nodes.EnsureServiceLoadBalancer(ctx, spec)
	if err != nil {
		r.Recorder.Eventf(cluster, corev1.EventTypeWarning, "ServiceLoadBalancerFailed", "Service %s: %v", spec.Service, err)
		return err
	}
	address := lb.Address(spec.Network)
	if address == "" {
		return errors.Errorf("the load balancer of Service %s has no address on network %s", spec.Service, spec.Network)
	}
	want := []corev1.LoadBalancerIngress{{IP: address, IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
	if slices.EqualFunc(svc.Status.LoadBalancer.Ingress, want, func(a, b corev1.LoadBalancerIngress) bool { return a.IP == b.IP }) {
		return nil
	}
	original := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = want
	if err := remote.Status().Patch(ctx, svc, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "setting the load balancer address of Service %s", spec.Service)
	}
	ctrl.LoggerFrom(ctx).Info("Service load balancer ready", "service", spec.Service, "address", address, "container", lb.Name)
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "ServiceLoadBalancerReady", "Service %s is served on %s", spec.Service, address)
	return nil
}

// loadBalancerPorts are the TCP ports of a Service of type LoadBalancer without another
// implementation's class, with their NodePorts; nil for any other Service.
func loadBalancerPorts(svc *corev1.Service) []docker.ServicePort {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil {
		return nil
	}
	ports := []docker.ServicePort{}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			ports = append(ports, docker.ServicePort{Port: int(p.Port), NodePort: int(p.NodePort)})
		}
	}
	return ports
}

// serviceBackends are the workload cluster's nodes with their IPv4 InternalIP.
func serviceBackends(ctx context.Context, remote client.Client) ([]docker.ServiceBackend, error) {
	nodes := &corev1.NodeList{}
	if err := remote.List(ctx, nodes); err != nil {
		return nil, errors.Wrap(err, "listing the workload cluster's Nodes")
	}
	var out []docker.ServiceBackend
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && ip.Is4() {
				out = append(out, docker.ServiceBackend{Name: n.Name, Address: a.Address})
				break
			}
		}
	}
	return out, nil
}

// watchWorkload watches the workload cluster's Services and Nodes (once per connection).
func (r *ServiceLoadBalancerReconciler) watchWorkload(ctx context.Context, key client.ObjectKey) error {
	toCluster := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})
	for name, kind := range map[string]client.Object{"servicelb-services": &corev1.Service{}, "servicelb-nodes": &corev1.Node{}} {
		if err := r.ClusterCache.Watch(ctx, key, clustercache.NewWatcher(clustercache.WatcherOptions{
			Name: name, Watcher: r.controller, Kind: kind, EventHandler: toCluster,
		})); err != nil {
			return errors.Wrapf(err, "watching the workload cluster's %T", kind)
		}
	}
	return nil
}
