package docker

import (
	"context"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
	"github.com/dockyard-dev/dockyard/pkg/patch"
)

// containerdConfigFile is containerd's configuration in Dockyard's and kind's node images.
const containerdConfigFile = "/etc/containerd/config.toml"

// ConfigureContainerd applies patches (kind's, see patch.Containerd) to the node's containerd
// configuration and restarts containerd, which then serves with it. A node whose configuration
// carries these patches already (the mark on its first line) is left alone, so a reconcile that
// runs again restarts nothing. No patches: nothing to do.
func (n *Node) ConfigureContainerd(ctx context.Context, patches patch.Containerd) error {
	if patches.Empty() {
		return nil
	}
	mark := patches.Mark()
	config, err := n.m.readFile(ctx, n.Name, containerdConfigFile)
	if err != nil {
		return errors.Wrapf(err, "reading %s of node %s", containerdConfigFile, n.Name)
	}
	if strings.HasPrefix(string(config), mark) {
		return nil
	}
	merged, err := patches.Apply(config)
	if err != nil {
		return errors.Wrapf(err, "node %s", n.Name)
	}
	if err := n.m.writeFile(ctx, n.Name, containerdConfigFile, append([]byte(mark), merged...)); err != nil {
		return errors.Wrapf(err, "writing %s of node %s", containerdConfigFile, n.Name)
	}
	// systemd's restart returns once containerd (Type=notify) serves again.
	if _, err := n.m.output(ctx, n.Name, command{argv: nodecmd.RestartContainerd()}); err != nil {
		return errors.Wrapf(err, "restarting containerd with containerdConfigPatches")
	}
	return nil
}
