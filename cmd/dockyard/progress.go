package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pkg/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
)

// waitReady prints what changes until every Machine runs and its Node is Ready.
func waitReady(ctx context.Context, c client.Client, o workloadFlags) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last := map[string]string{}
	for {
		status, ready, err := progress(ctx, c, o)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		keys := make([]string, 0, len(status))
		for k := range status {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if last[k] != status[k] {
				say("%-40s %s", k, status[k])
				last[k] = status[k]
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrap(ctx.Err(), "waiting for the cluster")
		case <-time.After(2 * time.Second):
		}
	}
}

// progress summarizes the cluster: the load balancer, then each machine's phase and what its
// DockyardMachine waits for.
func progress(ctx context.Context, c client.Client, o workloadFlags) (map[string]string, bool, error) {
	status := map[string]string{}
	dc := &infrav1.DockyardCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.name}, dc); err != nil {
		return status, false, err
	}
	status["load balancer"] = conditionSummary(conditions.Get(dc, infrav1.LoadBalancerAvailableCondition))
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(o.namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: o.name}); err != nil {
		return status, false, err
	}
	running := 0
	for _, m := range machines.Items {
		line := m.Status.Phase
		if line == "" {
			line = string(clusterv1.MachinePhasePending)
		}
		dm := &infrav1.DockyardMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: m.Spec.InfrastructureRef.Name}, dm); err == nil {
			line += ", " + conditionSummary(conditions.Get(dm, clusterv1.ReadyCondition))
		}
		if m.Status.NodeRef.IsDefined() {
			nodeReady := conditions.Get(&m, clusterv1.MachineNodeReadyCondition)
			line += ", node " + conditionSummary(nodeReady)
			if nodeReady != nil && nodeReady.Status == metav1.ConditionTrue && m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
				running++
			}
		}
		status["machine "+m.Name] = line
	}
	return status, running == o.controlPlanes+o.workers && len(machines.Items) == running, nil
}

func conditionSummary(c *metav1.Condition) string {
	if c == nil {
		return "pending"
	}
	if c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	msg := strings.SplitN(c.Message, "\n", 2)[0]
	if len(msg) > 100 {
		msg = msg[:100] + "..."
	}
	return fmt.Sprintf("%s (%s)", c.Reason, msg)
}

// deleteCluster deletes the Cluster and waits until nothing of it is left on the engine.
func deleteCluster(ctx context.Context, c client.Client, nodes *docker.Manager, o workloadFlags) error {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name}}
	say("deleting cluster %s/%s", o.namespace, o.name)
	if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	key := docker.ClusterKey{Namespace: o.namespace, Name: o.name}
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		left, lerr := nodes.Leftovers(ctx, key)
		if apierrors.IsNotFound(err) && lerr == nil && left == nil {
			say("cluster deleted; no container, volume or network of it is left")
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrap(ctx.Err(), "waiting for the cluster's deletion")
		case <-time.After(2 * time.Second):
		}
	}
}
