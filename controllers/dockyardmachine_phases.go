package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/patch"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// The phases of a DockyardMachine's reconcileNormal, in their order.

// reconcilePrerequisites waits for what the machine needs from Cluster API before a node is
// created: the source of its bootstrap data and the Cluster's infrastructure (network and load
// balancer). Not the bootstrap data itself: the node boots while the bootstrap provider writes
// it (a worker's waits for the control plane to be initialized), so it runs as soon as it
// lands. A Machine being deleted gets no new node; a control plane one only leaves the load
// balancer.
func (r *DockyardMachineReconciler) reconcilePrerequisites(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	dm, machine, cluster := s.dm, s.machine, s.cluster
	if done, err := r.bootstrapSource(ctx, s); err != nil || done {
		return ctrl.Result{}, false, err
	}
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		setWaiting(dm, infrav1.WaitingForClusterInfrastructureReason,
			fmt.Sprintf("Waiting for the infrastructure of Cluster %s (%s %s) to be provisioned",
				cluster.Name, cluster.Spec.InfrastructureRef.Kind, cluster.Spec.InfrastructureRef.Name))
		return ctrl.Result{}, false, nil
	}
	var err error
	if s.dc, err = r.dockyardCluster(ctx, cluster); err != nil {
		return ctrl.Result{}, false, err
	}
	// The engine the cluster's nodes run on, chosen once for the whole reconcile.
	if s.nodes, err = r.Engines.For(ctx, s.dc); err != nil {
		setWaiting(dm, infrastructureReason(err), fmt.Sprintf("The cluster's infrastructure (DockyardCluster %s, spec.infrastructure) cannot be used: %v", s.dc.Name, err))
		return ctrl.Result{RequeueAfter: registryRetry}, false, nil
	}
	if s.network, err = clusterNetwork(ctx, s.nodes, s.dc, s.key); err != nil {
		return ctrl.Result{}, false, err
	}
	if s.node, err = s.nodes.FindNode(ctx, s.key, dm.Name); err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "%v", err)
		return ctrl.Result{}, false, err
	}
	if s.node != nil && dm.Status.Engine == "" {
		// A node made before where was recorded.
		dm.Status.Engine = r.Engines.Where(s.dc)
	}
	if !machine.DeletionTimestamp.IsZero() {
		if s.node != nil && util.IsControlPlaneMachine(machine) {
			return ctrl.Result{}, false, r.updateLoadBalancer(ctx, s)
		}
		return ctrl.Result{}, false, nil
	}
	return ctrl.Result{}, true, nil
}

// reconcileContainer makes the node container run with systemd and containerd up and its
// images preloaded: created once (one removed before it was provisioned is recreated, and
// mounts the old /var volume, whose bootstrap lock stops kubeadm from running twice), started
// when it never ran; one that stopped or vanished outside Dockyard is reported, not restarted.
func (r *DockyardMachineReconciler) reconcileContainer(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	dm := s.dm
	if s.node == nil {
		if ptr.Deref(dm.Status.Initialization.Provisioned, false) {
			r.reportVanished(ctx, s)
			return ctrl.Result{}, false, nil
		}
		node, err := r.createNode(ctx, s)
		if docker.IsPortInUse(err) {
			return r.startFailed(dm, docker.NodeName(s.key, dm.Name), err)
		}
		if err != nil || node == nil {
			return ctrl.Result{}, false, err
		}
		s.node = node
	}
	node := s.node
	switch {
	case node.NeverStarted():
		// Created but never started (the manager stopped in between, or a host port was
		// taken): start it now.
		if err := node.Start(ctx); err != nil {
			return r.startFailed(dm, node.Name, err)
		}
		return ctrl.Result{RequeueAfter: nodeBootPoll}, false, nil
	case !node.Running:
		r.reportStopped(ctx, s)
		return ctrl.Result{}, false, nil
	}

	if ptr.Deref(dm.Status.Initialization.Provisioned, false) {
		// Booted, loaded and bootstrapped: an idle node costs no command. What the cluster
		// gained since (images, the registry's address) still reaches it. The condition is
		// set again: a wait in between (the owner Machine taken away and given back, the
		// container stopped and started) left it False.
		setContainerCondition(dm, metav1.ConditionTrue, infrav1.ContainerProvisionedReason, "")
		r.refreshNode(ctx, s)
		return ctrl.Result{}, true, nil
	}
	if bootstrapFailedForGood(dm) {
		return ctrl.Result{}, true, nil // nothing more will run in the node: it is not looked into
	}
	state, err := node.Ready(ctx)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if state.Failed {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.NodeRuntimeFailedReason, "%s", state.Detail)
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForContainerReason, "The bootstrap data waits for a node container that can run pods")
		r.Recorder.Event(dm, corev1.EventTypeWarning, infrav1.NodeRuntimeFailedReason, state.Detail)
		return ctrl.Result{RequeueAfter: nodeRuntimeFailedPoll}, false, nil
	}
	if !state.Ready {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerStartingReason, "Node container %s is booting: %s", node.Name, state.Detail)
		setBootstrapCondition(dm, metav1.ConditionFalse, infrav1.WaitingForContainerReason, "Waiting for systemd and containerd in the node container")
		return ctrl.Result{RequeueAfter: nodeBootPoll}, false, nil
	}
	if err := node.ConfigureContainerd(ctx, patch.Containerd{Merge: dm.Spec.ContainerdConfigPatches, JSON6902: dm.Spec.ContainerdConfigPatchesJSON6902}); err != nil {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerdConfigFailedReason, "%v", err)
		return ctrl.Result{}, false, err
	}
	if err := r.loadImages(ctx, s); err != nil {
		reason := infrav1.PreloadFailedReason
		if policy.IsRefused(err) {
			reason = infrav1.NotAllowedReason
		}
		setContainerCondition(dm, metav1.ConditionFalse, reason, "%v", err)
		if reason == infrav1.NotAllowedReason {
			return ctrl.Result{}, false, nil // retrying cannot help: the spec or the policy must change
		}
		return ctrl.Result{}, false, err
	}
	if ok, err := r.useRegistry(ctx, s); err != nil || !ok {
		return ctrl.Result{RequeueAfter: registryRetry}, false, err
	}
	setContainerCondition(dm, metav1.ConditionTrue, infrav1.ContainerProvisionedReason, "")
	return ctrl.Result{}, true, nil
}

// portRetry is how often a node whose host port is taken tries to start again.
const portRetry = 30 * time.Second

// startFailed reports a node container that did not start: a taken host port is retried (the
// user may free it), anything else returned.
func (r *DockyardMachineReconciler) startFailed(dm *infrav1.DockyardMachine, name string, err error) (ctrl.Result, bool, error) {
	if docker.IsPortInUse(err) {
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.PortUnavailableReason,
			"Node container %s cannot start: a host port of spec.ports is taken (%v); it starts once the port is free", name, err)
		return ctrl.Result{RequeueAfter: portRetry}, false, nil
	}
	setContainerCondition(dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "Starting node container %s: %v", name, err)
	return ctrl.Result{}, false, err
}

// registryRetry is how often a machine looks for a local registry its cluster names.
const registryRetry = 15 * time.Second

// useRegistry attaches the cluster's local registry (spec.registry) to its network and points
// the node's containerd at it; ok is false (the condition says why) while it does not exist or
// does not serve the machine's namespace.
func (r *DockyardMachineReconciler) useRegistry(ctx context.Context, s *machineScope) (ok bool, err error) {
	if s.dc == nil || s.dc.Spec.Registry == "" {
		s.dm.Status.Registry = ""
		return true, nil
	}
	reg, err := s.nodes.ConnectRegistry(ctx, s.dc.Spec.Registry, s.network, s.dm.Namespace)
	if docker.IsRegistryNotServed(err) {
		setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.RegistryNotAllowedReason, "%v", err)
		return false, nil
	}
	if err != nil {
		setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "%v", err)
		return false, err
	}
	if reg == nil {
		setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.RegistryNotFoundReason,
			"The DockyardCluster's spec.registry names %s, which is no local registry on the engine: create it (dockyard registry create --name %s --namespaces %s) or unset spec.registry",
			s.dc.Spec.Registry, s.dc.Spec.Registry, s.dm.Namespace)
		return false, nil
	}
	// The node is pointed at the registry's address once, and again only when it moved (an
	// engine restart gives the registry another address on the cluster's network).
	configured := reg.Host() + " " + reg.Address(s.network)
	if s.dm.Status.Registry == configured {
		return true, nil
	}
	if err := s.node.UseRegistry(ctx, reg, s.network); err != nil {
		setContainerCondition(s.dm, metav1.ConditionFalse, infrav1.ContainerFailedReason, "%v", err)
		return false, err
	}
	s.dm.Status.Registry = configured
	return true, nil
}

// imagesToLoad are the images a node gets from the engine: the machine's preLoadImages and
// its cluster's loadImages.
func (s *machineScope) imagesToLoad() []string {
	images := slices.Clone(s.dm.Spec.PreLoadImages)
	if s.dc != nil {
		for _, img := range s.dc.Spec.LoadImages {
			if !slices.Contains(images, img) {
				images = append(images, img)
			}
		}
	}
	return images
}

// loadImages copies into the node the images it should hold that Dockyard has not copied into
// it yet (status.loadedImages), and records them; with nothing new it runs no command in the
// node.
func (r *DockyardMachineReconciler) loadImages(ctx context.Context, s *machineScope) error {
	want := s.imagesToLoad()
	loaded := sets.New(s.dm.Status.LoadedImages...)
	var missing []string
	for _, img := range want {
		if !loaded.Has(img) {
			missing = append(missing, img)
		}
	}
	if len(missing) > 0 {
		if err := s.node.LoadImages(ctx, missing, r.reportLoad(ctx, s.dm)); err != nil {
			return err
		}
	}
	// What the cluster no longer lists is forgotten: listed again, it is looked for again.
	s.dm.Status.LoadedImages = want
	return nil
}

// reportLoad logs every image copied into a node.
func (r *DockyardMachineReconciler) reportLoad(ctx context.Context, dm *infrav1.DockyardMachine) func(docker.ImageLoad) {
	return func(l docker.ImageLoad) {
		if !l.Done {
			return
		}
		ctrl.LoggerFrom(ctx).Info("Loaded an image into the node", "image", l.Image, "container", l.Node, "bytes", l.Bytes, "took", l.Took.Round(time.Millisecond).String())
	}
}

// reconcileLoadBalancer puts a control plane node behind its cluster's load balancer before its
// bootstrap runs; workers have nothing to do here.
func (r *DockyardMachineReconciler) reconcileLoadBalancer(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	if !util.IsControlPlaneMachine(s.machine) {
		return ctrl.Result{}, true, nil
	}
	if err := r.updateLoadBalancer(ctx, s); err != nil {
		return ctrl.Result{}, false, err
	}
	return ctrl.Result{}, true, nil
}

// reconcileProvisioned records what Cluster API reads of a provisioned machine: its providerID
// (also on the workload cluster's Node: no cloud controller sets it for containers, and Cluster
// API matches the Machine with its Node by it), addresses and failure domain.
func (r *DockyardMachineReconciler) reconcileProvisioned(ctx context.Context, s *machineScope) (ctrl.Result, bool, error) {
	dm, machine, node := s.dm, s.machine, s.node
	dm.Spec.ProviderID = infrav1.ProviderIDPrefix + node.Name
	dm.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: node.Hostname}}
	for _, address := range node.Addresses[s.network] {
		dm.Status.Addresses = append(dm.Status.Addresses,
			clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: address},
			clusterv1.MachineAddress{Type: clusterv1.MachineExternalIP, Address: address})
	}
	dm.Status.FailureDomain = machine.Spec.FailureDomain
	dm.Status.Ports = publishedPorts(dm.Spec.Ports, node.Ports)
	if !ptr.Deref(dm.Status.Initialization.Provisioned, false) {
		ctrl.LoggerFrom(ctx).Info("Machine provisioned", "providerID", dm.Spec.ProviderID)
	}
	dm.Status.Initialization.Provisioned = ptr.To(true)
	if !machine.Status.NodeRef.IsDefined() {
		result, err := r.setNodeProviderID(ctx, s, node.Hostname)
		return result, false, err
	}
	return ctrl.Result{}, true, nil
}

// refreshNode keeps a provisioned node in step with its cluster: images the cluster's
// loadImages gained since they were loaded, and the local registry's address when it moved.
// Each costs a command in the node only when something changed. Failing here does not make a
// running node unready: it is an event.
func (r *DockyardMachineReconciler) refreshNode(ctx context.Context, s *machineScope) {
	if err := r.loadImages(ctx, s); err != nil {
		r.Recorder.Eventf(s.dm, corev1.EventTypeWarning, infrav1.PreloadFailedReason, "Loading the cluster's images into node %s: %v", s.node.Name, err)
	}
	if s.dc != nil && s.dc.Spec.Registry != "" {
		dm := s.dm.DeepCopy() // the condition stays as it is on a provisioned machine
		ok, err := r.useRegistry(ctx, &machineScope{dm: dm, dc: s.dc, nodes: s.nodes, node: s.node, network: s.network})
		if err != nil || !ok {
			r.Recorder.Eventf(s.dm, corev1.EventTypeWarning, conditions.GetReason(dm, infrav1.ContainerProvisionedCondition), "Pointing node %s at local registry %s: %s",
				s.node.Name, s.dc.Spec.Registry, conditions.GetMessage(dm, infrav1.ContainerProvisionedCondition))
		}
		s.dm.Status.Registry = dm.Status.Registry
	}
}

// publishedPorts are the spec's ports as the node publishes them, with the host ports the
// engine picked.
func publishedPorts(spec []infrav1.PortMapping, published []docker.Port) []infrav1.PortMapping {
	var out []infrav1.PortMapping
	for _, want := range spec {
		for _, got := range published {
			if got.ContainerPort == int(want.ContainerPort) && strings.EqualFold(got.Protocol, orDefault(want.Protocol, "TCP")) {
				pm := want
				pm.HostPort, pm.ListenAddress = int32(got.HostPort), orDefault(got.HostIP, want.ListenAddress)
				out = append(out, pm)
				break
			}
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
		ServiceCIDRs: serviceCIDRs(s.cluster), DNSSearch: dm.Spec.DNSSearch, FailureDomain: machine.Spec.FailureDomain,
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
	for _, p := range dm.Spec.Ports {
		spec.Ports = append(spec.Ports, docker.Port{ContainerPort: int(p.ContainerPort), Protocol: p.Protocol, HostIP: p.ListenAddress, HostPort: int(p.HostPort)})
	}
	// Where the node is made is recorded first: a deletion then knows there is one to remove.
	where := r.Engines.Where(s.dc)
	if err := recordEngine(ctx, r.Client, dm, func(o client.Object) { o.(*infrav1.DockyardMachine).Status.Engine = where }); err != nil {
		return nil, err
	}
	node, err := s.nodes.AddNode(ctx, spec)
	switch {
	case policy.IsRefused(err):
		// Retrying cannot help; the manager reconciles everything again when it restarts with
		// another policy.
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.NotAllowedReason, "%v", err)
		return nil, nil
	case docker.IsImageError(err):
		setContainerCondition(dm, metav1.ConditionFalse, infrav1.ImageFailedReason, "%v", err)
		return nil, err
	case err != nil:
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

// updateLoadBalancer puts the cluster's running, not leaving, control plane nodes behind the
// load balancer.
func (r *DockyardMachineReconciler) updateLoadBalancer(ctx context.Context, s *machineScope) error {
	if s.dc == nil {
		return nil
	}
	lb, err := s.nodes.FindLoadBalancer(ctx, s.key)
	if err != nil || lb == nil || !lb.Running {
		return err // no load balancer (being replaced or deleted): the cluster reconciler renders it
	}
	tmpl, err := loadBalancerTemplate(ctx, r.Client, s.dc)
	if apierrors.IsNotFound(err) && !s.dm.DeletionTimestamp.IsZero() {
		// Its namespace is being deleted, the template with it: a node that leaves is taken out
		// with the default template all the same (the cluster renders its own again).
		ctrl.LoggerFrom(ctx).Info("The haproxy template is gone; taking the node out of the load balancer with the default one", "error", err.Error())
		tmpl, err = "", nil
	}
	if err != nil {
		return err
	}
	changed, err := lb.Update(ctx, tmpl, controlPlaneBackends(r.Client, s.nodes, s.key, s.network))
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
