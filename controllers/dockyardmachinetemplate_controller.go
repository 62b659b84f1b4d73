package controllers

import (
	"context"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
	"github.com/dockyard-dev/dockyard/docker"
)

const (
	// DefaultMaxPods is the kubelet's default maxPods, the pods capacity of a node made from a
	// template: Dockyard does not configure the kubelet (the bootstrap provider does).
	DefaultMaxPods = 110
	// nodeOperatingSystem is the operating system of every node: node images are Linux.
	nodeOperatingSystem = "linux"
	// templateResync is how often a template's status is computed again, so that a change of
	// the engine's host (more memory, another engine) shows without a change of the template.
	templateResync = 10 * time.Minute
)

// DockyardMachineTemplateReconciler publishes in a DockyardMachineTemplate's status what a node
// made from it would look like (capacity and nodeInfo), for the cluster autoscaler's scale from
// zero (Cluster API's InfraMachineTemplate contract).
type DockyardMachineTemplateReconciler struct {
	Client client.Client
	// Engines gives the node layer of the engine a cluster's nodes run on, whose hosts size
	// nodes without limits.
	Engines          *infrastructure.Engines
	WatchFilterValue string
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachinetemplates;dockyardmachinetemplates/status,verbs=get;list;watch;update;patch

// SetupWithManager registers the reconciler: it watches DockyardMachineTemplates (their spec is
// immutable, so creation, annotations and the periodic resync are what wake it up).
func (r *DockyardMachineTemplateReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "dockyardmachinetemplate")
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.DockyardMachineTemplate{},
			// Not the status updates of its own patches.
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})),
		).
		Named("dockyardmachinetemplate").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Complete(r)
}

// Reconcile computes the template's status.capacity and status.nodeInfo and patches them once.
// When the engine does not answer, the status is left as it is and the template retried.
func (r *DockyardMachineTemplateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	log := ctrl.LoggerFrom(ctx)

	t := &infrav1.DockyardMachineTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, errors.Wrapf(err, "getting DockyardMachineTemplate %s", req.NamespacedName)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	// A template of a cluster (ClusterClass and clusterctl label theirs) pauses with it.
	name := t.Labels[clusterv1.ClusterNameLabel]
	if name != "" {
		log = log.WithValues("Cluster", klog.KRef(t.Namespace, name))
		ctx = ctrl.LoggerInto(ctx, log)
	}
	cluster, err := clusterByName(ctx, r.Client, t.Namespace, name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if annotations.HasPaused(t) || (cluster != nil && ptr.Deref(cluster.Spec.Paused, false)) {
		log.V(4).Info("DockyardMachineTemplate or its Cluster is paused, not updating its status")
		return ctrl.Result{}, nil
	}

	helper, err := patch.NewHelper(t, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		patchCtx, cancel := patchContext(ctx)
		defer cancel()
		if err := helper.Patch(patchCtx, t); err != nil {
			rerr = kerrors.NewAggregate([]error{rerr, errors.Wrapf(err, "patching DockyardMachineTemplate %s", req.NamespacedName)})
		}
	}()

	// A cluster's template is sized on the engine its nodes run on (its infrastructure
	// cluster); a template of no cluster (a ClusterClass's) on the manager's.
	nodes, err := r.engineOf(ctx, t.Namespace, name, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	info, err := nodes.HostInfo(ctx)
	if err != nil {
		// Nothing changed: the deferred patch writes nothing, the status stays what it was.
		return ctrl.Result{}, errors.Wrap(err, "sizing the template's nodes")
	}
	capacity, nodeInfo, err := templateNode(t.Spec.Template.Spec.Resources, info)
	if err != nil {
		return ctrl.Result{}, err
	}
	t.Status.Capacity = capacity
	t.Status.NodeInfo = nodeInfo
	return ctrl.Result{RequeueAfter: templateResync}, nil
}

// engineOf is the node layer of the engine the nodes of cluster name run on: its
// DockyardCluster's infrastructure, found by the Cluster's infrastructureRef or, before the
// Cluster is there (a template applied with it), by the cluster-name label; the manager's own
// for no cluster, or one whose infrastructure is another kind.
func (r *DockyardMachineTemplateReconciler) engineOf(ctx context.Context, namespace, name string, cluster *clusterv1.Cluster) (*docker.Manager, error) {
	if name == "" || (cluster != nil && !isDockyardCluster(cluster)) {
		return r.Engines.Host(), nil
	}
	list := &infrav1.DockyardClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return nil, errors.Wrapf(err, "listing the DockyardClusters of cluster %s", name)
	}
	for i := range list.Items {
		if dc := &list.Items[i]; cluster == nil || dc.Name == cluster.Spec.InfrastructureRef.Name {
			return r.Engines.For(ctx, dc)
		}
	}
	return r.Engines.Host(), nil
}

// templateNode is the capacity and node info of a node with the given limits on an engine's
// host: a limit where the template sets one, the host's CPUs and memory where it does not (a
// container without limits uses the whole host, and its kubelet reports the host's numbers).
func templateNode(res infrav1.NodeResources, info docker.HostInfo) (corev1.ResourceList, infrav1.NodeInfo, error) {
	capacity := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(DefaultMaxPods, resource.DecimalSI)}
	switch {
	case res.CPU != nil:
		capacity[corev1.ResourceCPU] = res.CPU.DeepCopy()
	case info.CPUs > 0:
		capacity[corev1.ResourceCPU] = *resource.NewQuantity(int64(info.CPUs), resource.DecimalSI)
	default:
		return nil, infrav1.NodeInfo{}, errors.Errorf("the container engine (%s) reports %d CPUs of its host", info.Engine, info.CPUs)
	}
	switch {
	case res.Memory != nil:
		capacity[corev1.ResourceMemory] = res.Memory.DeepCopy()
	case info.MemoryBytes > 0:
		capacity[corev1.ResourceMemory] = *resource.NewQuantity(info.MemoryBytes, resource.BinarySI)
	default:
		return nil, infrav1.NodeInfo{}, errors.Errorf("the container engine (%s) reports %d bytes of memory of its host", info.Engine, info.MemoryBytes)
	}
	nodeInfo := infrav1.NodeInfo{OperatingSystem: nodeOperatingSystem}
	switch arch := infrav1.Architecture(info.Arch); arch {
	case infrav1.ArchitectureAmd64, infrav1.ArchitectureArm64, infrav1.ArchitectureS390x, infrav1.ArchitecturePpc64le:
		nodeInfo.Architecture = arch
	}
	return capacity, nodeInfo, nil
}
