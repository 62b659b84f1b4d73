package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"
	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// scaleOptions say what to scale; a negative count leaves that part as it is.
type scaleOptions struct {
	controlPlanes, workers int32
	// machineDeployment names the workers' MachineDeployment (or, for a ClusterClass cluster,
	// its topology entry); empty: the cluster's only one.
	machineDeployment string
}

func scaleCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "scale", Short: "Scale a workload cluster"}
	cmd.AddCommand(scaleClusterCommand(g))
	return cmd
}

func scaleClusterCommand(g *globals) *cobra.Command {
	o := scaleOptions{controlPlanes: -1, workers: -1}
	var namespace string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "cluster NAME",
		Short: "Change a workload cluster's control plane or worker count through Cluster API and wait for its nodes",
		Long: `Scale a workload cluster the way Cluster API scales it: the KubeadmControlPlane's replicas, a
MachineDeployment's replicas, or for a ClusterClass cluster the Cluster's topology. Then print
what changes until every node is Ready.`,
		Example: `  dockyard scale cluster dev --workers 3
  dockyard scale cluster ha --control-planes 3
  dockyard scale cluster dev --workers 0 --machine-deployment dev-md-1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.controlPlanes < 0 && o.workers < 0 {
				return errors.New("say what to scale: --control-planes N, --workers N or both")
			}
			ctx := cmd.Context()
			ref, m, err := g.cluster(ctx, args[0], namespace)
			if err != nil {
				return err
			}
			want, err := scaleCluster(ctx, m.client, ref, o)
			if err != nil {
				return err
			}
			if timeout == 0 {
				return nil
			}
			start := time.Now()
			// Until Cluster API's status wants the new count, the old machines look done.
			err = waitFor(ctx, m.client, ref, timeout, true, func(ctx context.Context) (bool, error) {
				cluster := &clusterv1.Cluster{}
				err := m.client.Get(ctx, ref.objectKey(), cluster)
				return err == nil && desiredMachines(cluster) == want, err
			})
			if err != nil {
				return err
			}
			say("cluster %s scaled in %s", ref, time.Since(start).Round(time.Second))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&namespace, "namespace", "n", "default", "the cluster's namespace")
	fs.Int32Var(&o.controlPlanes, "control-planes", -1, "control plane machines (unchanged when not given)")
	fs.Int32Var(&o.workers, "workers", -1, "worker machines of the MachineDeployment (unchanged when not given)")
	fs.StringVar(&o.machineDeployment, "machine-deployment", "", "the MachineDeployment to scale (a ClusterClass cluster: its topology name); empty: the cluster's only one")
	fs.DurationVar(&timeout, "wait", 15*time.Minute, "how long to wait for every node to be Ready; 0 returns once the change is made")
	return cmd
}

// scaleCluster makes the change and returns how many machines the cluster then wants in all.
func scaleCluster(ctx context.Context, c client.Client, ref clusterRef, o scaleOptions) (int32, error) {
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, ref.objectKey(), cluster); err != nil {
		return 0, errors.Wrapf(err, "reading cluster %s", ref)
	}
	if cluster.Spec.Topology.IsDefined() {
		return scaleTopology(ctx, c, cluster, o)
	}
	var want int32
	kcp := &controlplanev1.KubeadmControlPlane{}
	if cp := cluster.Spec.ControlPlaneRef; cp.Kind != "KubeadmControlPlane" {
		return 0, errors.Errorf("cluster %s's control plane is a %s: dockyard scales a KubeadmControlPlane", ref, cp.Kind)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: cluster.Spec.ControlPlaneRef.Name}, kcp); err != nil {
		return 0, errors.Wrapf(err, "reading cluster %s's control plane", ref)
	}
	if o.controlPlanes >= 0 {
		base := kcp.DeepCopy()
		kcp.Spec.Replicas = ptr.To(o.controlPlanes)
		if err := c.Patch(ctx, kcp, client.MergeFrom(base)); err != nil {
			return 0, errors.Wrapf(err, "scaling KubeadmControlPlane %s to %d", kcp.Name, o.controlPlanes)
		}
		say("KubeadmControlPlane %s: %d replicas", kcp.Name, o.controlPlanes)
	}
	want += ptr.Deref(kcp.Spec.Replicas, 0)
	mds := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, mds, client.InNamespace(ref.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: ref.Name}); err != nil {
		return 0, errors.Wrapf(err, "listing cluster %s's MachineDeployments", ref)
	}
	names := make([]string, 0, len(mds.Items))
	for _, md := range mds.Items {
		names = append(names, md.Name)
	}
	if o.workers >= 0 {
		target, err := pick(names, o.machineDeployment, "MachineDeployment", ref)
		if err != nil {
			return 0, err
		}
		md := &mds.Items[target]
		base := md.DeepCopy()
		md.Spec.Replicas = ptr.To(o.workers)
		if err := c.Patch(ctx, md, client.MergeFrom(base)); err != nil {
			return 0, errors.Wrapf(err, "scaling MachineDeployment %s to %d", md.Name, o.workers)
		}
		say("MachineDeployment %s: %d replicas", md.Name, o.workers)
	}
	for _, md := range mds.Items {
		want += ptr.Deref(md.Spec.Replicas, 0)
	}
	return want, nil
}

// scaleTopology scales a ClusterClass cluster through its topology.
func scaleTopology(ctx context.Context, c client.Client, cluster *clusterv1.Cluster, o scaleOptions) (int32, error) {
	ref := clusterRef{Namespace: cluster.Namespace, Name: cluster.Name}
	base := cluster.DeepCopy()
	topology := &cluster.Spec.Topology
	if o.controlPlanes >= 0 {
		topology.ControlPlane.Replicas = ptr.To(o.controlPlanes)
	}
	if o.workers >= 0 {
		mds := topology.Workers.MachineDeployments
		names := make([]string, 0, len(mds))
		for _, md := range mds {
			names = append(names, md.Name)
		}
		i, err := pick(names, o.machineDeployment, "topology MachineDeployment", ref)
		if err != nil {
			return 0, err
		}
		mds[i].Replicas = ptr.To(o.workers)
	}
	if err := c.Patch(ctx, cluster, client.MergeFrom(base)); err != nil {
		return 0, errors.Wrapf(err, "scaling cluster %s's topology", ref)
	}
	say("cluster %s's topology: %s", ref, describeTopology(topology))
	want := ptr.Deref(topology.ControlPlane.Replicas, 0)
	for _, md := range topology.Workers.MachineDeployments {
		want += ptr.Deref(md.Replicas, 0)
	}
	return want, nil
}

func describeTopology(t *clusterv1.Topology) string {
	parts := []string{fmt.Sprintf("control plane %d", ptr.Deref(t.ControlPlane.Replicas, 0))}
	for _, md := range t.Workers.MachineDeployments {
		parts = append(parts, fmt.Sprintf("%s %d", md.Name, ptr.Deref(md.Replicas, 0)))
	}
	return strings.Join(parts, ", ")
}

// pick is the index of the MachineDeployment named (or the only one when name is empty).
func pick(names []string, name, what string, ref clusterRef) (int, error) {
	if name == "" {
		if len(names) != 1 {
			return 0, errors.Errorf("cluster %s has %d %ss (%s): name one with --machine-deployment", ref, len(names), what, strings.Join(names, ", "))
		}
		return 0, nil
	}
	for i, n := range names {
		if n == name {
			return i, nil
		}
	}
	return 0, errors.Errorf("cluster %s has no %s %s (it has %s)", ref, what, name, strings.Join(names, ", "))
}
