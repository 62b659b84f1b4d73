package mgmt

import (
	"bytes"
	"context"
	"fmt"

	"github.com/pkg/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/images"
)

// networkPolicyDaemonSet is the DaemonSet of images/netpol/kube-router.yaml, in kube-system.
const networkPolicyDaemonSet = "dockyard-network-policy"

// ensureNetworkPolicy makes the cluster enforce NetworkPolicies, ingress and egress, when
// opts.NetworkPolicyImage names kube-router's image (which opts.Images loads into every node):
// it applies images/netpol/kube-router.yaml from the control plane node and waits until every
// node runs it. An infrastructure cluster whose teams are kept apart by the NetworkPolicies
// Dockyard makes needs it: flannel enforces none.
func ensureNetworkPolicy(ctx context.Context, node *docker.Node, c *Cluster, opts Options) error {
	if opts.NetworkPolicyImage == "" {
		return nil
	}
	manifest, err := images.NetworkPolicyManifest(opts.NetworkPolicyImage, []string{serviceSubnet})
	if err != nil {
		return err
	}
	opts.Logf("Applying the network policy controller (%s)", opts.NetworkPolicyImage)
	if out, err := node.Run(ctx, bytes.NewReader(manifest), "kubectl", "--kubeconfig", adminKubeconfig, "apply", "-f", "-"); err != nil {
		return errors.Wrapf(err, "management cluster %s: applying the network policy controller: %s", c.Name, out)
	}
	cs, err := clientOf(c.Kubeconfig)
	if err != nil {
		return err
	}
	return poll(ctx, readyTimeout, func() (bool, string, error) {
		ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, networkPolicyDaemonSet, metav1.GetOptions{})
		if err != nil {
			return false, fmt.Sprintf("reading DaemonSet %s: %v", networkPolicyDaemonSet, err), nil
		}
		st := ds.Status
		done := st.DesiredNumberScheduled > 0 && st.NumberReady == st.DesiredNumberScheduled && st.UpdatedNumberScheduled == st.DesiredNumberScheduled
		return done, fmt.Sprintf("network policy controller ready on %d of %d nodes", st.NumberReady, st.DesiredNumberScheduled), nil
	})
}
