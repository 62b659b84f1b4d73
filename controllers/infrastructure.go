package controllers

import (
	"context"
	"fmt"
	"sync"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Infrastructure tells the node layer where each cluster's nodes run, from its DockyardCluster's
// spec.infrastructure: nil (the manager's engine) when it names none; a Kubernetes cluster
// from the kubeconfig Secret it names, or the management cluster itself (management, in the
// DockyardCluster's namespace) when the policy allows that namespace. Objects are read from
// reader (the manager's cache) and Secrets from secrets.
func Infrastructure(reader, secrets client.Reader, management *rest.Config, p *policy.Policy) docker.InfrastructureFunc {
	// A kubeconfig is read once per version of its Secret (every node layer call about a
	// cluster asks for its infrastructure); a new version replaces the one before.
	var (
		mu     sync.Mutex
		parsed = map[string]*docker.Infrastructure{}
	)
	return func(ctx context.Context, cluster docker.ClusterKey) (*docker.Infrastructure, error) {
		dc, err := dockyardClusterOf(ctx, reader, cluster)
		if err != nil || dc == nil || dc.Spec.Infrastructure.Kubernetes == nil {
			return nil, err
		}
		k := dc.Spec.Infrastructure.Kubernetes
		if k.KubeconfigSecret == "" {
			return managementInfrastructure(management, p, dc)
		}
		var secret corev1.Secret
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: k.KubeconfigSecret}, &secret); err != nil {
			return nil, errors.Wrapf(err, "reading spec.infrastructure.kubernetes.kubeconfigSecret %s", k.KubeconfigSecret)
		}
		key := fmt.Sprintf("%s/%s/%s", dc.Namespace, secret.Name, k.Namespace)
		mu.Lock()
		defer mu.Unlock()
		if in, ok := parsed[key]; ok && in.Version == secret.ResourceVersion {
			return in, nil
		}
		in, err := secretInfrastructure(dc, &secret)
		if err != nil {
			return nil, err
		}
		parsed[key] = in
		return in, nil
	}
}

// dockyardClusterOf finds a cluster's DockyardCluster by the cluster-name label Cluster API
// puts on it; nil when there is none (a cluster on the manager's engine without one left).
func dockyardClusterOf(ctx context.Context, reader client.Reader, cluster docker.ClusterKey) (*infrav1.DockyardCluster, error) {
	var list infrav1.DockyardClusterList
	if err := reader.List(ctx, &list, client.InNamespace(cluster.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}); err != nil {
		return nil, errors.Wrapf(err, "listing the DockyardClusters of cluster %s", cluster)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	}
	return nil, errors.Errorf("cluster %s has %d DockyardClusters", cluster, len(list.Items))
}

// managementInfrastructure is the management cluster as a cluster's infrastructure, in the
// cluster's own namespace, where the policy allows it.
func managementInfrastructure(management *rest.Config, p *policy.Policy, dc *infrav1.DockyardCluster) (*docker.Infrastructure, error) {
	if p != nil {
		if err := p.CheckManagementInfrastructure(dc.Namespace); err != nil {
			return nil, err
		}
	}
	if ns := dc.Spec.Infrastructure.Kubernetes.Namespace; ns != "" && ns != dc.Namespace {
		return nil, policy.Refusedf("spec.infrastructure.kubernetes.namespace %s: on the management cluster, a cluster's nodes run in its own namespace %s", ns, dc.Namespace)
	}
	return &docker.Infrastructure{Config: management, Namespace: dc.Namespace, ID: "management/" + dc.Namespace}, nil
}

// secretInfrastructure is the infrastructure cluster of a kubeconfig Secret.
func secretInfrastructure(dc *infrav1.DockyardCluster, secret *corev1.Secret) (*docker.Infrastructure, error) {
	k := dc.Spec.Infrastructure.Kubernetes
	b := secret.Data[infrav1.InfrastructureKubeconfigKey]
	if len(b) == 0 {
		return nil, errors.Errorf("Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret) has no kubeconfig in its key %q", k.KubeconfigSecret, infrav1.InfrastructureKubeconfigKey)
	}
	loaded, err := clientcmd.Load(b)
	if err != nil {
		return nil, errors.Wrapf(err, "reading the kubeconfig of Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret)", k.KubeconfigSecret)
	}
	if err := SelfContainedKubeconfig(loaded); err != nil {
		return nil, policy.Refusedf("the kubeconfig of Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret) %v", k.KubeconfigSecret, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*loaded, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errors.Wrapf(err, "the kubeconfig of Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret)", k.KubeconfigSecret)
	}
	ns := k.Namespace
	if current, ok := loaded.Contexts[loaded.CurrentContext]; ns == "" && ok {
		ns = current.Namespace
	}
	if ns == "" {
		ns = dc.Namespace
	}
	// The management cluster reaches this one from outside its network (it is another cluster,
	// or as good as one: nothing says the management cluster routes to its Service range).
	return &docker.Infrastructure{
		Config: cfg, Namespace: ns, External: true,
		ID: fmt.Sprintf("secret/%s/%s/%s", dc.Namespace, k.KubeconfigSecret, ns), Version: secret.ResourceVersion,
	}, nil
}

// SelfContainedKubeconfig refuses what in a kubeconfig a team writes would act in the manager's pod
// instead of naming the infrastructure cluster: files (token, certificates, keys), which would
// be the manager's own (its service account token among them), commands (exec plugins) and
// auth provider plugins, and proxies. Inline data, tokens and passwords are the team's own.
func SelfContainedKubeconfig(cfg *clientcmdapi.Config) error {
	for name, c := range cfg.Clusters {
		switch {
		case c.CertificateAuthority != "":
			return errors.Errorf("names a file (cluster %s certificate-authority); give certificate-authority-data", name)
		case c.ProxyURL != "":
			return errors.Errorf("names a proxy (cluster %s proxy-url), which the manager does not go through", name)
		}
	}
	for name, a := range cfg.AuthInfos {
		switch {
		case a.TokenFile != "", a.ClientCertificate != "", a.ClientKey != "":
			return errors.Errorf("names a file (user %s token-file, client-certificate or client-key); give the token or the certificate's data", name)
		case a.Exec != nil:
			return errors.Errorf("runs a command (user %s exec), which the manager does not", name)
		case a.AuthProvider != nil:
			return errors.Errorf("uses an auth provider plugin (user %s), which the manager does not", name)
		}
	}
	return nil
}
