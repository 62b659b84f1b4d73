package images

import (
	"strings"

	"github.com/pkg/errors"
)

// NetworkPolicyManifest is netpol/kube-router.yaml for a cluster: kube-router's firewall from
// image, told the cluster's Service ranges (one per family).
func NetworkPolicyManifest(image string, serviceCIDRs []string) ([]byte, error) {
	raw, err := Files.ReadFile("netpol/kube-router.yaml")
	if err != nil {
		return nil, errors.Wrap(err, "reading the network policy manifest")
	}
	if image == "" || len(serviceCIDRs) == 0 {
		return nil, errors.New("the network policy manifest needs its image and the cluster's Service ranges")
	}
	s := strings.ReplaceAll(string(raw), "KUBE_ROUTER_IMAGE", image)
	s = strings.ReplaceAll(s, "SERVICE_CIDR", strings.Join(serviceCIDRs, ","))
	for _, c := range serviceCIDRs {
		if strings.Contains(c, ":") {
			s = strings.Replace(s, "            - --health-port=20244\n", "            - --health-port=20244\n            - --enable-ipv6=true\n", 1)
			break
		}
	}
	return []byte(s), nil
}
