package webhooks

import (
	"context"
	"encoding/json"

	"github.com/pkg/errors"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardcluster,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardclusters,versions=v1alpha1,name=default.dockyardcluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardcluster,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardclusters,versions=v1alpha1,name=validation.dockyardcluster.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// DockyardCluster defaults and validates DockyardClusters.
type DockyardCluster struct {
	// DefaultLoadBalancerImage is written to spec.loadBalancer.image when it is empty.
	DefaultLoadBalancerImage string
	// Policy is what a cluster may ask of the engine's host.
	Policy *policy.Policy
	// Environment is what the webhook looks up beyond the policy.
	Environment Environment
}

// SetupWebhookWithManager registers the webhooks with the manager's webhook server.
func (w *DockyardCluster) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.DockyardCluster{}).
		WithDefaulter(w).
		WithValidator(w).
		Complete()
}

var (
	_ admission.Defaulter[*infrav1.DockyardCluster] = &DockyardCluster{}
	_ admission.Validator[*infrav1.DockyardCluster] = &DockyardCluster{}
)

// Default sets the API server port and the load balancer image. An update that leaves the
// control plane endpoint out (the whole object replaced from the manifest it was created
// from, as Cluster API's KCP adoption does) keeps the endpoint Dockyard set, which is
// immutable once set.
func (w *DockyardCluster) Default(ctx context.Context, c *infrav1.DockyardCluster) error {
	if c.Spec.ControlPlaneEndpoint.Host == "" {
		if old, err := oldDockyardCluster(ctx); err != nil {
			return err
		} else if old != nil && old.Spec.ControlPlaneEndpoint.Host != "" {
			c.Spec.ControlPlaneEndpoint = old.Spec.ControlPlaneEndpoint
		}
	}
	if err := keepLoadBalancerHostPort(ctx, &c.Spec); err != nil {
		return err
	}
	defaultClusterSpec(&c.Spec, w.DefaultLoadBalancerImage)
	return nil
}

// oldDockyardCluster is the object an update replaces, nil for a create.
func oldDockyardCluster(ctx context.Context) (*infrav1.DockyardCluster, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return nil, nil //nolint:nilerr // outside an admission request there is no old object
	}
	old := &infrav1.DockyardCluster{}
	if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
		return nil, errors.Wrap(err, "decoding the DockyardCluster being updated")
	}
	return old, nil
}

// ValidateCreate validates a new DockyardCluster.
func (w *DockyardCluster) ValidateCreate(ctx context.Context, c *infrav1.DockyardCluster) (admission.Warnings, error) {
	allErrs := validateClusterSpec(&c.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, checkClusterPolicy(ctx, w.Policy, w.Environment, c.Namespace, nil, &c.Spec, field.NewPath("spec"))...)
	return nil, invalidIfAny(c.Name, "DockyardCluster", allErrs)
}

// ValidateUpdate validates a change to a DockyardCluster.
func (w *DockyardCluster) ValidateUpdate(ctx context.Context, oldC, newC *infrav1.DockyardCluster) (admission.Warnings, error) {
	allErrs := validateClusterSpec(&newC.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, validateClusterUpdate(&oldC.Spec, &newC.Spec, field.NewPath("spec"))...)
	allErrs = append(allErrs, checkClusterPolicy(ctx, w.Policy, w.Environment, newC.Namespace, &oldC.Spec, &newC.Spec, field.NewPath("spec"))...)
	return nil, invalidIfAny(newC.Name, "DockyardCluster", allErrs)
}

// ValidateDelete allows every deletion.
func (w *DockyardCluster) ValidateDelete(context.Context, *infrav1.DockyardCluster) (admission.Warnings, error) {
	return nil, nil
}

// defaultClusterSpec defaults a DockyardCluster: its endpoint's port (6443), but an in-memory
// cluster's, whose API server listens on a port of the manager that the controller fills in
// with the host; and the load balancer's image.
func defaultClusterSpec(spec *infrav1.DockyardClusterSpec, lbImage string) {
	if spec.ControlPlaneEndpoint.Port == 0 && spec.Infrastructure.InMemory == nil {
		spec.ControlPlaneEndpoint.Port = infrav1.DefaultAPIServerPort
	}
	defaultLoadBalancerImage(spec, lbImage)
}

func defaultLoadBalancerImage(spec *infrav1.DockyardClusterSpec, lbImage string) {
	if spec.LoadBalancer.Image == "" {
		spec.LoadBalancer.Image = lbImage
	}
}

// invalidIfAny turns field errors into the Invalid status error the API server returns.
func invalidIfAny(name, kind string, allErrs field.ErrorList) error {
	if len(allErrs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(infrav1.GroupVersion.WithKind(kind).GroupKind(), name, allErrs)
}
