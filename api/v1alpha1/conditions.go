package v1alpha1

// Condition types and reasons of Dockyard's kinds. Every reason says what Dockyard is waiting
// for or what failed, so a user reading `kubectl describe` knows what to do next; docs/api.md
// lists them with the action each one calls for.

// Reasons of the Ready summary condition on both kinds.
const (
	// ReadyReason: every condition the summary covers is true.
	ReadyReason = "Ready"
	// NotReadyReason is used only when no summarized condition gives a more specific reason.
	NotReadyReason = "NotReady"
	// ReadyUnknownReason: a summarized condition is unknown.
	ReadyUnknownReason = "ReadyUnknown"
	// DeletingReason: the object is being deleted.
	DeletingReason = "Deleting"
	// NotAllowedReason: the spec asks for what the manager's policy does not allow (an image,
	// a host path, a port, an image to load, a network, a subnet: its --allowed-* flags); the
	// message names which. Change the spec, or have the administrator allow it.
	NotAllowedReason = "NotAllowed"
)

// DockyardCluster conditions.
const (
	// LoadBalancerAvailableCondition is true when the load balancer container runs and serves
	// the control plane endpoint.
	LoadBalancerAvailableCondition = "LoadBalancerAvailable"

	// LoadBalancerAvailableReason: the load balancer runs and its address is the endpoint.
	LoadBalancerAvailableReason = "LoadBalancerAvailable"
	// WaitingForOwnerClusterReason: no Cluster owns the DockyardCluster yet.
	WaitingForOwnerClusterReason = "WaitingForOwnerCluster"
	// InfrastructureUnavailableReason: the infrastructure cluster spec.infrastructure names
	// cannot be used: its kubeconfig Secret is missing or holds no usable kubeconfig. The
	// message says what is missing; Dockyard looks again every few seconds.
	InfrastructureUnavailableReason = "InfrastructureUnavailable"
	// NetworkFailedReason: the container network could not be created or inspected.
	NetworkFailedReason = "NetworkFailed"
	// NetworkNotFoundReason: spec.network.existing.name names a network that is not on the
	// engine. Create it; Dockyard looks again every few seconds.
	NetworkNotFoundReason = "NetworkNotFound"
	// NetworkNotUsableReason: the network exists but cannot be used as the spec asks: Dockyard
	// created it for another cluster (and removes it with that one), or spec.network.subnets
	// asks to create a network whose name is taken. The message says which.
	NetworkNotUsableReason = "NetworkNotUsable"
	// LoadBalancerImageFailedReason: the load balancer image is missing and could not be pulled.
	LoadBalancerImageFailedReason = "LoadBalancerImageFailed"
	// LoadBalancerConfigFailedReason: the haproxy configuration could not be rendered, written,
	// verified or reloaded (for example a broken custom template).
	LoadBalancerConfigFailedReason = "LoadBalancerConfigFailed"
	// LoadBalancerFailedReason: the load balancer container could not be created or started.
	LoadBalancerFailedReason = "LoadBalancerFailed"
	// LoadBalancerStartingReason: the container was created but does not run yet.
	LoadBalancerStartingReason = "LoadBalancerStarting"
	// LoadBalancerWaitingForAddressReason: the load balancer is a Service of type LoadBalancer
	// of the infrastructure cluster (spec.infrastructure.kubernetes.kubeconfigSecret), which has
	// no address yet; the infrastructure cluster needs a load balancer implementation.
	LoadBalancerWaitingForAddressReason = "LoadBalancerWaitingForAddress"
	// LoadBalancerAddressChangedReason: the load balancer was replaced and came back on another
	// address than the cluster's endpoint, which certificates and kubeconfigs name.
	LoadBalancerAddressChangedReason = "LoadBalancerAddressChanged"

	// LoadBalancerHostPortKeptCondition is true when the load balancer publishes the endpoint's
	// port on the engine's host at spec.loadBalancer.hostPort, the port the kubeconfig written
	// when the cluster was created names. It is not part of Ready: Cluster API and the nodes
	// reach the load balancer on the cluster's network, which a moved host port does not change.
	LoadBalancerHostPortKeptCondition = "LoadBalancerHostPortKept"

	// LoadBalancerHostPortKeptReason: the load balancer publishes on spec.loadBalancer.hostPort.
	LoadBalancerHostPortKeptReason = "LoadBalancerHostPortKept"
	// LoadBalancerHostPortChangedReason: the load balancer publishes on another host port than
	// spec.loadBalancer.hostPort: another process or container held that port when the load
	// balancer was last created (or a load balancer made before host ports were kept moved
	// when the engine restarted). The message names both ports. Kubeconfigs naming the kept
	// port fail until the load balancer is back on it; `dockyard get kubeconfig` prints one for
	// the port in use now. Dockyard tries the kept port again each time it re-creates the load
	// balancer: free the port, then remove the load balancer container to move it back.
	LoadBalancerHostPortChangedReason = "LoadBalancerHostPortChanged"
)

// DockyardMachine conditions.
const (
	// ContainerProvisionedCondition is true when the node container runs with systemd and
	// containerd up and the requested images preloaded.
	ContainerProvisionedCondition = "ContainerProvisioned"

	// ContainerProvisionedReason: the node container runs.
	ContainerProvisionedReason = "ContainerProvisioned"
	// WaitingForOwnerMachineReason: no Machine owns the DockyardMachine yet.
	WaitingForOwnerMachineReason = "WaitingForOwnerMachine"
	// WaitingForClusterReason: the Cluster named by the cluster.x-k8s.io/cluster-name label
	// does not exist (or the label is missing).
	WaitingForClusterReason = "WaitingForCluster"
	// WaitingForClusterInfrastructureReason: the Cluster's infrastructure is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"
	// WaitingForControlPlaneInitializedReason: a worker waits for the control plane to be
	// initialized before its bootstrap data can exist.
	WaitingForControlPlaneInitializedReason = "WaitingForControlPlaneInitialized"
	// WaitingForBootstrapDataReason: the Machine has no bootstrap data secret yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"
	// ImageFailedReason: the node image is missing and could not be pulled.
	ImageFailedReason = "ImageFailed"
	// ContainerFailedReason: the node container could not be created or started.
	ContainerFailedReason = "ContainerFailed"
	// ContainerStartingReason: the container runs but systemd or containerd is not up yet.
	ContainerStartingReason = "ContainerStarting"
	// NodeRuntimeFailedReason: the node container runs but cannot run pods: containerd's CRI
	// plugin failed to load (for example the engine's host ran out of inotify instances). The
	// bootstrap does not start; fix the cause the message names, then replace the Machine.
	NodeRuntimeFailedReason = "NodeRuntimeFailed"
	// PreloadFailedReason: an image of spec.preLoadImages or of the DockyardCluster's
	// spec.loadImages could not be loaded into the node (the message says which, and why).
	PreloadFailedReason = "PreloadFailed"
	// ContainerdConfigFailedReason: spec.containerdConfigPatches or
	// containerdConfigPatchesJSON6902 could not be applied to the node's containerd
	// configuration, or containerd did not restart with the result (the message says which). Retried; fix the patches in a new template and roll the machine out.
	ContainerdConfigFailedReason = "ContainerdConfigFailed"
	// RegistryNotFoundReason: the DockyardCluster's spec.registry names no local registry on
	// the engine. Create it (dockyard registry create) or unset spec.registry; the node is
	// created once it exists.
	RegistryNotFoundReason = "RegistryNotFound"
	// RegistryNotAllowedReason: the DockyardCluster's spec.registry names a local registry
	// that does not serve the cluster's namespace (it was created for others). Its owner
	// re-creates it with the namespace added (the message says how), or unset spec.registry;
	// the node is created once it serves the namespace.
	RegistryNotAllowedReason = "RegistryNotAllowed"
	// PortUnavailableReason: a host port of spec.ports is taken by another container or a
	// process on the engine's host. The node starts once the port is free; or roll out the
	// machine with another port.
	PortUnavailableReason = "PortUnavailable"
	// ContainerStoppedReason: the node container stopped outside Dockyard's control. It is not
	// restarted; a MachineHealthCheck can remediate the Machine.
	ContainerStoppedReason = "ContainerStopped"
	// ContainerNotFoundReason: the node container vanished outside Dockyard's control. It is not
	// recreated; a MachineHealthCheck can remediate the Machine.
	ContainerNotFoundReason = "ContainerNotFound"

	// BootstrapSucceededCondition is true when the bootstrap data ran to completion in the node.
	BootstrapSucceededCondition = "BootstrapSucceeded"

	// BootstrapSucceededReason: every bootstrap command exited 0.
	BootstrapSucceededReason = "BootstrapSucceeded"
	// WaitingForContainerReason: the bootstrap data waits for the node container.
	WaitingForContainerReason = "WaitingForContainer"
	// BootstrapDataInvalidReason: the bootstrap data secret cannot be read or translated.
	BootstrapDataInvalidReason = "BootstrapDataInvalid"
	// BootstrapRunningReason: the bootstrap commands are running in the node.
	BootstrapRunningReason = "BootstrapRunning"
	// BootDelayedReason: the dockyard.x-k8s.io/boot-delay annotation holds the bootstrap until
	// the node has run that long; remove it to boot at once.
	BootDelayedReason = "BootDelayed"
	// BootstrapFailedReason: a bootstrap command failed; the message shows it and its output.
	BootstrapFailedReason = "BootstrapFailed"
	// BootstrapTimedOutReason: the bootstrap commands ran longer than spec.bootstrapTimeout.
	BootstrapTimedOutReason = "BootstrapTimedOut"
	// BootstrapInterruptedReason: the node restarted while its bootstrap commands ran; they are
	// not started again because kubeadm must not run twice.
	BootstrapInterruptedReason = "BootstrapInterrupted"
)

// DockyardMachinePool conditions. Each phase of the pool's reconcile owns one; Ready
// summarizes them.
const (
	// ScaledCondition is true when the pool has exactly as many DockyardMachines as the
	// MachinePool's spec.replicas, none of them being deleted.
	ScaledCondition = "Scaled"

	// ScaledReason: the pool has the MachinePool's number of instances.
	ScaledReason = "Scaled"
	// ScalingUpReason: DockyardMachines are being created; Cluster API makes a Machine for each.
	ScalingUpReason = "ScalingUp"
	// ScalingDownReason: surplus instances are being deleted through their Machines (which
	// Cluster API drains first); the message names them.
	ScalingDownReason = "ScalingDown"
	// InstanceCreateFailedReason: a DockyardMachine of the pool could not be created, for
	// example because the DockyardMachine webhook refuses spec.template (the message says why).
	// Fix spec.template.
	InstanceCreateFailedReason = "InstanceCreateFailed"
	// WaitingForOwnerMachinePoolReason: no MachinePool owns the DockyardMachinePool yet.
	WaitingForOwnerMachinePoolReason = "WaitingForOwnerMachinePool"

	// UpToDateCondition is true when every instance was made from the pool's current template
	// and the MachinePool's current version.
	UpToDateCondition = "UpToDate"

	// UpToDateReason: every instance matches the template.
	UpToDateReason = "UpToDate"
	// RollingOutReason: outdated instances are replaced one at a time: a new one is created,
	// and an old one deleted once the new one is Ready. The message counts them.
	RollingOutReason = "RollingOut"

	// MachinesReadyCondition is true when every instance of the pool is Ready.
	MachinesReadyCondition = "MachinesReady"

	// MachinesReadyReason: every instance is Ready (also when the pool has none).
	MachinesReadyReason = "MachinesReady"
	// MachinesNotReadyReason: some instances are not Ready; the message names them with the
	// reason of their Ready condition (see the DockyardMachine reasons).
	MachinesNotReadyReason = "MachinesNotReady"
)
