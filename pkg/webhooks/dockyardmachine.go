package webhooks

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/dockyard-dev/dockyard/api/v1alpha1"
	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// +kubebuilder:webhook:verbs=create;update,path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-dockyardmachine,mutating=false,failurePolicy=fail,matchPolicy=Equivalent,groups=infrastructure.cluster.x-k8s.io,resources=dockyardmachines,versions=v1alpha1,name=validation.dockyardmachine.infrastructure.cluster.x-k8s.io,sideEffects=None,admissionReviewVersions=v1

// DockyardMachine validates DockyardMachines.
type DockyardMachine struct {
	// Policy is what a machine may ask of the engine's host.
	Policy *policy.Policy
}

// SetupWebhookWithManager registers the webhook with the manager's webhook server.
func (w *DockyardMachine) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.DockyardMachine{}).
		WithValidator(w).
		Complete()
}

var _ admission.Validator[*infrav1.DockyardMachine] = &DockyardMachine{}

// ValidateCreate validates a new DockyardMachine.
func (w *DockyardMachine) ValidateCreate(_ context.Context, m *infrav1.DockyardMachine) (admission.Warnings, error) {
	allErrs := validateMachineSpec(&m.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, validateFaultAnnotations(m.Annotations)...)
	allErrs = append(allErrs, checkMachinePolicy(w.Policy, m.Namespace, nil, &m.Spec, field.NewPath("spec"))...)
	return nil, invalidIfAny(m.Name, "DockyardMachine", allErrs)
}

// ValidateUpdate validates a change to a DockyardMachine.
func (w *DockyardMachine) ValidateUpdate(_ context.Context, oldM, newM *infrav1.DockyardMachine) (admission.Warnings, error) {
	allErrs := validateMachineSpec(&newM.Spec, field.NewPath("spec"))
	allErrs = append(allErrs, validateMachineUpdate(&oldM.Spec, &newM.Spec, field.NewPath("spec"))...)
	allErrs = append(allErrs, validateFaultAnnotations(newM.Annotations)...)
	allErrs = append(allErrs, checkMachinePolicy(w.Policy, newM.Namespace, &oldM.Spec, &newM.Spec, field.NewPath("spec"))...)
	return nil, invalidIfAny(newM.Name, "DockyardMachine", allErrs)
}

// ValidateDelete allows every deletion.
func (w *DockyardMachine) ValidateDelete(context.Context, *infrav1.DockyardMachine) (admission.Warnings, error) {
	return nil, nil
}
