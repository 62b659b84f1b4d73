package mgmt

import (
	"github.com/pkg/errors"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/dockyard-dev/dockyard/images"
)

// installCNIPath is where the CNI installer goes in the node, as in the flavors.
const installCNIPath = "/etc/dockyard/install-cni.sh"

// cniInstaller is the file and command that apply the CNI the node image ships: the script the
// flavors embed too (images/cni/install-cni.sh), so the management cluster and workload
// clusters get their pod network the same way, with Dockyard's node image or kindest/node.
func cniInstaller() ([]bootstrapv1.File, []string, error) {
	script, err := images.Files.ReadFile("cni/install-cni.sh")
	if err != nil {
		return nil, nil, errors.Wrap(err, "reading the CNI installer")
	}
	files := []bootstrapv1.File{{Path: installCNIPath, Owner: "root:root", Permissions: "0755", Content: string(script)}}
	return files, []string{"sh " + installCNIPath}, nil
}
