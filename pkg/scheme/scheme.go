// Package scheme registers the kinds Dockyard reads and writes: Kubernetes', Cluster API's and
// Dockyard's own.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
)

// New returns a scheme with every kind Dockyard uses.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme,
		bootstrapv1.AddToScheme, controlplanev1.AddToScheme, infrav1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // registering a kind twice is a programming error
		}
	}
	return s
}
