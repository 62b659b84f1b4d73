package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardmachinepool,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachinepools,versions=v1alpha1,name=validation.dockyardmachinepool.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1
// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardmachinepooltemplate,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachinepooltemplates,versions=v1alpha1,name=validation.dockyardmachinepooltemplate.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// DockyardMachinePool validates DockyardMachinePools: their spec.template is the spec of every
// DockyardMachine of the pool, checked as a DockyardMachine's is, so a pool cannot ask for what
// the policy refuses its machines.
type DockyardMachinePool struct {
	// Policy is what the pool's machines may ask of the engine's host.
	Policy *policy.Policy
}

// SetupWebhookWithManager registers the webhook with the manager's webhook server.
func (w *DockyardMachinePool) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.DockyardMachinePool{}).
		WithValidator(w).
		Complete()
}

var _ admission.Validator[*infrav1.DockyardMachinePool] = &DockyardMachinePool{}

// ValidateCreate validates a new DockyardMachinePool.
func (w *DockyardMachinePool) ValidateCreate(_ context.Context, p *infrav1.DockyardMachinePool) (admission.Warnings, error) {
	return nil, invalidIfAny(p.Name, "DockyardMachinePool", validatePoolSpec(w.Policy, p.Namespace, nil, &p.Spec, field.NewPath("spec")))
}

// ValidateUpdate validates a change to a DockyardMachinePool; the template may change (the pool
// rolls its instances), and only what changes is held to the policy.
func (w *DockyardMachinePool) ValidateUpdate(_ context.Context, oldP, newP *infrav1.DockyardMachinePool) (admission.Warnings, error) {
	return nil, invalidIfAny(newP.Name, "DockyardMachinePool", validatePoolSpec(w.Policy, newP.Namespace, &oldP.Spec, &newP.Spec, field.NewPath("spec")))
}

// ValidateDelete allows every deletion.
func (w *DockyardMachinePool) ValidateDelete(context.Context, *infrav1.DockyardMachinePool) (admission.Warnings, error) {
	return nil, nil
}

// DockyardMachinePoolTemplate validates DockyardMachinePoolTemplates like the pools made from
// them; their spec is immutable but for the topology controller's dry runs.
type DockyardMachinePoolTemplate struct {
	// Policy is what the machines of pools made from the template may ask of the engine's host.
	Policy *policy.Policy
}

// SetupWebhookWithManager registers the webhook with the manager's webhook server.
func (w *DockyardMachinePoolTemplate) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.DockyardMachinePoolTemplate{}).
		WithValidator(w).
		Complete()
}

var _ admission.Validator[*infrav1.DockyardMachinePoolTemplate] = &DockyardMachinePoolTemplate{}

// ValidateCreate validates a new DockyardMachinePoolTemplate.
func (w *DockyardMachinePoolTemplate) ValidateCreate(_ context.Context, t *infrav1.DockyardMachinePoolTemplate) (admission.Warnings, error) {
	fldPath := field.NewPath("spec", "template")
	allErrs := validatePoolSpec(w.Policy, t.Namespace, nil, &t.Spec.Template.Spec, fldPath.Child("spec"))
	allErrs = append(allErrs, t.Spec.Template.ObjectMeta.Validate(fldPath.Child("metadata"))...)
	return nil, invalidIfAny(t.Name, "DockyardMachinePoolTemplate", allErrs)
}

// ValidateUpdate rejects any change to the template's spec, except in the server-side-apply
// dry-run requests the topology controller sends to compute its diff.
func (w *DockyardMachinePoolTemplate) ValidateUpdate(ctx context.Context, oldT, newT *infrav1.DockyardMachinePoolTemplate) (admission.Warnings, error) {
	fldPath := field.NewPath("spec", "template")
	allErrs := validatePoolSpec(w.Policy, newT.Namespace, &oldT.Spec.Template.Spec, &newT.Spec.Template.Spec, fldPath.Child("spec"))
	allErrs = append(allErrs, newT.Spec.Template.ObjectMeta.Validate(fldPath.Child("metadata"))...)
	immutable, err := templateSpecChanged(ctx, newT, oldT.Spec.Template.Spec, newT.Spec.Template.Spec)
	if err != nil {
		return nil, err
	}
	allErrs = append(allErrs, immutable...)
	return nil, invalidIfAny(newT.Name, "DockyardMachinePoolTemplate", allErrs)
}

// ValidateDelete allows every deletion.
func (w *DockyardMachinePoolTemplate) ValidateDelete(context.Context, *infrav1.DockyardMachinePoolTemplate) (admission.Warnings, error) {
	return nil, nil
}

// validatePoolSpec checks a pool's machine template as a DockyardMachine spec, and against the
// policy (on an update, only what changes).
func validatePoolSpec(p *policy.Policy, namespace string, oldSpec, newSpec *infrav1.DockyardMachinePoolSpec, fldPath *field.Path) field.ErrorList {
	tmplPath := fldPath.Child("template")
	allErrs := validateMachineSpec(&newSpec.Template, tmplPath)
	var oldTemplate *infrav1.DockyardMachineSpec
	if oldSpec != nil {
		oldTemplate = &oldSpec.Template
	}
	return append(allErrs, checkMachinePolicy(p, namespace, oldTemplate, &newSpec.Template, tmplPath)...)
}
