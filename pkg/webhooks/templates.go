package webhooks

import (
	"context"
	"fmt"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"sigs.k8s.io/cluster-api/util/topology"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// +kubebuilder:webhook:verbs=create;update,path=/mutate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardclustertemplate,mutating=true,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardclustertemplates,versions=v1alpha1,name=default.dockyardclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardclustertemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardclustertemplates,versions=v1alpha1,name=validation.dockyardclustertemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardmachinetemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachinetemplates,versions=v1alpha1,name=validation.dockyardmachinetemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// DockyardClusterTemplate defaults and validates DockyardClusterTemplates.
type DockyardClusterTemplate struct {
	// DefaultLoadBalancerImage is written to spec.template.spec.loadBalancer.image when empty.
	DefaultLoadBalancerImage string
	// Policy is what clusters made from the template may ask of the engine's host.
	Policy *policy.Policy
	// Environment is what the webhook looks up beyond the policy.
	Environment Environment
}

// SetupWebhookWithManager registers the webhooks with the manager's webhook server.
func (w *DockyardClusterTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.DockyardClusterTemplate{}).
		WithDefaulter(w).
		WithValidator(w).
		Complete()
}

var (
	_ admission.Defaulter[*infrav1.DockyardClusterTemplate] = &DockyardClusterTemplate{}
	_ admission.Validator[*infrav1.DockyardClusterTemplate] = &DockyardClusterTemplate{}
)

// Default applies the load balancer image's default to the template, so clusters made from it
// and the topology controller's desired state agree. The endpoint's port is left to each
// DockyardCluster: a ClusterClass may make in-memory clusters (its inMemory patch), whose port
// is the manager's to choose; the DockyardCluster webhook defaults every other cluster's.
func (w *DockyardClusterTemplate) Default(_ context.Context, t *infrav1.DockyardClusterTemplate) error {
	defaultLoadBalancerImage(&t.Spec.Template.Spec, w.DefaultLoadBalancerImage)
	return nil
}

// ValidateCreate validates a new DockyardClusterTemplate.
func (w *DockyardClusterTemplate) ValidateCreate(ctx context.Context, t *infrav1.DockyardClusterTemplate) (admission.Warnings, error) {
	allErrs := validateClusterSpec(&t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	allErrs = append(allErrs, checkClusterPolicy(ctx, w.Policy, w.Environment, t.Namespace, nil, &t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))...)
	allErrs = append(allErrs, t.Spec.Template.ObjectMeta.Validate(field.NewPath("spec", "template", "metadata"))...)
	return nil, invalidIfAny(t.Name, "DockyardClusterTemplate", allErrs)
}

// ValidateUpdate rejects any change to the template's spec, except in the server-side-apply
// dry-run requests the topology controller sends to compute its diff.
func (w *DockyardClusterTemplate) ValidateUpdate(ctx context.Context, oldT, newT *infrav1.DockyardClusterTemplate) (admission.Warnings, error) {
	allErrs := validateClusterSpec(&newT.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	allErrs = append(allErrs, checkClusterPolicy(ctx, w.Policy, w.Environment, newT.Namespace, &oldT.Spec.Template.Spec, &newT.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))...)
	allErrs = append(allErrs, newT.Spec.Template.ObjectMeta.Validate(field.NewPath("spec", "template", "metadata"))...)
	immutable, err := templateSpecChanged(ctx, newT, oldT.Spec.Template.Spec, newT.Spec.Template.Spec)
	if err != nil {
		return nil, err
	}
	allErrs = append(allErrs, immutable...)
	return nil, invalidIfAny(newT.Name, "DockyardClusterTemplate", allErrs)
}

// ValidateDelete allows every deletion.
func (w *DockyardClusterTemplate) ValidateDelete(context.Context, *infrav1.DockyardClusterTemplate) (admission.Warnings, error) {
	return nil, nil
}

// DockyardMachineTemplate validates DockyardMachineTemplates.
type DockyardMachineTemplate struct {
	// Policy is what machines made from the template may ask of the engine's host.
	Policy *policy.Policy
}

// SetupWebhookWithManager registers the webhook with the manager's webhook server.
func (w *DockyardMachineTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.DockyardMachineTemplate{}).
		WithValidator(w).
		Complete()
}

var _ admission.Validator[*infrav1.DockyardMachineTemplate] = &DockyardMachineTemplate{}

// ValidateCreate validates a new DockyardMachineTemplate.
func (w *DockyardMachineTemplate) ValidateCreate(_ context.Context, t *infrav1.DockyardMachineTemplate) (admission.Warnings, error) {
	allErrs := validateMachineSpec(&t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	allErrs = append(allErrs, checkMachinePolicy(w.Policy, t.Namespace, nil, &t.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))...)
	allErrs = append(allErrs, t.Spec.Template.ObjectMeta.Validate(field.NewPath("spec", "template", "metadata"))...)
	return nil, invalidIfAny(t.Name, "DockyardMachineTemplate", allErrs)
}

// ValidateUpdate rejects any change to the template's spec, except in the server-side-apply
// dry-run requests the topology controller sends to compute its diff.
func (w *DockyardMachineTemplate) ValidateUpdate(ctx context.Context, oldT, newT *infrav1.DockyardMachineTemplate) (admission.Warnings, error) {
	allErrs := validateMachineSpec(&newT.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))
	allErrs = append(allErrs, checkMachinePolicy(w.Policy, newT.Namespace, &oldT.Spec.Template.Spec, &newT.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))...)
	allErrs = append(allErrs, newT.Spec.Template.ObjectMeta.Validate(field.NewPath("spec", "template", "metadata"))...)
	immutable, err := templateSpecChanged(ctx, newT, oldT.Spec.Template.Spec, newT.Spec.Template.Spec)
	if err != nil {
		return nil, err
	}
	allErrs = append(allErrs, immutable...)
	return nil, invalidIfAny(newT.Name, "DockyardMachineTemplate", allErrs)
}

// ValidateDelete allows every deletion.
func (w *DockyardMachineTemplate) ValidateDelete(context.Context, *infrav1.DockyardMachineTemplate) (admission.Warnings, error) {
	return nil, nil
}

// templateSpecChanged reports spec.template.spec as immutable when it changed, unless the
// request is a topology dry-run (Cluster API's topology controller applies templates with
// dryRun and a marker annotation to compute diffs; rejecting those would break ClusterClass).
func templateSpecChanged[T any](ctx context.Context, obj metav1.Object, oldSpec, newSpec T) (field.ErrorList, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected an admission request in the context: %v", err))
	}
	if topology.IsDryRunRequest(req, obj) {
		return nil, nil
	}
	if diff := cmp.Diff(oldSpec, newSpec); diff != "" {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "template", "spec"),
			"is immutable: create a new template and point its users (KubeadmControlPlane, MachineDeployment or ClusterClass) at it; diff (-old +new): "+diff)}, nil
	}
	return nil, nil
}
