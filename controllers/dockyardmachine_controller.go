package controllers

import (
	"context"
	"fmt"
	"strings"
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
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/labels"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/paused"
	"sigs.k8s.io/cluster-api/util/predicates"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
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
	Nodes        *docker.Manager
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
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// SetupWithManager registers the reconciler: it watches DockyardMachines, their Machines (owner
// references, bootstrap data, deletion), Clusters (pause, infrastructure provisioned) and the
// connections to workload clusters.
func (r *DockyardMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx).WithValues("controller", "dockyardmachine")
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.DockyardMachine{}).
		Named("dockyardmachine").
		WithOptions(options).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue)).
		Watches(&clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("DockyardMachine"))),
		).
		Watches(&clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(r.clusterToDockyardMachines),
			builder.WithPredicates(predicates.ClusterPausedTransitionsOrInfrastructureProvisioned(mgr.GetScheme(), log)),
		).
		WatchesRawSource(r.ClusterCache.GetClusterSource("dockyardmachine", r.clusterToDockyardMachines))
	if r.EngineEvents != nil {
		b = b.WatchesRawSource(engineEventSource(r.EngineEvents, r.machineRequests))
	}
	return b.Complete(r)
}

// machineScope is what one reconcile of a DockyardMachine works with.
type machineScope struct {
	dm      *infrav1.DockyardMachine
	machine *clusterv1.Machine
	cluster *clusterv1.Cluster
	key     docker.ClusterKey
	network string
	// bootstrapData and version are the Machine's, or for a MachinePool's instance the
	// MachinePool's (Cluster API gives a MachinePool Machine neither).
	bootstrapData *string
	version       string
}

// Reconcile follows the InfraMachine contract, step by step (see docs/api.md): owner Machine,
// Cluster, pause, finalizer, infrastructure provisioned, bootstrap data, node container and
// bootstrap, load balancer, providerID and status; one deferred patch writes it all.
func (r *DockyardMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, rerr error) {
	log := ctrl.LoggerFrom(ctx)

	dm := &infrav1.DockyardMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, dm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, errors.Wrapf(err, "getting DockyardMachine %s", req.NamespacedName)
	}

	// The owner Machine and the Cluster; either may be missing (not yet, or gone while the
	// DockyardMachine is deleted).
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

	// 3. Paused: by the Cluster or by the object's own annotation.
	if isPaused, requeue, err := paused.EnsurePausedCondition(ctx, r.Client, cluster, dm); err != nil || isPaused || requeue {
		return ctrl.Result{}, err
	}

	// 4. The finalizer, once the owner and the cluster are known.
	if machine != nil && cluster != nil {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, dm, infrav1.MachineFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}

	helper, err := patch.NewHelper(dm, r.Client)
	if err != nil {
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

	// 1. No owner Machine yet: the Machine controller sets it.
	if machine == nil {
		setWaiting(dm, infrav1.WaitingForOwnerMachineReason, "Waiting for the Machine controller to set an owner reference")
		return ctrl.Result{}, nil
	}
	// 2. The Cluster must exist.
	if cluster == nil {
		if clusterName == "" {
			setWaiting(dm, infrav1.WaitingForClusterReason, "The DockyardMachine has no cluster.x-k8s.io/cluster-name label")
		} else {
			setWaiting(dm, infrav1.WaitingForClusterReason, fmt.Sprintf("Waiting for Cluster %s to exist", clusterName))
		}
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

func (r *DockyardMachineReconciler) reconcileNormal(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	dm, machine, cluster := s.dm, s.machine, s.cluster
	if done, err := r.bootstrapSource(ctx, s); err != nil || done {
		return ctrl.Result{}, err
	}

	// 5. The cluster's infrastructure (network, load balancer) must be ready.
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setWaiting(dm, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("Waiting for the infrastructure of Cluster %s (%s %s) to be provisioned",
				cluster.Name, cluster.Spec.InfrastructureRef.Kind, cluster.Spec.InfrastructureRef.Name))
		return ctrl.Result{}, nil
	}
	dc, err := r.dockyardCluster(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.network, err = clusterNetwork(ctx, r.Nodes, dc, s.key); err != nil {
		return ctrl.Result{}, err
	}

	node, err := r.Nodes.FindNode(ctx, s.key, dm.Name)
	if err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "%v", err)
		return ctrl.Result{}, err
	}

	// A Machine on its way out only leaves the load balancer; nothing new is started for it.
	if !machine.DeletionTimestamp.IsZero() {
		if node != nil && util.IsControlPlaneMachine(machine) {
			return ctrl.Result{}, r.updateLoadBalancer(ctx, s, dc)
		}
		return ctrl.Result{}, nil
	}

	// 6. Bootstrap data. Workers get theirs once the control plane is initialized.
	if s.bootstrapData == nil {
		if !util.IsControlPlaneMachine(machine) && !ptr.Deref(cluster.Status.Initialization.ControlPlaneInitialized, false) {
			setWaiting(dm, infrav1.WaitingForControlPlaneInitializedReason,
				"Waiting for the control plane to be initialized before the worker's bootstrap data can exist")
		} else {
			setWaiting(dm, infrav1.WaitingForBootstrapDataReason, "Waiting for the bootstrap provider to write the Machine's bootstrap data")
		}
		return ctrl.Result{}, nil
	}

	// 7a. The node container: created once; one that vanished after provisioning is reported,
	// never recreated behind the user's back. (One removed earlier is recreated: it mounts the
	// old /var volume, whose bootstrap lock stops kubeadm from running twice.)
	if node == nil {
		if ptr.Deref(dm.Status.Initialization.Provisioned, false) {
			return r.reportVanished(ctx, s)
		}
		if node, err = r.createNode(ctx, s); err != nil || node == nil {
			return ctrl.Result{}, err
		}
	}
	switch {
	case node.State() == "created":
		// Created but never started (the manager stopped in between): start it now.
		if err := node.Start(ctx); err != nil {
			setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "Starting node container %s: %v", node.Name, err)
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: nodeBootPoll}, nil
	case !node.Running():
		return r.reportStopped(ctx, s, node)
	}

	state, err := node.Check(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if state.Failed {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.NodeRuntimeFailedReason, "%s", state.Detail)
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForContainerReason, "The bootstrap data waits for a node container that can run pods")
		r.Recorder.Event(dm, corev1.EventTypeWarning, infrav1.NodeRuntimeFailedReason, state.Detail)
		return ctrl.Result{RequeueAfter: nodeRuntimeFailedPoll}, nil
	}
	if !state.Ready {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerStartingReason, "Node container %s is booting: %s", node.Name, state.Detail)
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForContainerReason, "Waiting for systemd and containerd in the node container")
		return ctrl.Result{RequeueAfter: nodeBootPoll}, nil
	}
	if err := node.PreloadImages(ctx, dm.Spec.PreLoadImages); err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.PreloadFailedReason, "%v", err)
		return ctrl.Result{}, err
	}
	setContainerCondition(dm, metav1.ConditionTrue, infrav1.ContainerProvisionedReason, "")

	// 8. A control plane node joins the load balancer before its bootstrap runs: kubeadm
	// reaches the new API server through the endpoint. Health checks keep it out of the
	// rotation until its API server answers.
	if util.IsControlPlaneMachine(machine) {
		if err := r.updateLoadBalancer(ctx, s, dc); err != nil {
			return ctrl.Result{}, err
		}
	}

	// 7b. The bootstrap data runs in the background inside the node.
	if result, done, err := r.reconcileBootstrap(ctx, s, node); err != nil || !done {
		return result, err
	}

	// 9. providerID, addresses, failure domain, provisioned.
	dm.Spec.ProviderID = infrav1.ProviderIDPrefix + node.Name
	dm.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: node.Hostname()}}
	for _, address := range node.Addresses(s.network) {
		dm.Status.Addresses = append(dm.Status.Addresses,
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: address},
			clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: address})
	}
	dm.Status.FailureDomain = machine.Spec.FailureDomain
	if !ptr.Deref(dm.Status.Initialization.Provisioned, false) {
		log.Info("Machine provisioned", "providerID", dm.Spec.ProviderID)
	}
	dm.Status.Initialization.Provisioned = ptr.To(true)

	// No cloud controller sets the Node's providerID for containers; Dockyard does, so
	// Cluster API can match the Machine with its Node.
	if !machine.Status.NodeRef.IsDefined() {
		return r.setNodeProviderID(ctx, s, node.Hostname())
	}
	return ctrl.Result{RequeueAfter: nodeHealthPoll}, nil
}

// bootstrapSource sets the scope's bootstrap data secret and version: the Machine's, or for an
// instance of a MachinePool (labelled with the pool's name) the MachinePool's, since Cluster API
// makes MachinePool Machines without either. done is true when the MachinePool is gone: nothing
// is created for it.
func (r *DockyardMachineReconciler) bootstrapSource(ctx context.Context, s *machineScope) (done bool, err error) {
	if !labels.IsMachinePoolOwned(s.dm) {
		s.bootstrapData, s.version = s.machine.Spec.Bootstrap.DataSecretName, s.machine.Spec.Version
		return false, nil
	}
	mp, err := util.GetMachinePoolByLabels(ctx, r.Client, s.dm.Namespace, s.dm.Labels)
	if err != nil {
		return false, errors.Wrapf(err, "getting the MachinePool of DockyardMachine %s", s.dm.Name)
	}
	if mp == nil {
		setWaiting(s.dm, infrav1.WaitingForBootstrapDataReason, fmt.Sprintf("The MachinePool named by label %s does not exist", clusterv1.MachinePoolNameLabel))
		return true, nil
	}
	s.bootstrapData, s.version = mp.Spec.Template.Spec.Bootstrap.DataSecretName, mp.Spec.Template.Spec.Version
	return false, nil
}

// createNode creates the node container; it returns nil and sets conditions when it cannot.
func (r *DockyardMachineReconciler) createNode(ctx context.Context, s *machineScope) (*docker.Node, error) {
	dm, machine := s.dm, s.machine
	image, err := r.nodeImage(dm, s.version)
	if err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ImageFailedReason, "%v", err)
		return nil, nil
	}
	role := docker.RoleWorker
	if util.IsControlPlaneMachine(machine) {
		role = docker.RoleControlPlane
	}
	spec := docker.NodeSpec{
		Cluster: s.key, Machine: dm.Name, Image: image, Role: role, Network: s.network,
	}
	if q := dm.Spec.Resources.CPU; q != nil {
		spec.Resources.NanoCPUs = q.MilliValue() * 1_000_000
	}
	if q := dm.Spec.Resources.Memory; q != nil {
		spec.Resources.MemoryBytes = q.Value()
	}
	for _, m := range dm.Spec.ExtraMounts {
		spec.ExtraMounts = append(spec.ExtraMounts, docker.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	if err := r.Nodes.Allowed(spec.Image, spec.ExtraMounts); err != nil {
		// Retrying cannot help; the manager reconciles everything again when it restarts with
		// another policy.
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.NotAllowedReason, "%v", err)
		return nil, nil
	}
	if err := r.Nodes.EnsureImage(ctx, image); err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ImageFailedReason, "%v", err)
		return nil, err
	}
	node, err := r.Nodes.AddNode(ctx, spec)
	if err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "Creating node container %s: %v", spec.Name(), err)
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("Created node container", "container", node.Name, "image", image)
	r.Recorder.Eventf(dm, corev1.EventTypeNormal, "NodeCreated", "Created node container %s from %s", node.Name, image)
	return node, nil
}

func (r *DockyardMachineReconciler) nodeImage(dm *infrav1.DockyardMachine, version string) (string, error) {
	if dm.Spec.Image != "" {
		return dm.Spec.Image, nil
	}
	if version == "" {
		return "", errors.New("the Machine (or its MachinePool) has no spec.version and the DockyardMachine no spec.image: Dockyard cannot pick a node image")
	}
	repo := r.NodeImageRepository
	if repo == "" {
		repo = docker.DefaultNodeImageRepository
	}
	if !strings.HasPrefix(version, "v") {
		version = "v" + version
	}
	return repo + ":" + version, nil
}

// reconcileBootstrap starts the bootstrap data in the node and follows it. done is true once
// it succeeded.
func (r *DockyardMachineReconciler) reconcileBootstrap(ctx context.Context, s *machineScope, node *docker.Node) (result ctrl.Result, done bool, err error) {
	dm := s.dm
	timeout := defaultBootstrapTimeout
	if dm.Spec.BootstrapTimeout != nil {
		timeout = dm.Spec.BootstrapTimeout.Duration
	}
	status, err := node.BootstrapStatus(ctx, timeout)
	if err != nil {
		return ctrl.Result{}, false, err
	}

	switch status.Phase {
	case docker.BootstrapNotStarted:
		plan, err := r.bootstrapPlan(ctx, s, node.Hostname())
		if err != nil {
			setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootstrapDataInvalidReason, "%v", err)
			r.Recorder.Eventf(dm, corev1.EventTypeWarning, "BootstrapDataInvalid", "%v", err)
			// Nothing to retry until the data changes, which updates the Machine.
			return ctrl.Result{}, false, nil
		}
		if err := node.StartBootstrap(ctx, plan, timeout); err != nil {
			return ctrl.Result{}, false, err
		}
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootstrapRunningReason, "Running %d bootstrap steps in node %s%s",
			len(plan.Steps), node.Name, ignoredNote(plan))
		r.Recorder.Eventf(dm, corev1.EventTypeNormal, "BootstrapStarted", "Started the bootstrap data in node %s", node.Name)
		return ctrl.Result{RequeueAfter: bootstrapPoll}, false, nil

	case docker.BootstrapRunning:
		elapsed := time.Since(status.StartedAt).Round(time.Second)
		if !status.StartedAt.IsZero() && elapsed > timeout+30*time.Second {
			// systemd's RuntimeMaxSec should have stopped it; make sure.
			if err := node.StopBootstrap(ctx); err != nil {
				return ctrl.Result{}, false, err
			}
		}
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.BootstrapRunningReason, "Running bootstrap step %d in node %s for %s",
			status.Step, node.Name, elapsed)
		return ctrl.Result{RequeueAfter: bootstrapPoll}, false, nil

	case docker.BootstrapSucceeded:
		if !conditions.IsTrue(dm, infrav1.BootstrapSucceededCondition) {
			note := ""
			if plan, err := r.bootstrapPlan(ctx, s, node.Hostname()); err == nil {
				note = ignoredNote(plan)
			}
			setBootstrapCondition(dm, metav1.ConditionTrue, infrav1.BootstrapSucceededReason, "")
			r.Recorder.Eventf(dm, corev1.EventTypeNormal, "BootstrapSucceeded", "Bootstrap data ran in node %s%s", node.Name, note)
		}
		return ctrl.Result{}, true, nil
	}

	// Failed, timed out or interrupted: kubeadm must not run twice in one node, so this is
	// final for the node. A MachineHealthCheck (or the user) replaces the Machine.
	step := fmt.Sprintf("step %d", status.Step)
	if plan, err := r.bootstrapPlan(ctx, s, node.Hostname()); err == nil && status.Step >= 1 && status.Step <= len(plan.Steps) {
		step = fmt.Sprintf("step %d/%d (%s)", status.Step, len(plan.Steps), describeStep(plan.Steps[status.Step-1]))
	}
	var reason, msg string
	switch status.Phase {
	case docker.BootstrapTimedOut:
		reason = infrav1.BootstrapTimedOutReason
		msg = fmt.Sprintf("Bootstrap did not finish within %s; it was at %s", timeout, step)
	case docker.BootstrapInterrupted:
		reason = infrav1.BootstrapInterruptedReason
		msg = fmt.Sprintf("Bootstrap stopped at %s when the node restarted; it is not run again. Delete the Machine to replace it", step)
	default:
		reason = infrav1.BootstrapFailedReason
		msg = fmt.Sprintf("Bootstrap %s exited %d", step, status.ExitCode)
		if status.MissingSentinel != "" {
			msg = fmt.Sprintf("Bootstrap finished at %s without writing %s, Cluster API's sign that kubeadm succeeded", step, status.MissingSentinel)
		}
	}
	if status.Output != "" {
		msg += "; output:\n" + status.Output
	}
	if conditions.GetReason(dm, infrav1.BootstrapSucceededCondition) != reason {
		r.Recorder.Eventf(dm, corev1.EventTypeWarning, reason, "%s", msg)
	}
	setBootstrapCondition(dm, metav1.ConditionFalse, reason, "%s", msg)
	return ctrl.Result{}, false, nil
}

// bootstrapPlan reads the Machine's bootstrap data secret and translates it for the node.
func (r *DockyardMachineReconciler) bootstrapPlan(ctx context.Context, s *machineScope, hostname string) (*bootstrap.Plan, error) {
	name := ptr.Deref(s.bootstrapData, "")
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.dm.Namespace, Name: name}, secret); err != nil {
		return nil, errors.Wrapf(err, "reading bootstrap data secret %s", name)
	}
	value, ok := secret.Data["value"]
	if !ok {
		return nil, errors.Errorf("bootstrap data secret %s has no \"value\" key", name)
	}
	format := bootstrap.Format(secret.Data["format"])
	if format == "" {
		format = bootstrap.FormatCloudConfig
	}
	plan, err := bootstrap.Parse(format, value, bootstrap.Options{Hostname: hostname})
	if err != nil {
		return nil, errors.Wrapf(err, "translating the %s bootstrap data of secret %s", format, name)
	}
	return plan, nil
}

func describeStep(step bootstrap.Step) string {
	if step.File != nil {
		return "writing " + step.File.Path
	}
	cmd := bootstrap.Redact(step.Command.String())
	if len(cmd) > 200 {
		cmd = cmd[:200] + "..."
	}
	return cmd
}

func ignoredNote(plan *bootstrap.Plan) string {
	if len(plan.Ignored) == 0 {
		return ""
	}
	return "; ignored what a container cannot honour: " + strings.Join(plan.Ignored, ", ")
}

// updateLoadBalancer puts the cluster's running, not leaving, control plane nodes behind the
// load balancer.
func (r *DockyardMachineReconciler) updateLoadBalancer(ctx context.Context, s *machineScope, dc *infrav1.DockyardCluster) error {
	if dc == nil {
		return nil
	}
	lb, err := r.Nodes.FindLoadBalancer(ctx, s.key)
	if err != nil || lb == nil || !lb.Running() {
		return err // no load balancer (being replaced or deleted): the cluster reconciler renders it
	}
	tmpl, err := loadBalancerTemplate(ctx, r.Client, dc)
	if err != nil {
		return err
	}
	changed, err := lb.Update(ctx, tmpl, controlPlaneBackends(r.Client, r.Nodes, s.key, s.network))
	if err != nil {
		return errors.Wrap(err, "updating the cluster's load balancer")
	}
	if changed {
		ctrl.LoggerFrom(ctx).Info("Updated the load balancer's control plane backends")
	}
	return nil
}

// setNodeProviderID sets the providerID on the workload cluster's Node named like the node's
// hostname (kubelet registers it under that name).
func (r *DockyardMachineReconciler) setNodeProviderID(ctx context.Context, s *machineScope, nodeName string) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	remote, err := r.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(s.cluster))
	if err != nil {
		if errors.Is(err, clustercache.ErrClusterNotConnected) {
			log.V(4).Info("Waiting for the connection to the workload cluster to set the Node's providerID")
			return ctrl.Result{RequeueAfter: workloadNodePoll}, nil
		}
		return ctrl.Result{}, err
	}
	node := &corev1.Node{}
	if err := remote.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			log.V(4).Info("Waiting for the kubelet to register the Node", "node", nodeName)
			return ctrl.Result{RequeueAfter: workloadNodePoll}, nil
		}
		return ctrl.Result{}, errors.Wrapf(err, "getting Node %s in the workload cluster", nodeName)
	}
	switch node.Spec.ProviderID {
	case s.dm.Spec.ProviderID:
		return ctrl.Result{RequeueAfter: nodeHealthPoll}, nil
	case "":
		original := node.DeepCopy()
		node.Spec.ProviderID = s.dm.Spec.ProviderID
		if err := remote.Patch(ctx, node, client.MergeFrom(original)); err != nil {
			return ctrl.Result{}, errors.Wrapf(err, "setting the providerID of Node %s", nodeName)
		}
		log.Info("Set the Node's providerID", "node", nodeName, "providerID", s.dm.Spec.ProviderID)
		return ctrl.Result{RequeueAfter: nodeHealthPoll}, nil
	default:
		return ctrl.Result{}, errors.Errorf("Node %s already has providerID %s, not %s", nodeName, node.Spec.ProviderID, s.dm.Spec.ProviderID)
	}
}

func (r *DockyardMachineReconciler) reportVanished(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	name := strings.TrimPrefix(s.dm.Spec.ProviderID, infrav1.ProviderIDPrefix) // the container it was
	msg := fmt.Sprintf("Node container %s was removed outside Dockyard; it is not recreated. Delete the Machine (or let a MachineHealthCheck remediate it) to replace it", name)
	if conditions.GetReason(s.dm, infrav1.ContainerProvisionedCondition) != infrav1.ContainerNotFoundReason {
		ctrl.LoggerFrom(ctx).Info("Node container vanished", "container", name)
		r.Recorder.Event(s.dm, corev1.EventTypeWarning, infrav1.ContainerNotFoundReason, msg)
	}
	setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.ContainerNotFoundReason, "%s", msg)
	return ctrl.Result{}, nil
}

func (r *DockyardMachineReconciler) reportStopped(ctx context.Context, s *machineScope, node *docker.Node) (ctrl.Result, error) {
	msg := fmt.Sprintf("Node container %s is %s (exit code %d); it is not restarted. Delete the Machine (or let a MachineHealthCheck remediate it) to replace it",
		node.Name, node.State(), node.ExitCode())
	if conditions.GetReason(s.dm, infrav1.ContainerProvisionedCondition) != infrav1.ContainerStoppedReason {
		// Its console (systemd's shutdown output) is for the log, not for the condition.
		logs, err := node.LastOutput(ctx, stoppedOutputTail)
		if err != nil {
			logs = fmt.Sprintf("(unavailable: %v)", err)
		}
		ctrl.LoggerFrom(ctx).Info("Node container stopped", "container", node.Name, "exitCode", node.ExitCode(),
			"lastOutput", conditionMessage(bootstrap.Redact(logs)))
		r.Recorder.Eventf(s.dm, corev1.EventTypeWarning, infrav1.ContainerStoppedReason, "Node container %s is %s (exit code %d)", node.Name, node.State(), node.ExitCode())
	}
	setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.ContainerStoppedReason, "%s", msg)
	return ctrl.Result{}, nil
}

// reconcileDelete stops the bootstrap, takes a control plane node out of the load balancer,
// then removes the container and its volumes. It works without the Machine, the Cluster or the
// container.
func (r *DockyardMachineReconciler) reconcileDelete(ctx context.Context, s *machineScope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	dm := s.dm
	if !controllerutil.ContainsFinalizer(dm, infrav1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	if s.key.Name == "" || deletedForMove(dm) {
		// Never part of a cluster (no container was created), or moved to another management
		// cluster by clusterctl move, whose Dockyard now owns the container.
		controllerutil.RemoveFinalizer(dm, infrav1.MachineFinalizer)
		return ctrl.Result{}, nil
	}

	node, err := r.Nodes.FindNode(ctx, s.key, dm.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if node != nil && node.Running() {
		if err := node.StopBootstrap(ctx); err != nil {
			log.Info("Could not stop the bootstrap before deleting the node", "error", err.Error())
		}
		if node.Role == docker.RoleControlPlane {
			var dc *infrav1.DockyardCluster
			if s.cluster != nil {
				if dc, err = r.dockyardCluster(ctx, s.cluster); err != nil {
					return ctrl.Result{}, err
				}
			}
			if s.network, err = clusterNetwork(ctx, r.Nodes, dc, s.key); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.updateLoadBalancer(ctx, s, dc); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.Nodes.DeleteNode(ctx, s.key, dm.Name); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, "deleting the node container of DockyardMachine %s", dm.Name)
	}
	if node != nil {
		log.Info("Deleted node container", "container", node.Name)
		r.Recorder.Eventf(dm, corev1.EventTypeNormal, "NodeDeleted", "Deleted node container %s and its volumes", node.Name)
	}
	controllerutil.RemoveFinalizer(dm, infrav1.MachineFinalizer)
	return ctrl.Result{}, nil
}

// dockyardCluster returns the DockyardCluster of a Cluster, or nil when it is not one (or gone).
func (r *DockyardMachineReconciler) dockyardCluster(ctx context.Context, cluster *clusterv1.Cluster) (*infrav1.DockyardCluster, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "DockyardCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		return nil, nil
	}
	dc := &infrav1.DockyardCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, dc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, errors.Wrapf(err, "getting DockyardCluster %s", ref.Name)
	}
	return dc, nil
}

// clusterToDockyardMachines maps a Cluster to its DockyardMachines.
func (r *DockyardMachineReconciler) clusterToDockyardMachines(ctx context.Context, o client.Object) []ctrl.Request {
	list := &infrav1.DockyardMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the DockyardMachines of a Cluster")
		return nil
	}
	requests := make([]ctrl.Request, 0, len(list.Items))
	for i := range list.Items {
		requests = append(requests, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return requests
}

// setWaiting reports that the machine waits for something outside Dockyard.
func setWaiting(dm *infrav1.DockyardMachine, reason, msg string) {
	setContainerCondition(dm, metav1.ConditionFalse, reason, "%s", msg)
	setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForContainerReason, "Waiting for the node container")
}

func setContainerCondition(dm *infrav1.DockyardMachine, status metav1.ConditionStatus, reason, format string, args ...any) {
	setCondition(dm, infrav1.ContainerProvisionedCondition, status, reason, fmt.Sprintf(format, args...))
}

func setBootstrapCondition(dm *infrav1.DockyardMachine, status metav1.ConditionStatus, reason, format string, args ...any) {
	setCondition(dm, infrav1.BootstrapSucceededCondition, status, reason, fmt.Sprintf(format, args...))
}

// patchDockyardMachine summarizes the conditions into Ready and patches the object once.
func patchDockyardMachine(ctx context.Context, helper *patch.Helper, dm *infrav1.DockyardMachine) error {
	if dm.DeletionTimestamp.IsZero() {
		if err := setReadySummary(dm, infrav1.ContainerProvisionedCondition, infrav1.BootstrapSucceededCondition); err != nil {
			return err
		}
	} else {
		setCondition(dm, clusterv1.ReadyCondition, metav1.ConditionFalse, infrav1.DeletingReason, "Deleting the node container")
	}
	return helper.Patch(ctx, dm, patch.WithOwnedConditions{Conditions: []string{
		clusterv1.ReadyCondition, infrav1.ContainerProvisionedCondition, infrav1.BootstrapSucceededCondition, clusterv1.PausedCondition,
	}})
}
