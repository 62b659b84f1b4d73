package webhooks

import (
	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Options configure Dockyard's webhooks.
type Options struct {
	// DefaultLoadBalancerImage is the haproxy image clusters get when they name none.
	DefaultLoadBalancerImage string
}

// SetupWithManager registers every Dockyard webhook with the manager's webhook server.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	for name, w := range map[string]interface{ SetupWebhookWithManager(ctrl.Manager) error }{
		"DockyardCluster":         &DockyardCluster{DefaultLoadBalancerImage: opts.DefaultLoadBalancerImage},
		"DockyardClusterTemplate": &DockyardClusterTemplate{DefaultLoadBalancerImage: opts.DefaultLoadBalancerImage},
		"DockyardMachine":         &DockyardMachine{},
		"DockyardMachineTemplate": &DockyardMachineTemplate{},
	} {
		if err := w.SetupWebhookWithManager(mgr); err != nil {
			return errors.Wrapf(err, "setting up the %s webhook", name)
		}
	}
	return nil
}
