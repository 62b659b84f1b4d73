package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

// ServiceLoadBalancerReconciler gives every Service of type LoadBalancer in a Dockyard
// workload cluster an address the engine's host reaches, as a cloud provider would: a haproxy
// container on the cluster's network forwards each TCP port to its NodePort on every node
// (docker.ServiceLoadBalancer), and the Service's status.loadBalancer.ingress names the
// container's address. It follows the cluster's Services and Nodes (watched through Cluster
// API's ClusterCache) and removes the containers of Services that are gone or changed type;
// the cluster's deletion removes the rest. Services with a spec.loadBalancerClass are another
// implementation's, and UDP ports are not served (haproxy forwards TCP).
//
// A cluster gets at most MaxPerCluster load balancers, so whoever may create Services in it
// cannot fill the engine's host: Services that have one keep it, the oldest others come next,
// and a Service over the cap waits with a Warning Event on it in the workload cluster. A
// container serves only the Service (namespace/name and UID) its labels name, and only names,
// addresses and ports that pkg/haproxy accepts reach its configuration.
type ServiceLoadBalancerReconciler struct {
	Client       client.Client
	ClusterCache clustercache.ClusterCache
	// Engines gives each cluster the node layer of the engine its nodes run on.
	Engines *infrastructure.Engines
	// Image is the haproxy image of the Services' load balancers: the manager's
	// --load-balancer-image.
	Image string
	// MaxPerCluster caps the Service load balancers of one cluster (the manager's
	// --max-service-load-balancers-per-cluster); DefaultMaxServiceLoadBalancersPerCluster when
	// 0. Services over the cap get no container and a Warning Event, and wait for a place.
	MaxPerCluster    int
	Recorder         record.EventRecorder
	WatchFilterValue string

	controller controller.Controller
	events     eventMemo
}

// DefaultMaxServiceLoadBalancersPerCluster is how many Services of type LoadBalancer of one
// workload cluster get a load balancer container when the manager's
// --max-service-load-balancers-per-cluster is not set: whoever may create Services in a
// workload cluster cannot fill the engine's host with containers.
const DefaultMaxServiceLoadBalancersPerCluster = 20

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

// serviceScope is what one reconcile of a cluster's Service load balancers works with; the
// phases fill it in.
type serviceScope struct {
	cluster *clusterv1.Cluster
	key     docker.ClusterKey
	// remote is the workload cluster; nodes the node layer of the engine the cluster runs on,
	// network the cluster's network there.
	remote  client.Client
	nodes   *docker.Manager
	network string
	// backends are the workload cluster's nodes; existing the load balancers there are.
	backends []haproxy.ServiceBackend
	existing []*docker.ServiceLoadBalancer
	// served are the Services that get a load balancer, waiting those over the cap.
	served, waiting []*serviceCandidate
	// errs are what went wrong without stopping the phases after; removalFailed says a
	// load balancer to remove is still there.
	errs          []error
	removalFailed bool
}

// servicePhase is one step of a reconcile of Service load balancers; next is false when the
// reconcile ends with it (its result says when to look again).
type servicePhase func(ctx context.Context, s *serviceScope) (result ctrl.Result, next bool, err error)

// Reconcile makes the load balancers of a cluster's Services of type LoadBalancer match them,
// in phases:
//
//  1. connect: the workload cluster's client, and watches of its Services and Nodes;
//  2. locate: the engine the cluster's nodes run on (its DockyardCluster's), and its network;
//  3. admit: which Services get a load balancer, at most the cap, and which wait;
//  4. remove: the load balancers of Services that are gone, changed type, were re-created or
//     lost their place, first, so the cluster never runs more than its cap;
//  5. serve: a load balancer for each admitted Service (while a removal failed, only those
//     that have one already), its address in the Service's status; waiting Services' emptied.
func (r *ServiceLoadBalancerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isDockyardCluster(cluster) || annotations.IsPaused(cluster, cluster) || !cluster.DeletionTimestamp.IsZero() ||
		!ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false) {
		return ctrl.Result{}, nil // the deletion removes the load balancers with the cluster's containers
	}
	s := &serviceScope{cluster: cluster, key: docker.ClusterKey{Namespace: cluster.Namespace, Name: cluster.Name}}
	for _, phase := range []servicePhase{r.connect, r.locate, r.admitServices, r.removeStale, r.serveAdmitted} {
		result, next, err := phase(ctx, s)
		if err != nil || !next {
			return result, err
		}
	}
	if len(s.errs) > 0 {
		return ctrl.Result{}, kerrors.NewAggregate(s.errs)
	}
	if len(s.served) > 0 {
		return ctrl.Result{RequeueAfter: serviceResync}, nil
	}
	return ctrl.Result{}, nil
}

// connect gets the workload cluster's client and watches its Services and Nodes.
func (r *ServiceLoadBalancerReconciler) connect(ctx context.Context, s *serviceScope) (ctrl.Result, bool, error) {
	key := client.ObjectKeyFromObject(s.cluster)
	remote, err := r.ClusterCache.GetClient(ctx, key)
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		ctrl.LoggerFrom(ctx).V(4).Info("Waiting for the connection to the workload cluster")
		return ctrl.Result{RequeueAfter: workloadNodePoll}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, err
	}
	s.remote = remote
	return ctrl.Result{}, true, r.watchWorkload(ctx, key)
}

// locate finds the engine the cluster's nodes run on and the cluster's network there.
func (r *ServiceLoadBalancerReconciler) locate(ctx context.Context, s *serviceScope) (ctrl.Result, bool, error) {
	dc := &infrav1.DockyardCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: s.cluster.Spec.InfrastructureRef.Name}, dc); err != nil {
		return ctrl.Result{}, false, client.IgnoreNotFound(err)
	}
	var err error
	if s.nodes, err = r.Engines.For(ctx, dc); err != nil {
		return ctrl.Result{}, false, errors.Wrapf(err, "finding the engine of cluster %s", s.key)
	}
	s.network, err = clusterNetwork(ctx, s.nodes, dc, s.key)
	return ctrl.Result{}, err == nil, err
}

// admitServices reads the workload cluster's Services and Nodes and the load balancers there
// are, and chooses the Services that get one (admit).
func (r *ServiceLoadBalancerReconciler) admitServices(ctx context.Context, s *serviceScope) (ctrl.Result, bool, error) {
	services := &corev1.ServiceList{}
	if err := s.remote.List(ctx, services); err != nil {
		return ctrl.Result{}, false, errors.Wrap(err, "listing the workload cluster's Services")
	}
	var err error
	if s.backends, err = r.serviceBackends(ctx, s.remote, s.cluster); err != nil {
		return ctrl.Result{}, false, err
	}
	if s.existing, err = s.nodes.ServiceLoadBalancers(ctx, s.key); err != nil {
		return ctrl.Result{}, false, err
	}
	s.served, s.waiting = r.admit(ctx, s.remote, s.cluster, s.key, services.Items, s.existing)
	return ctrl.Result{}, true, nil
}

// removeStale removes the load balancers no admitted Service has; one that cannot be removed
// keeps new Services from getting one (serveAdmitted).
func (r *ServiceLoadBalancerReconciler) removeStale(ctx context.Context, s *serviceScope) (ctrl.Result, bool, error) {
	admitted := map[lbIdentity]bool{}
	for _, c := range s.served {
		admitted[c.identity()] = true
	}
	for _, lb := range s.existing {
		if admitted[lbIdentity{lb.Name, lb.Service, lb.UID}] {
			continue
		}
		if err := lb.Delete(ctx); err != nil {
			s.errs = append(s.errs, err)
			s.removalFailed = true
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Removed the load balancer of a Service that is gone, re-created, no longer of type LoadBalancer or over the cap",
			"service", lb.Service, "uid", lb.UID, "container", lb.Name)
	}
	return ctrl.Result{}, true, nil
}

// serveAdmitted makes the admitted Services' load balancers run and empties the address of the
// waiting ones.
func (r *ServiceLoadBalancerReconciler) serveAdmitted(ctx context.Context, s *serviceScope) (ctrl.Result, bool, error) {
	for _, c := range s.served {
		if s.removalFailed && !c.held {
			continue
		}
		if err := r.serve(ctx, s.remote, s.cluster, c.svc, s.nodes, docker.ServiceLoadBalancerSpec{
			Cluster: s.key, Service: c.name, UID: string(c.svc.UID), Image: orDefault(r.Image, docker.DefaultLoadBalancerImage),
			Network: s.network, Ports: c.ports, Nodes: s.backends,
		}); err != nil {
			s.errs = append(s.errs, err)
		}
	}
	for _, c := range s.waiting {
		if err := clearIngress(ctx, s.remote, c.svc); err != nil {
			s.errs = append(s.errs, err)
		}
	}
	return ctrl.Result{}, true, nil
}

// serviceCandidate is a Service of type LoadBalancer that Dockyard serves.
type serviceCandidate struct {
	svc *corev1.Service
	// name is "<namespace>/<name>", containerName its load balancer's.
	name, containerName string
	ports               []haproxy.ServicePort
	// held says a load balancer of this Service (name and UID) exists already.
	held bool
}

// lbIdentity is what a Service load balancer serves: its container's name, and the Service's
// namespace/name and UID its labels hold.
type lbIdentity struct{ container, service, uid string }

func (c *serviceCandidate) identity() lbIdentity {
	return lbIdentity{c.containerName, c.name, string(c.svc.UID)}
}

// maxPerCluster is the cap on a cluster's Service load balancers.
func (r *ServiceLoadBalancerReconciler) maxPerCluster() int {
	if r.MaxPerCluster <= 0 {
		return DefaultMaxServiceLoadBalancersPerCluster
	}
	return r.MaxPerCluster
}

// admit chooses the Services that get a load balancer, at most the cap, in a stable and fair
// order: those that have one already, then the oldest (creation time, then namespace/name).
// It skips, with a logged error and an Event, Services whose names or ports could not be put
// in haproxy's configuration, and a Service whose container name (a short hash) another
// Service earlier in the order has. The others wait, each told once by a Warning Event.
func (r *ServiceLoadBalancerReconciler) admit(ctx context.Context, remote client.Client, cluster *clusterv1.Cluster, key docker.ClusterKey,
	services []corev1.Service, existing []*docker.ServiceLoadBalancer) (served, waiting []*serviceCandidate) {
	log := ctrl.LoggerFrom(ctx)
	held := map[lbIdentity]bool{}
	for _, lb := range existing {
		held[lbIdentity{lb.Name, lb.Service, lb.UID}] = true
	}
	var candidates []*serviceCandidate
	for i := range services {
		svc := &services[i]
		ports := loadBalancerPorts(svc)
		if ports == nil {
			continue
		}
		if err := haproxy.ValidateService(svc.Namespace, svc.Name); err != nil {
			// Not a name the API server allows: no Event can name the Service either.
			log.Error(err, "Skipping a Service of type LoadBalancer whose name cannot be configured")
			r.Recorder.Eventf(cluster, corev1.EventTypeWarning, reasonServiceInvalid, "A Service of type LoadBalancer is not served: %v", err)
			continue
		}
		c := &serviceCandidate{svc: svc, name: svc.Namespace + "/" + svc.Name}
		c.containerName = docker.ServiceLoadBalancerName(key, c.name)
		c.held = held[c.identity()]
		seen := map[int]bool{}
		for _, p := range ports {
			err := haproxy.ValidatePort(p)
			if err == nil && seen[p.Port] {
				err = errors.Errorf("port %d is listed twice", p.Port)
			}
			if err != nil {
				log.Error(err, "Skipping a port of a Service of type LoadBalancer", "service", c.name)
				r.serviceEvent(ctx, remote, key, svc, corev1.EventTypeWarning, reasonServicePortSkipped, fmt.Sprintf("A port is not served by the load balancer: %v", err))
				continue
			}
			seen[p.Port] = true
			c.ports = append(c.ports, p)
		}
		if c.ports == nil {
			c.ports = []haproxy.ServicePort{}
		}
		candidates = append(candidates, c)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		a, b := candidates[i], candidates[j]
		if a.held != b.held {
			return a.held
		}
		if !a.svc.CreationTimestamp.Equal(&b.svc.CreationTimestamp) {
			return a.svc.CreationTimestamp.Before(&b.svc.CreationTimestamp)
		}
		return a.name < b.name
	})

	limit := r.maxPerCluster()
	claimed := map[string]string{}
	for _, c := range candidates {
		if other, ok := claimed[c.containerName]; ok {
			if r.serviceEvent(ctx, remote, key, c.svc, corev1.EventTypeWarning, reasonServiceNameCollision, fmt.Sprintf(
				"No load balancer: its container name %s is Service %s's too (a short hash of the name); rename one of them", c.containerName, other)) {
				log.Info("A Service of type LoadBalancer waits: another Service has the same load balancer name", "service", c.name, "other", other, "container", c.containerName)
			}
			waiting = append(waiting, c)
			continue
		}
		if len(served) >= limit {
			if r.serviceEvent(ctx, remote, key, c.svc, corev1.EventTypeWarning, reasonServiceLimit, fmt.Sprintf(
				"No load balancer: the cluster has %d Services of type LoadBalancer served, the most the Dockyard manager allows "+
					"(--max-service-load-balancers-per-cluster); it is served when one of them is deleted or changes type", limit)) {
				log.Info("A Service of type LoadBalancer waits: the cluster has as many Service load balancers as the cap allows", "service", c.name, "max", limit)
			}
			waiting = append(waiting, c)
			continue
		}
		claimed[c.containerName] = c.name
		served = append(served, c)
	}
	return served, waiting
}

// Reasons of the Events on a workload cluster's Services, and on the Cluster for what no
// Service can carry.
const (
	reasonServiceLimit         = "ServiceLoadBalancerLimit"
	reasonServiceNameCollision = "ServiceLoadBalancerNameCollision"
	reasonServicePortSkipped   = "ServiceLoadBalancerPortSkipped"
	reasonServiceInvalid       = "ServiceLoadBalancerInvalidService"
	reasonNodeSkipped          = "ServiceLoadBalancerNodeSkipped"
	reasonServiceReady         = "ServiceLoadBalancerReady"
)

// serviceEventComponent is the source of the Events on a workload cluster's Services.
const serviceEventComponent = "dockyard-servicelb"

// serviceEvent records an Event on a Service in the workload cluster, once per Service UID,
// reason and message: the Event's name is derived from them, so a resync that would say the
// same finds the Event there (or remembered in r.events) and creates nothing; one that expired,
// after the API server's event TTL, is created again. It reports whether it created one;
// failing to is logged, not an error: the Event only tells.
func (r *ServiceLoadBalancerReconciler) serviceEvent(ctx context.Context, remote client.Client, cluster docker.ClusterKey, svc *corev1.Service, eventType, reason, message string) bool {
	sum := sha256.Sum256([]byte(string(svc.UID) + "\x00" + eventType + "\x00" + reason + "\x00" + message))
	name := svc.Name + "." + hex.EncodeToString(sum[:8])
	memo := cluster.String() + "/" + svc.Namespace + "/" + name
	if r.events.seen(memo) {
		return false
	}
	now := metav1.Now()
	event := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: "v1", Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
		},
		Type: eventType, Reason: reason, Message: message,
		Source:         corev1.EventSource{Component: serviceEventComponent},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	err := remote.Create(ctx, event)
	switch {
	case err == nil:
		r.events.remember(memo)
		return true
	case apierrors.IsAlreadyExists(err):
		r.events.remember(memo)
		return false
	default:
		ctrl.LoggerFrom(ctx).Error(err, "Recording an Event on a Service in the workload cluster", "service", svc.Namespace+"/"+svc.Name, "reason", reason)
		return false
	}
}

// eventMemo remembers the Events on workload Services known to exist, so resyncs do not ask
// the API server for each waiting Service again. It forgets them all when it holds
// maxEventMemo, and with the manager: asking again only finds the Event there.
type eventMemo struct {
	mu    sync.Mutex
	names map[string]bool
}

const maxEventMemo = 10000

func (m *eventMemo) seen(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.names[name]
}

func (m *eventMemo) remember(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.names == nil || len(m.names) >= maxEventMemo {
		m.names = map[string]bool{}
	}
	m.names[name] = true
}

// clearIngress empties the status.loadBalancer of a Service that has no load balancer.
func clearIngress(ctx context.Context, remote client.Client, svc *corev1.Service) error {
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		return nil
	}
	original := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = nil
	if err := remote.Status().Patch(ctx, svc, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
		return errors.Wrapf(err, "clearing the load balancer address of Service %s/%s", svc.Namespace, svc.Name)
	}
	return nil
}

// serve makes a Service's load balancer run and publishes its address in the Service's status.
func (r *ServiceLoadBalancerReconciler) serve(ctx context.Context, remote client.Client, cluster *clusterv1.Cluster, svc *corev1.Service, nodes *docker.Manager, spec docker.ServiceLoadBalancerSpec) error {
	lb, err := nodes.EnsureServiceLoadBalancer(ctx, spec)
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
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, reasonServiceReady, "Service %s is served on %s", spec.Service, address)
	r.serviceEvent(ctx, remote, spec.Cluster, svc, corev1.EventTypeNormal, reasonServiceReady, fmt.Sprintf("Served by a load balancer on %s", address))
	return nil
}

// loadBalancerPorts are the TCP ports of a Service of type LoadBalancer without another
// implementation's class, with their NodePorts; nil for any other Service.
func loadBalancerPorts(svc *corev1.Service) []haproxy.ServicePort {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil {
		return nil
	}
	ports := []haproxy.ServicePort{}
	for _, p := range svc.Spec.Ports {
		if p.NodePort != 0 && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			ports = append(ports, haproxy.ServicePort{Port: int(p.Port), NodePort: int(p.NodePort)})
		}
	}
	return ports
}

// serviceBackends are the workload cluster's nodes with their IPv4 InternalIP. A node whose
// name or InternalIP could not be put in haproxy's configuration is skipped, with a logged
// error and an Event on the Cluster (the Event cannot name an invalid Node).
func (r *ServiceLoadBalancerReconciler) serviceBackends(ctx context.Context, remote client.Client, cluster *clusterv1.Cluster) ([]haproxy.ServiceBackend, error) {
	nodes := &corev1.NodeList{}
	if err := remote.List(ctx, nodes); err != nil {
		return nil, errors.Wrap(err, "listing the workload cluster's Nodes")
	}
	log := ctrl.LoggerFrom(ctx)
	skip := func(err error) {
		log.Error(err, "Skipping a node the Service load balancers cannot forward to")
		r.Recorder.Eventf(cluster, corev1.EventTypeWarning, reasonNodeSkipped, "Service load balancers skip a node: %v", err)
	}
	var out []haproxy.ServiceBackend
	for _, n := range nodes.Items {
		if err := haproxy.ValidateNodeName(n.Name); err != nil {
			skip(err)
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP {
				continue
			}
			b := haproxy.ServiceBackend{Name: n.Name, Address: a.Address}
			if err := haproxy.ValidateBackend(b); err != nil {
				skip(err)
				continue
			}
			if netip.MustParseAddr(a.Address).Is4() {
				out = append(out, b)
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
