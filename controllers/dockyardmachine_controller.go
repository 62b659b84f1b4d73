package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

const (
	// defaultBootstrapTimeout bounds the bootstrap data when spec.bootstrapTimeout is unset.
	defaultBootstrapTimeout = 5 * time.Minute
	// Polling intervals while Dockyard waits on something inside a node container.
	nodeBootPoll     = time.Second
	bootstrapPoll    = 2 * time.Second
	workloadNodePoll = 3 * time.Second
	// nodeHealthPoll is how often a provisioned machine checks that its container still
	// runs, so a node stopped outside Dockyard is reported within a minute.
	nodeHealthPoll = time.Minute
	// nodeRuntimeFailedPoll is how often a node whose container runtime cannot run pods is
	// looked at again (it does not recover by itself; the check keeps the condition current).
	nodeRuntimeFailedPoll = 30 * time.Second
	stoppedOutputTail     = 20
)

// DockyardMachineReconciler reconciles DockyardMachines: a node container per Machine that runs
// the Machine's bootstrap data, joins the load balancer when it is a control plane, and gets a
// providerID that its workload cluster Node carries too.
type DockyardMachineReconciler struct {
	Client       client.Client
	ClusterCache clustercache.ClusterCache
	// Engines gives each machine the node layer of the engine its cluster's nodes run on.
	Engines *infrastructure.Engines
	// NodeImageRepository is tagged with the Machine's version when spec.image is empty.
	NodeImageRepository string
	Recorder            record.EventRecorder
	// EngineEvents, when set, wake the reconciler up when a node container starts, stops or
	// vanishes.
	EngineEvents     *docker.EngineEvents
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachines;dockyardmachines/status;dockyardmachines/finalizers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines;machines/status,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools,verbs=get;list;watch
// Secrets (bootstrap data, kubeconfigs) are read with the rules of config/rbac/secrets_role.yaml,
// bound only where the manager reconciles.

// SetupWithManager registers the reconciler: it watches DockyardMachines, their Machines (owner
// references, bootstrap data, deletion), Clusters (pause, infrastructure provisioned) and the
// connections to workload clusters.
func (r *DockyardMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "dockyardmachine")
	clusterToMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.DockyardMachineList{}, mgr.GetScheme())
	if err != nil {
		return errors.Wrap(err, "mapping Clusters to DockyardMachines")
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.DockyardMachine{}).
		Named("dockyardmachine").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("DockyardMachine"))),
		).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(clusterToMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log)),
		).
		// A change of the DockyardCluster's spec (loadImages) reaches its running nodes.
		Watches(&infrav1.DockyardCluster{},
			handler.EnqueueRequestsFromMapFunc(r.dockyardClusterToMachines),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}),
		).
		WatchesRawSource(r.ClusterCache.GetClusterSource("dockyardmachine", clusterToMachines))
	if r.EngineEvents != nil {
		b = b.WatchesRawSource(engineEventSource(r.EngineEvents, r.machineRequests))
	}
	return b.Complete(r)
}

// dockyardClusterToMachines maps a DockyardCluster to the DockyardMachines of its Cluster.
func (r *DockyardMachineReconciler) dockyardClusterToMachines(ctx context.Context, o client.Object) []ctrl.Request {
	name := clusterNameOf(metav1.ObjectMeta{OwnerReferences: o.GetOwnerReferences(), Labels: o.GetLabels()})
	if name == "" {
		return nil
	}
	list := &infrav1.DockyardMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the DockyardMachines of a DockyardCluster", "DockyardCluster", klog.KObj(o))
		return nil
	}
	requests := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
}

// machineScope is what one reconcile of a DockyardMachine works with; the phases fill it in as
// they go.
type machineScope struct {
	dm      *infrav1.DockyardMachine
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	key     docker.ClusterKey
	// dc is the Cluster's DockyardCluster; nil when the Cluster's infrastructure is another kind.
	dc *infrav1.DockyardCluster
	// nodes is the node layer of the engine the cluster's nodes run on, chosen once from dc.
	nodes   *docker.Manager
	network string
	// bootstrapData and version are the Machine's, or for a MachinePool's instance the
	// MachinePool's (Cluster API gives a MachinePool Machine neither).
	bootstrapData *string
	version       string
	// node is the machine's node container, once it exists.
	node *docker.Node
	// plan is the bootstrap data translated for the node, read and parsed at most once per
	// reconcile (see bootstrapPlan).
	plan    *bootstrap.Plan
	planErr error
}

// Reconcile follows the InfraMachine contract (see docs/api.md): it reads the DockyardMachine,
// its owner Machine and its Cluster, begins (pause, finalizer, one deferred patch), then deletes
// or runs the phases of reconcileNormal.
func (r *DockyardMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	log := ctrl.LoggerFrom(ctx)
	dm := &infrav1.DockyardMachine{}
	if found, err := getTarget(ctx, r.Client, req.NamespacedName, dm); !found || err != nil {
		return ctrl.Result{}, err
	}
	machine, err := util.GetOwnerMachine(ctx, r.Client, dm.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, errors.Wrapf(err, "getting the owner Machine of DockyardMachine %s", req.NamespacedName)
	}
	if machine != nil {
		log = log.WithValues("Machine", klog.KObj(machine))
	}
	clusterName := dm.Labels[clusterv1.ClusterNameLabel]
	if clusterName == "" && machine != nil {
		clusterName = machine.Spec.ClusterName
	}
	cluster, err := clusterByName(ctx, r.Client, dm.Namespace, clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if clusterName != "" {
		log = log.WithValues("Cluster", klog.KRef(dm.Namespace, clusterName))
	}
	ctx = ctrl.LoggerInto(ctx, log)

	helper, stop, err := begin(ctx, r.Client, cluster, dm, infrav1.MachineFinalizer, machine != nil && cluster != nil)
	if stop || err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := patchDockyardMachine(ctx, helper, dm); err != nil {
			rerr = kerrors.NewAggregate([]error{rerr, err})
		}
	}()

	s := &machineScope{dm: dm, machine: machine, cluster: cluster, key: docker.ClusterKey{Namespace: dm.Namespace, Name: clusterName}}
	if !dm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	switch {
	case machine == nil:
		setWaiting(dm, infrav1.WaitingForOwnerMachineReason, "Waiting for the Machine controller to set an owner reference")
		return ctrl.Result{}, nil
	case cluster == nil && clusterName == "":
		setWaiting(dm, infrav1.WaitingForClusterReason, "The DockyardMachine has no cluster.x-k8s.io/cluster-name label")
		return ctrl.Result{}, nil
	case cluster == nil:
		setWaiting(dm, infrav1.WaitingForClusterReason, fmt.Sprintf("Waiting for Cluster %s to exist", clusterName))
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

// machinePhase is one step of reconcileNormal; next is false when the reconcile ends with it
// (its conditions say why, its result when to look again).
type machinePhase func(ctx context.Context, s *machineScope) (result ctrl.Result, next bool, err error)

// reconcileNormal runs the phases of a machine in order, each owning its conditions:
//
//  1. prerequisites (ContainerProvisioned waits): the bootstrap data's source, the Cluster's
//     infrastructure and network; a Machine being deleted only leaves the load balancer;
//  2. container (ContainerProvisioned): the node container created once (one that vanished
//     after provisioning is reported, never recreated behind the user's back), started,
//     systemd and containerd up, preLoadImages loaded;
//  3. load balancer: a control plane node joins before its bootstrap runs (kubeadm reaches
//     the new API server through the endpoint; health checks keep it out of the rotation
//     until it answers);
//  4. bootstrap (BootstrapSucceeded): waits for the bootstrap data with the node up (a
//     worker's comes once the control plane is initialized), then runs it once, in the
//     background in the node, no sooner than the dockyard.x-k8s.io/boot-delay annotation says;
//  5. provisioned: providerID, addresses, failure domain, initialization.provisioned, and the
//     workload cluster Node's providerID;
//  6. faults: the services the dockyard.x-k8s.io/stop annotation lists stopped in the node,
//     the others it stopped started again (status.stopped).
func (r *DockyardMachineReconciler) reconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	for _, phase := range []machinePhase{r.reconcilePrerequisites, r.reconcileContainer, r.reconcileLoadBalancer, r.reconcileBootstrap, r.reconcileProvisioned, r.reconcileFaults} {
		result, next, err := phase(ctx, s)
		if err != nil || !next {
			return result, err
		}
	}
	return ctrl.Result{RequeueAfter: nodeHealthPoll}, nil
}
