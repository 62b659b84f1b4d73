package docker

import (
	"context"
	"sort"
	"strings"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

// ClusterResources is what a cluster has on the engine: the names of its containers (nodes and
// load balancer), volumes and the networks Dockyard created for it.
type ClusterResources struct {
	Cluster    ClusterKey
	Containers []string
	Volumes    []string
	Networks   []string
}

// ListClusters returns every cluster with something on the engine, by what carries Dockyard's
// cluster label, sorted by key; management clusters (empty namespace) included. It is how a
// test run finds what an interrupted run left, and what a leak looks like.
func (m *Manager) ListClusters(ctx context.Context) ([]ClusterResources, error) {
	any := map[string]string{clusterLabel: ""}
	byKey := map[string]*ClusterResources{}
	entry := func(label string) *ClusterResources {
		if _, ok := byKey[label]; !ok {
			ns, name, _ := strings.Cut(label, "/")
			byKey[label] = &ClusterResources{Cluster: ClusterKey{Namespace: ns, Name: name}}
		}
		return byKey[label]
	}
	containers, err := m.runtime.ListContainers(ctx, any)
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's containers")
	}
	for _, c := range containers {
		e := entry(c.Labels[clusterLabel])
		e.Containers = append(e.Containers, c.Name)
	}
	volumes, err := m.runtime.ListVolumes(ctx, any)
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's volumes")
	}
	for _, v := range volumes {
		e := entry(v.Labels[clusterLabel])
		e.Volumes = append(e.Volumes, v.Name)
	}
	networks, err := m.runtime.ListNetworks(ctx, any)
	if err != nil {
		return nil, errors.Wrap(err, "listing Dockyard's networks")
	}
	for _, n := range networks {
		e := entry(n.Labels[clusterLabel])
		e.Networks = append(e.Networks, n.Name)
	}
	out := make([]ClusterResources, 0, len(byKey))
	for _, e := range byKey {
		sort.Strings(e.Containers)
		sort.Strings(e.Volumes)
		sort.Strings(e.Networks)
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster.String() < out[j].Cluster.String() })
	return out, nil
}

// RemoveCluster removes everything a listed cluster has on the engine (see ListClusters):
// containers, volumes, and the networks Dockyard created for it.
func (m *Manager) RemoveCluster(ctx context.Context, c ClusterResources) error {
	networks := c.Networks
	if len(networks) == 0 {
		networks = []string{DefaultNetworkName(c.Cluster)}
	}
	var errs []error
	for _, n := range networks {
		errs = append(errs, m.DeleteCluster(ctx, c.Cluster, n))
	}
	return errors.Wrapf(kerrors.NewAggregate(errs), "removing cluster %s from the engine", c.Cluster)
}

// Leftovers returns what a cluster still has on the engine; nil when nothing.
func (m *Manager) Leftovers(ctx context.Context, cluster ClusterKey) (*ClusterResources, error) {
	all, err := m.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Cluster == cluster {
			return &all[i], nil
		}
	}
	return nil, nil
}
