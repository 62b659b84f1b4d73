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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// readRetryWindow is how long reading the cluster may keep failing before the wait gives up:
// a loaded management cluster drops a connection now and then ("unexpected EOF"), which is
// no reason to abandon a cluster that is coming up.
const readRetryWindow = time.Minute

// waitReady waits until every machine of the cluster runs with its node Ready, printing what
// changes.
func waitReady(ctx context.Context, c client.Client, ref clusterRef, timeout time.Duration) error {
	return waitFor(ctx, c, ref, timeout, true, func(context.Context) (bool, error) { return true, nil })
}

// waitNodes waits until every machine of the cluster runs with its node, Ready or not (a cluster
// without a CNI has no Ready node until one is installed), printing what changes.
func waitNodes(ctx context.Context, c client.Client, ref clusterRef, timeout time.Duration) error {
	return waitFor(ctx, c, ref, timeout, false, func(context.Context) (bool, error) { return true, nil })
}

// waitFor prints the cluster's progress as it changes until every machine runs with its node
// (Ready, when nodesReady) and done says so too. An API that cannot be read is retried for
// readRetryWindow.
func waitFor(ctx context.Context, c client.Client, ref clusterRef, timeout time.Duration, nodesReady bool, done func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := map[string]string{}
	var failingSince time.Time
	for {
		status, ready, err := progress(ctx, c, ref, nodesReady)
		if err == nil && ready {
			ready, err = done(ctx)
		}
		switch {
		case err == nil || apierrors.IsNotFound(err):
			failingSince = time.Time{}
		case ctx.Err() != nil:
			// Timed out: the wait below says so.
		case failingSince.IsZero():
			failingSince = time.Now()
			say("reading cluster %s failed, retrying for %s: %v", ref, readRetryWindow, err)
		case time.Since(failingSince) > readRetryWindow:
			return errors.Wrapf(err, "reading cluster %s (failing for %s)", ref, readRetryWindow)
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
		if err == nil && ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Wrapf(ctx.Err(), "waiting for cluster %s (see the lines above; dockyard export logs collects the nodes' logs)", ref)
		case <-time.After(2 * time.Second):
		}
	}
}

// progress summarizes the cluster: the load balancer, then each machine's phase and what its
// DockyardMachine waits for; and whether every machine the cluster wants runs with its node
// (Ready, when nodesReady).
func progress(ctx context.Context, c client.Client, ref clusterRef, nodesReady bool) (map[string]string, bool, error) {
	status := map[string]string{}
	dc := &infrav1.DockyardCluster{}
	if err := c.Get(ctx, ref.objectKey(), dc); err != nil {
		return status, false, err
	}
	status["load balancer"] = conditionSummary(conditions.Get(dc, infrav1.LoadBalancerAvailableCondition))
	cluster := &clusterv1.Cluster{}
	if err := c.Get(ctx, ref.objectKey(), cluster); err != nil {
		return status, false, err
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ref.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: ref.Name}); err != nil {
		return status, false, err
	}
	running := 0
	for _, m := range machines.Items {
		line := m.Status.Phase
		if line == "" {
			line = string(clusterv1.MachinePhasePending)
		}
		dm := &infrav1.DockyardMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: m.Spec.InfrastructureRef.Name}, dm); err == nil {
			line += ", " + conditionSummary(conditions.Get(dm, clusterv1.ReadyCondition))
		}
		if m.Status.NodeRef.IsDefined() {
			nodeReady := conditions.Get(&m, clusterv1.MachineNodeReadyCondition)
			line += ", node " + conditionSummary(nodeReady)
			if (!nodesReady || nodeReady != nil && nodeReady.Status == metav1.ConditionTrue) && m.Status.Phase == string(clusterv1.MachinePhaseRunning) {
				running++
			}
		}
		status["machine "+m.Name] = line
	}
	want := desiredMachines(cluster)
	return status, want > 0 && running == int(want) && len(machines.Items) == running, nil
}

// desiredMachines is how many machines Cluster API wants the cluster to have, by its status.
func desiredMachines(cluster *clusterv1.Cluster) int32 {
	var want int32
	if s := cluster.Status.ControlPlane; s != nil {
		want += ptr.Deref(s.DesiredReplicas, 0)
	}
	if s := cluster.Status.Workers; s != nil {
		want += ptr.Deref(s.DesiredReplicas, 0)
	}
	return want
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
