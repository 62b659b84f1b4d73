package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cluster-api/core/setup"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// ManagerCacheOptions are the manager's cache options: Cluster API's (of Secrets only those
// labelled with a cluster name, their data dropped but a kubeconfig's), and no object's
// managedFields. Nothing in the manager reads them (it writes with merge patches), and they are
// a large part of every cached DockyardMachine and Machine; Cluster API's kubeadm control plane
// and its ClusterCache strip them too.
func ManagerCacheOptions(scheme *runtime.Scheme, controllerName, watchNamespace string, syncPeriod time.Duration) ctrlcache.Options {
	o := setup.ManagerCacheOptions(scheme, controllerName, watchNamespace, syncPeriod)
	o.DefaultTransform = ctrlcache.TransformStripManagedFields()
	return o
}
