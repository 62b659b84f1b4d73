package containerd

import (
	"github.com/coreos/go-iptables/iptables"
	"github.com/pkg/errors"
)

// The iptables rules the runtime manages beside the CNI firewall plugin's, which accepts the
// containers' traffic and isolates the bridges from one another (see confList): a rule per
// bridge letting it forward its own frames, and the removal of the plugin's isolation rules,
// which it leaves behind, when a network is removed.

// forwardBridgedFrames adds (or removes) a rule letting a bridge forward frames between its own
// ports. The firewall plugin accepts traffic from and to the containers' own addresses only;
// where the FORWARD policy is DROP (Docker sets it) and bridged frames go through iptables
// (br_netfilter), pods routed between nodes by their pod addresses (flannel host-gw) were
// dropped. Traffic from one bridge to another is routed, not bridged, so isolation holds. The
// rule lives in CNI-ADMIN, the plugin's chain for administrators' rules.
func forwardBridgedFrames(bridge string, add bool) error {
	ipt, err := iptables.New()
	if err != nil {
		return errors.Wrap(err, "iptables")
	}
	rule := []string{"-i", bridge, "-o", bridge, "-m", "physdev", "--physdev-is-bridged",
		"-m", "comment", "--comment", "dockyard: " + bridge + " forwards its own frames", "-j", "ACCEPT"}
	exists, err := ipt.ChainExists("filter", adminChain)
	if err != nil {
		return errors.Wrap(err, "iptables")
	}
	if !add {
		if !exists {
			return nil
		}
		return errors.Wrapf(ipt.DeleteIfExists("filter", adminChain, rule...), "deleting the forwarding rule of bridge %s", bridge)
	}
	if !exists {
		if err := ipt.NewChain("filter", adminChain); err != nil {
			return errors.Wrapf(err, "creating chain %s", adminChain)
		}
	}
	return errors.Wrapf(ipt.AppendUnique("filter", adminChain, rule...), "letting bridge %s forward its own frames", bridge)
}

// adminChain is the firewall plugin's chain for administrators' rules, jumped to before its own.
const adminChain = "CNI-ADMIN"

// isolationComment marks the firewall plugin's bridge isolation rules.
const isolationComment = "CNI firewall plugin rules (ingressPolicy: same-bridge)"

// removeIsolationRules deletes the rules the firewall plugin added for a bridge to isolate it
// (it leaves them when the last container leaves).
func removeIsolationRules(bridge string) error {
	ipt, err := iptables.New()
	if err != nil {
		return errors.Wrap(err, "iptables")
	}
	rules := map[string][]string{
		"CNI-ISOLATION-STAGE-1": {"-i", bridge, "!", "-o", bridge, "-m", "comment", "--comment", isolationComment, "-j", "CNI-ISOLATION-STAGE-2"},
		"CNI-ISOLATION-STAGE-2": {"-o", bridge, "-m", "comment", "--comment", isolationComment, "-j", "DROP"},
	}
	for chain, rule := range rules {
		if ok, err := ipt.ChainExists("filter", chain); err != nil || !ok {
			continue
		}
		if err := ipt.DeleteIfExists("filter", chain, rule...); err != nil {
			return errors.Wrapf(err, "deleting the isolation rule of bridge %s", bridge)
		}
	}
	return nil
}
