package controllers

import (
	"context"
	"net/netip"
	"strings"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/haproxy"
)

// deletedForMove reports whether clusterctl move deletes the object from this management
// cluster because it now lives in another one: its containers must stay.
func deletedForMove(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[clusterctlv1.DeleteForMoveAnnotation]
	return ok
}

// clusterNetwork is the container network of a cluster: the spec's, or Dockyard's own.
func clusterNetwork(ctx context.Context, nodes *docker.Manager, dc *infrav1.DockyardCluster, key docker.ClusterKey) (string, error) {
	specName := ""
	if dc != nil {
		specName = dc.Spec.Network.NetworkName()
	}
	network, err := nodes.ClusterNetwork(ctx, key, specName)
	return network, errors.Wrapf(err, "finding the network of cluster %s", key)
}

// networkSpec is the network a DockyardCluster asks the engine for, by the name
// clusterNetwork found: dual-stack when the Cluster's pods or services are IPv6.
func networkSpec(cluster *clusterv1.Cluster, dc *infrav1.DockyardCluster, name string) docker.NetworkSpec {
	return docker.NetworkSpec{
		Name:     name,
		Existing: dc.Spec.Network.Existing.Name != "",
		Subnets:  dc.Spec.Network.Subnets,
		IPv6:     hasIPv6(cluster.Spec.ClusterNetwork.Pods.CIDRBlocks) || hasIPv6(cluster.Spec.ClusterNetwork.Services.CIDRBlocks),
	}
}

// kubeadmServiceSubnet is the Service range kubeadm uses when the Cluster names none.
const kubeadmServiceSubnet = "10.96.0.0/12"

// serviceCIDRs are the Service ranges of a Cluster's nodes: the ones it names, else kubeadm's
// default, which Cluster API's kubeadm bootstrap then leaves in place.
func serviceCIDRs(cluster *clusterv1.Cluster) []string {
	var cidrs []string
	for _, c := range cluster.Spec.ClusterNetwork.Services.CIDRBlocks {
		if c = strings.TrimSpace(c); c != "" {
			cidrs = append(cidrs, c)
		}
	}
	if len(cidrs) == 0 {
		return []string{kubeadmServiceSubnet}
	}
	return cidrs
}

// hasIPv6 reports whether a list of CIDR blocks holds an IPv6 one.
func hasIPv6(cidrs []string) bool {
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil && p.Addr().Is6() {
			return true
		}
	}
	return false
}

// clusterNameOf returns the name of the Cluster an object belongs to, from its owner reference
// or its cluster-name label, without reading the Cluster (which may be gone).
func clusterNameOf(obj metav1.ObjectMeta) string {
	for _, ref := range obj.OwnerReferences {
		if ref.Kind == "Cluster" && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return obj.Labels[clusterv1.ClusterNameLabel]
}

// machinesWithNodes counts the DockyardMachines of a cluster that still own a node container
// (they carry the finalizer that removes it).
func machinesWithNodes(ctx context.Context, c client.Client, key docker.ClusterKey) (int, error) {
	list := &infrav1.DockyardMachineList{}
	if err := c.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: key.Name}); err != nil {
		return 0, errors.Wrapf(err, "listing the DockyardMachines of cluster %s", key)
	}
	n := 0
	for i := range list.Items {
		if controllerutil.ContainsFinalizer(&list.Items[i], infrav1.MachineFinalizer) {
			n++
		}
	}
	return n, nil
}

// moveWithCluster labels the ConfigMap holding the cluster's haproxy template for clusterctl
// move, which otherwise leaves it behind (it is not owned by anything the cluster owns) and the
// moved cluster cannot render its load balancer's configuration again.
func moveWithCluster(ctx context.Context, c client.Client, dc *infrav1.DockyardCluster) error {
	ref := dc.Spec.LoadBalancer.ConfigTemplateRef
	if ref == nil {
		return nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: ref.Name}, cm); err != nil {
		return errors.Wrapf(err, "reading ConfigMap %s (spec.loadBalancer.configTemplateRef)", ref.Name)
	}
	if _, ok := cm.Labels[clusterctlv1.ClusterctlMoveLabel]; ok {
		return nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[clusterctlv1.ClusterctlMoveLabel] = ""
	return errors.Wrapf(c.Patch(ctx, cm, patch), "labelling ConfigMap %s for clusterctl move", ref.Name)
}

// loadBalancerTemplate returns the user's haproxy template from the ConfigMap the cluster
// names, or "" for Dockyard's default.
func loadBalancerTemplate(ctx context.Context, c client.Client, dc *infrav1.DockyardCluster) (string, error) {
	ref := dc.Spec.LoadBalancer.ConfigTemplateRef
	if ref == nil {
		return "", nil
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: ref.Name}, cm); err != nil {
		return "", errors.Wrapf(err, "reading the haproxy template from ConfigMap %s (spec.loadBalancer.configTemplateRef)", ref.Name)
	}
	tmpl, ok := cm.Data["value"]
	if !ok {
		return "", errors.Errorf("ConfigMap %s (spec.loadBalancer.configTemplateRef) has no \"value\" key holding the haproxy template", ref.Name)
	}
	return tmpl, nil
}

// controlPlaneBackends returns the function that lists the control plane nodes that should
// receive API traffic: running control plane containers of the cluster whose DockyardMachine
// and Machine are not being deleted.
func controlPlaneBackends(c client.Client, nodes *docker.Manager, key docker.ClusterKey, network string) func(context.Context) ([]haproxy.Backend, error) {
	return func(ctx context.Context) ([]haproxy.Backend, error) {
		controlPlane, err := nodes.Nodes(ctx, key, docker.RoleControlPlane)
		if err != nil {
			return nil, err
		}
		var backends []haproxy.Backend
		for _, node := range controlPlane {
			if !node.Running {
				continue
			}
			leaving, err := machineIsLeaving(ctx, c, key.Namespace, node.Machine)
			if err != nil {
				return nil, err
			}
			address := node.Address(network)
			if leaving || address == "" {
				continue
			}
			backends = append(backends, haproxy.Backend{Name: node.Name, Address: address, Port: docker.APIServerPort})
		}
		return backends, nil
	}
}

// machineIsLeaving reports whether a DockyardMachine, or the Machine owning it, is being
// deleted (or is already gone).
func machineIsLeaving(ctx context.Context, c client.Client, namespace, name string) (bool, error) {
	dm := &infrav1.DockyardMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, dm); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, errors.Wrapf(err, "getting DockyardMachine %s/%s", namespace, name)
	}
	if !dm.DeletionTimestamp.IsZero() {
		return true, nil
	}
	machine, err := util.GetOwnerMachine(ctx, c, dm.ObjectMeta)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, errors.Wrapf(err, "getting the Machine of DockyardMachine %s/%s", namespace, name)
	}
	return machine != nil && !machine.DeletionTimestamp.IsZero(), nil
}

// setReadySummary sets Ready from the given conditions. Its reason is the reason of the first
// condition that is not true, so `kubectl get` shows what the object waits for.
func setReadySummary(obj conditions.Setter, types ...string) error {
	return conditions.SetSummaryCondition(obj, obj, clusterv1.ReadyCondition,
		conditions.ForConditionTypes(types),
		conditions.CustomMergeStrategy{MergeStrategy: conditions.DefaultMergeStrategy(
			conditions.ComputeReasonFunc(func(issues, unknowns, infos []conditions.ConditionWithOwnerInfo) string {
				switch {
				case len(issues) > 0:
					return issues[0].Reason
				case len(unknowns) > 0:
					return infrav1.ReadyUnknownReason
				}
				return infrav1.ReadyReason
			}),
		)},
	)
}

// clusterByName returns the named Cluster; nil when the name is empty or the Cluster is gone (an
// infrastructure object may outlive its Cluster while both are deleted).
func clusterByName(ctx context.Context, c client.Client, namespace, name string) (*clusterv1.Cluster, error) {
	if name == "" {
		return nil, nil
	}
	cluster, err := util.GetClusterByName(ctx, c, namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cluster, err
}
