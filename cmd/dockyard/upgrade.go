package main

import (
	"context"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

func upgradeCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "upgrade", Short: "Upgrade a workload cluster's Kubernetes"}
	cmd.AddCommand(upgradeClusterCommand(g))
	return cmd
}

func upgradeClusterCommand(g *globals) *cobra.Command {
	var namespace, to string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cluster NAME --kubernetes-version VERSION",
		Short: "Upgrade a workload cluster's Kubernetes through Cluster API: the control plane, then the workers",
		Long: `Upgrade a workload cluster the way Cluster API upgrades one: the KubeadmControlPlane's version
first, and once every control plane machine runs it, each MachineDeployment's; for a
ClusterClass cluster the Cluster's topology version, which Cluster API sequences itself. Machines
are replaced one by one, each from the node image of the new version (the manager's node image
repository tagged with it, unless the templates name an image). It prints what changes until
every machine runs the new version and its node is Ready.`,
		Example: `  dockyard upgrade cluster dev --kubernetes-version v1.34.4`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := version.ParseSemantic(to); err != nil || to[0] != 'v' {
				return errors.Errorf("--kubernetes-version %q: want a version such as v1.34.4", to)
			}
			ref, m, err := g.cluster(ctx, args[0], namespace)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := upgradeCluster(ctx, m.client, ref, to, timeout); err != nil {
				return err
			}
			say("cluster %s runs Kubernetes %s, upgraded in %s", ref, to, time.Since(start).Round(time.Second))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace")
	fs.StringVar(&to, "kubernetes-version", "", "the Kubernetes version to upgrade to")
	fs.DurationVar(&timeout, "wait", 30*time.Minute, "how long to wait for each step (the control plane, then the workers)")
	_ = cmd.MarkFlagRequired("kubernetes-version")
	return cmd
}

// upgradeCluster sets the new version and waits for every machine to run it: for a ClusterClass
// cluster through its topology, otherwise the control plane first, then the MachineDeployments,
// as Kubernetes' version skew policy wants (no kubelet newer than its API server).
func upgradeCluster(ctx context.Context, c client.Client, ref clusterRef, to string, timeout time.Duration) error {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, ref.objectKey(), cluster); err != nil {
		return errors.Wrapf(err, "reading cluster %s", ref)
	}
	if cluster.Spec.Topology.IsDefined() {
		base := cluster.DeepCopy()
		cluster.Spec.Topology.Version = to
		if err := c.Patch(ctx, cluster, client.MergeFrom(base)); err != nil {
			return errors.Wrapf(err, "setting cluster %s's topology version", ref)
		}
		say("cluster %s's topology: Kubernetes %s", ref, to)
		return waitVersion(ctx, c, ref, to, false, timeout)
	}
	if err := setControlPlaneVersion(ctx, c, cluster, to); err != nil {
		return err
	}
	if err := waitVersion(ctx, c, ref, to, true, timeout); err != nil {
		return err
	}
	if err := setWorkersVersion(ctx, c, ref, to); err != nil {
		return err
	}
	return waitVersion(ctx, c, ref, to, false, timeout)
}

func setControlPlaneVersion(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, to string) error {
	ref := clusterRef{Namespace: cluster.Namespace, Name: cluster.Name}
	if cp := cluster.Spec.ControlPlaneRef; cp.Kind != "KubeadmControlPlane" {
		return errors.Errorf("cluster %s's control plane is a %s: dockyard upgrades a KubeadmControlPlane", ref, cp.Kind)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: cluster.Spec.ControlPlaneRef.Name}, kcp); err != nil {
		return errors.Wrapf(err, "reading cluster %s's control plane", ref)
	}
	base := kcp.DeepCopy()
	kcp.Spec.Version = to
	if err := c.Patch(ctx, kcp, client.MergeFrom(base)); err != nil {
		return errors.Wrapf(err, "setting KubeadmControlPlane %s's version to %s", kcp.Name, to)
	}
	say("KubeadmControlPlane %s: Kubernetes %s", kcp.Name, to)
	return nil
}

func setWorkersVersion(ctx context.Context, c client.Client, ref clusterRef, to string) error {
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, client.InNamespace(ref.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: ref.Name}); err != nil {
		return errors.Wrapf(err, "listing cluster %s's MachineDeployments", ref)
	}
	for i := range mds.Items {
		md := &mds.Items[i]
		base := md.DeepCopy()
		md.Spec.Template.Spec.Version = to
		if err := c.Patch(ctx, md, client.MergeFrom(base)); err != nil {
			return errors.Wrapf(err, "setting MachineDeployment %s's version to %s", md.Name, to)
		}
		say("MachineDeployment %s: Kubernetes %s", md.Name, to)
	}
	return nil
}

// waitVersion waits until every machine of the cluster (of its control plane only, when asked)
// runs version to with its node Ready, and no machine of another version is left, printing each
// machine's progress as it changes.
func waitVersion(ctx context.Context, c client.Client, ref clusterRef, to string, controlPlaneOnly bool, timeout time.Duration) error {
	return errors.Wrapf(waitFor(ctx, c, ref, timeout, true, func(ctx context.Context) (bool, error) {
		return machinesAt(ctx, c, ref, to, controlPlaneOnly)
	}), "upgrading to Kubernetes %s", to)
}

// machinesAt reports whether the cluster's machines (its control plane's only, when asked) all
// run version to, are Running and have a Ready node.
func machinesAt(ctx context.Context, c client.Client, ref clusterRef, to string, controlPlaneOnly bool) (bool, error) {
	labels := client.MatchingLabels{clusterv1.ClusterNameLabel: ref.Name}
	if controlPlaneOnly {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ref.Namespace), labels); err != nil {
		return false, err
	}
	if len(machines.Items) == 0 {
		return false, nil
	}
	for _, m := range machines.Items {
		if m.Spec.Version != to || m.Status.Phase != string(clusterv1.MachinePhaseRunning) || !m.Status.NodeRef.IsDefined() {
			return false, nil
		}
		if !conditions.IsTrue(&m, clusterv1.MachineNodeReadyCondition) {
			return false, nil
		}
	}
	return true, nil
}
