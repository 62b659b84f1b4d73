package controllers

import (
	"context"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/controllers/infrastructure"
)

// InfrastructureSecretReconciler lets the kubeconfig Secret of an infrastructure cluster go
// once no DockyardCluster of its namespace may still run nodes there: the DockyardCluster
// reconciler marks a Secret (infrastructure.MarkSecret) before the first thing is made on its
// infrastructure, and this one removes the mark's finalizer when the last cluster naming it is
// gone, whichever of several clusters deleted at once (a namespace deleted) goes last.
type InfrastructureSecretReconciler struct {
	// Client reads DockyardClusters and reads and writes Secrets; Secrets, the cache of the
	// marked ones (infrastructure.SecretsCache), tells when one changes.
	Client  client.Client
	Secrets cache.Cache
}

// SetupWithManager registers the reconciler: it watches the marked Secrets, and
// DockyardClusters for the Secrets they name.
func (r *InfrastructureSecretReconciler) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	toSecret := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
		dc, ok := o.(*infrav1.DockyardCluster)
		if !ok || dc.Spec.Infrastructure.Kubernetes == nil || dc.Spec.Infrastructure.Kubernetes.KubeconfigSecret == "" {
			return nil
		}
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: dc.Namespace, Name: dc.Spec.Infrastructure.Kubernetes.KubeconfigSecret}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("infrastructure-secret").
		WithOptions(options).
		WatchesRawSource(source.Kind(r.Secrets, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		Watches(&infrav1.DockyardCluster{}, toSecret).
		Complete(r)
}

// Reconcile removes a marked Secret's finalizer when no DockyardCluster holding its own
// finalizer names it.
func (r *InfrastructureSecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, req.NamespacedName, secret); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(secret, infrastructure.SecretFinalizer) {
		return ctrl.Result{}, nil
	}
	list := &infrav1.DockyardClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, errors.Wrapf(err, "listing the DockyardClusters of namespace %s", req.Namespace)
	}
	for i := range list.Items {
		k := list.Items[i].Spec.Infrastructure.Kubernetes
		if k != nil && k.KubeconfigSecret == req.Name && controllerutil.ContainsFinalizer(&list.Items[i], infrav1.ClusterFinalizer) {
			return ctrl.Result{}, nil
		}
	}
	patch := client.MergeFrom(secret.DeepCopy())
	controllerutil.RemoveFinalizer(secret, infrastructure.SecretFinalizer)
	if err := r.Client.Patch(ctx, secret, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, errors.Wrapf(err, "letting Secret %s go: no cluster's nodes run on its infrastructure any more", req.Name)
	}
	ctrl.LoggerFrom(ctx).Info("No cluster's nodes run on the infrastructure of this kubeconfig Secret any more: it may go")
	return ctrl.Result{}, nil
}
