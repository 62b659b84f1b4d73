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
	// ID names the infrastructure with the version of its credentials: the same ID is the same
	// engine, another ID (a changed kubeconfig Secret) a new one.
	ID string
	// External says the management cluster is not the infrastructure cluster: it reaches the
	// control plane endpoint from outside the infrastructure cluster's network, so the endpoint
	// is a load balancer's address (kubernetes.ExternalFronts), not a cluster address.
	External bool
}

// InfrastructureFunc says where a cluster's nodes run: nil for the Manager's own engine.
type InfrastructureFunc func(ctx context.Context, cluster ClusterKey) (*Infrastructure, error)

// KubernetesEngines resolves clusters to the Kubernetes engines their infrastructure names,
// one engine per ID, made when a cluster first needs it.
func KubernetesEngines(infra InfrastructureFunc) EngineResolver {
	var (
		mu   sync.Mutex
		byID = map[string]container.Runtime{}
	)
	return func(ctx context.Context, cluster ClusterKey) (container.Runtime, error) {
		in, err := infra(ctx, cluster)
		if err != nil || in == nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if rt, ok := byID[in.ID]; ok {
			return rt, nil
		}
		var opts []kubernetes.Option
		if in.External {
			opts = append(opts, kubernetes.ExternalFronts())
		}
		rt, err := kubernetes.New(in.Config, in.Namespace, opts...)
		if err != nil {
			return nil, errors.Wrapf(err, "connecting to infrastructure %s", in.ID)
		}
		byID[in.ID] = rt
		return rt, nil
	}
}
