package docker

import (
	"context"
	"sync"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// EngineResolver returns the engine a cluster's nodes run on when it is not the Manager's own
// (Kubernetes: the infrastructure cluster its DockyardCluster names), nil when it is. A
// resolver returns the same Runtime for the same engine while it does not change, so the
// Manager keeps one state (privilege, locks) per engine.
type EngineResolver func(ctx context.Context, cluster ClusterKey) (container.Runtime, error)

// engines holds the Managers of the engines resolved for clusters, one per engine.
type engines struct {
	resolve EngineResolver
	// added hears of each engine once, when its first cluster resolves to it (EngineEvents.Add).
	added func(container.Runtime)

	mu  sync.Mutex
	sub map[container.Runtime]*Manager
}

// on returns the Manager of the engine a cluster's nodes run on: m itself, or one of the same
// options (without management nodes, which live on m's engine) for a resolved engine. Every
// method of the Manager that is about one cluster starts with it, so its callers never know
// where the cluster runs.
func (m *Manager) on(ctx context.Context, cluster ClusterKey) (*Manager, error) {
	if m.engines == nil || m.engines.resolve == nil {
		return m, nil
	}
	rt, err := m.engines.resolve(ctx, cluster)
	if err != nil {
		return nil, errors.Wrapf(err, "finding the engine of cluster %s", cluster)
	}
	if rt == nil {
		return m, nil
	}
	e := m.engines
	e.mu.Lock()
	defer e.mu.Unlock()
	if sub, ok := e.sub[rt]; ok {
		return sub, nil
	}
	sub := NewManager(rt, ManagerOptions{Privilege: m.privilege, Policy: m.policy})
	// Images loaded into its nodes come from this engine, where they are built.
	sub.images = m.imageSource()
	if e.sub == nil {
		e.sub = map[container.Runtime]*Manager{}
	}
	e.sub[rt] = sub
	if e.added != nil {
		e.added(rt)
	}
	return sub, nil
}

// imageSource is the engine images are copied into nodes from: the Manager's own, or, for an
// engine resolved for a cluster, the engine of the Manager that resolved it.
func (m *Manager) imageSource() container.Runtime {
	if m.images != nil {
		return m.images
	}
	return m.runtime
}

// Zones returns the failure domains of the engine a cluster runs on: its zones on an engine
// whose hosts have them (Kubernetes), none on an engine of one host.
func (m *Manager) Zones(ctx context.Context, cluster ClusterKey) ([]string, error) {
	m, err := m.on(ctx, cluster)
	if err != nil {
		return nil, err
	}
	z, ok := m.runtime.(container.Zoned)
	if !ok {
		return nil, nil
	}
	zones, err := z.Zones(ctx)
	return zones, errors.Wrapf(err, "listing the zones of the engine of cluster %s", cluster)
}
