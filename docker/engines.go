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
	// added hears of each engine once, when its first cluster resolves to it (EngineEvents.Add);
	// retired when no cluster does any more (EngineEvents.Remove).
	added, retired func(container.Runtime)

	mu  sync.Mutex
	sub map[container.Runtime]*Manager
	// of is the engine each cluster last resolved to.
	of map[ClusterKey]container.Runtime
}

// use records that a cluster's nodes are on rt now, retiring the engine they were on before
// when no other cluster's are (a kubeconfig Secret that changed). Called with mu held.
func (e *engines) use(cluster ClusterKey, rt container.Runtime) {
	prev, ok := e.of[cluster]
	if ok && prev == rt {
		return
	}
	if e.of == nil {
		e.of = map[ClusterKey]container.Runtime{}
	}
	e.of[cluster] = rt
	if ok {
		e.retireUnused(prev)
	}
}

// forget drops a deleted cluster, retiring its engine when no other cluster is on it.
func (e *engines) forget(cluster ClusterKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rt, ok := e.of[cluster]
	if !ok {
		return
	}
	delete(e.of, cluster)
	e.retireUnused(rt)
}

func (e *engines) retireUnused(rt container.Runtime) {
	for _, used := range e.of {
		if used == rt {
			return
		}
	}
	if _, ok := e.sub[rt]; !ok {
		return
	}
	delete(e.sub, rt)
	if e.retired != nil {
		e.retired(rt)
	}
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
		e.use(cluster, rt)
		return sub, nil
	}
	sub := NewManager(rt, ManagerOptions{Privilege: m.privilege, Policy: m.policy})
	// Images loaded into its nodes come from this engine, where they are built.
	sub.images = m.imageSource()
	if e.sub == nil {
		e.sub = map[container.Runtime]*Manager{}
	}
	e.sub[rt] = sub
	e.use(cluster, rt)
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
