package infrastructure

import (
	"context"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// A kubeconfig Secret a cluster's nodes run on may have any name and any labels: Cluster API's
// cache of Secrets (the manager's) holds only those labelled with a cluster name, and keeps the
// data of kubeconfigs named *-kubeconfig only. So Dockyard marks the Secret when a cluster first
// makes something on its infrastructure: SecretLabel puts it in a cache of its own
// (SecretsCache), and SecretFinalizer keeps it until no cluster needs it (the
// InfrastructureSecret reconciler then removes it), so that deleting the namespace (which
// deletes everything in it at once) cannot take the credentials before the Pods they reach are
// removed. A ValidatingAdmissionPolicy (config/rbac/secret_policy.yaml)
// lets the manager change nothing else of a Secret.
const (
	// SecretLabel marks a kubeconfig Secret of an infrastructure cluster Dockyard uses.
	SecretLabel = "dockyard.x-k8s.io/infrastructure-kubeconfig"
	// SecretFinalizer keeps it while a DockyardCluster's nodes may run there.
	SecretFinalizer = "dockyard.x-k8s.io/infrastructure-kubeconfig"
)

// SecretsCache is a cache of the Secrets Dockyard marked (SecretLabel), in the namespace the
// manager watches (every namespace when empty), started with the manager.
func SecretsCache(mgr ctrl.Manager, namespace string) (cache.Cache, error) {
	marked, err := labels.NewRequirement(SecretLabel, selection.Exists, nil)
	if err != nil {
		return nil, errors.Wrap(err, "selecting the marked Secrets")
	}
	opts := cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.NewSelector().Add(*marked)}},
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, errors.Wrap(err, "making the cache of infrastructure kubeconfig Secrets")
	}
	if err := mgr.Add(c); err != nil {
		return nil, errors.Wrap(err, "adding the cache of infrastructure kubeconfig Secrets")
	}
	return c, nil
}

// MarkSecret marks the kubeconfig Secret a DockyardCluster names (when it names one): its label
// and finalizer, added once. c writes it; the change is a merge patch of those two fields only.
func MarkSecret(ctx context.Context, c client.Client, dc *infrav1.DockyardCluster) error {
	name := kubeconfigSecret(dc)
	if name == "" {
		return nil
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: name}, secret); err != nil {
		return errors.Wrapf(err, "reading spec.infrastructure.kubernetes.kubeconfigSecret %s", name)
	}
	if _, ok := secret.Labels[SecretLabel]; ok && controllerutil.ContainsFinalizer(secret, SecretFinalizer) {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[SecretLabel] = ""
	controllerutil.AddFinalizer(secret, SecretFinalizer)
	return errors.Wrapf(c.Patch(ctx, secret, patch), "marking Secret %s (spec.infrastructure.kubernetes.kubeconfigSecret) as the cluster's infrastructure", name)
}

func kubeconfigSecret(dc *infrav1.DockyardCluster) string {
	if k := dc.Spec.Infrastructure.Kubernetes; k != nil {
		return k.KubeconfigSecret
	}
	return ""
}
