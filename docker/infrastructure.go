package docker

import (
	"context"
	"sync"

	"github.com/pkg/errors"
	"k8s.io/client-go/rest"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/kubernetes"
)

// Infrastructure is a Kubernetes cluster a cluster's nodes run on as Pods.
type Infrastructure struct {
	// Config reaches the infrastructure cluster.
	Config *rest.Config
	// Namespace holds the Pods.
	Namespace string
	// ID names the infrastructure (the kubeconfig Secret, or the management cluster, and the
	// namespace). Version is its credentials' (the Secret's resourceVersion): an engine of the
	// same ID and another Version replaces the one before, which is forgotten.
	ID      string
	Version string
	// External says the management cluster is not the infrastructure cluster: it reaches the
	// control plane endpoint from outside the infrastructure cluster's network, so the endpoint
	// is a load balancer's address (kubernetes.ExternalFronts), not a cluster address.
	External bool
}

// InfrastructureFunc says where a cluster's nodes run: nil for the Manager's own engine.
type InfrastructureFunc func(ctx context.Context, cluster ClusterKey) (*Infrastructure, error)

// KubernetesEngines resolves clusters to the Kubernetes engines their infrastructure names,
// one engine per ID and Version, made when a cluster first needs it; a new Version replaces
// the engine of the one before.
func KubernetesEngines(infra InfrastructureFunc) EngineResolver {
	type engine struct {
		version string
		rt      container.Runtime
	}
	var (
		mu   sync.Mutex
		byID = map[string]engine{}
	)
	return func(ctx context.Context, cluster ClusterKey) (container.Runtime, error) {
		in, err := infra(ctx, cluster)
		if err != nil || in == nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if e, ok := byID[in.ID]; ok && e.version == in.Version {
			return e.rt, nil
		}
		var opts []kubernetes.Option
		if in.External {
			opts = append(opts, kubernetes.ExternalFronts())
		}
		rt, err := kubernetes.New(in.Config, in.Namespace, opts...)
		if err != nil {
			return nil, errors.Wrapf(err, "connecting to infrastructure %s", in.ID)
		}
		byID[in.ID] = engine{version: in.Version, rt: rt}
		return rt, nil
	}
}
