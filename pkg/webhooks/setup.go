package webhooks

import (
	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dockyard-dev/dockyard/pkg/policy"
)

// Options configure Dockyard's webhooks.
type Options struct {
	// DefaultLoadBalancerImage is the haproxy image clusters get when they name none.
	DefaultLoadBalancerImage string
	// Policy is what objects may ask of the engine's host; nil is policy.Default().
	Policy *policy.Policy
	// Environment is what the cluster webhooks look up beyond the policy.
	Environment Environment
}

// SetupWithManager registers every Dockyard webhook with the manager's webhook server.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	p := opts.Policy
	if p == nil {
		p = policy.Default()
	}
	for name, w := range map[string]interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		"DockyardCluster":             &DockyardCluster{DefaultLoadBalancerImage: opts.DefaultLoadBalancerImage, Policy: p, Environment: opts.Environment},
		"DockyardClusterTemplate":     &DockyardClusterTemplate{DefaultLoadBalancerImage: opts.DefaultLoadBalancerImage, Policy: p, Environment: opts.Environment},
		"DockyardMachine":             &DockyardMachine{Policy: p},
		"DockyardMachineTemplate":     &DockyardMachineTemplate{Policy: p},
		"DockyardMachinePool":         &DockyardMachinePool{Policy: p},
		"DockyardMachinePoolTemplate": &DockyardMachinePoolTemplate{Policy: p},
	} {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return errors.Wrapf(err, "setting up the %s webhook", name)
		}
	}
	return nil
}
