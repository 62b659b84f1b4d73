package mgmt

import "fmt"

// cniManifest is where node images keep their CNI manifest, by kind's convention: kindest/node
// ships kindnetd there, Dockyard's node image flannel. Both are templates of the pod subnet.
const cniManifest = "/kind/manifests/default-cni.yaml"

// cniCommands apply the CNI the node image ships, rendered for the pod subnet, retrying while
// the API server settles. The template's "{{ .PodSubnet }}" is matched with character classes
// so the command itself holds no template braces.
func cniCommands(podSubnet string) []string {
	render := fmt.Sprintf(`sed -e 's#[{][{] *[.]PodSubnet *[}][}]#%s#g' %s`, podSubnet, cniManifest)
	apply := "kubectl --kubeconfig " + adminKubeconfig + " apply -f -"
	return []string{fmt.Sprintf(`(for i in $(seq 30); do %s | %s && exit 0; sleep 2; done; exit 1)`, render, apply)}
}
