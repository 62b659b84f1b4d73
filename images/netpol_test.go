package images

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The network policy manifest runs kube-router's firewall only, from the image given, told the
// cluster's Service ranges; IPv6 is turned on when a range is IPv6. What it needs of the node
// (NET_ADMIN, NET_RAW, the xtables lock) it asks for, and no more: not privileged.
func TestNetworkPolicyManifest(t *testing.T) {
	for _, tc := range []struct {
		cidrs []string
		ipv6  bool
	}{{[]string{"10.96.0.0/12"}, false}, {[]string{"10.96.0.0/12", "fd00:10:96::/112"}, true}} {
		raw, err := NetworkPolicyManifest("localhost/dockyard/kube-router:v2.1.0", tc.cidrs)
		if err != nil {
			t.Fatal(err)
		}
		var ds *appsv1.DaemonSet
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				break
			}
			if obj["kind"] == "DaemonSet" {
				ds = &appsv1.DaemonSet{}
				b, _ := json.Marshal(obj)
				if err := json.Unmarshal(b, ds); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ds == nil {
			t.Fatalf("no DaemonSet in:\n%s", raw)
		}
		c := ds.Spec.Template.Spec.Containers[0]
		args := strings.Join(c.Args, " ")
		if c.Image != "localhost/dockyard/kube-router:v2.1.0" || !strings.Contains(args, "--run-firewall=true --run-router=false --run-service-proxy=false") ||
			!strings.Contains(args, "--service-cluster-ip-range="+strings.Join(tc.cidrs, ",")) || strings.Contains(args, "--enable-ipv6=true") != tc.ipv6 {
			t.Errorf("%v: image %s, args %s", tc.cidrs, c.Image, args)
		}
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || *sc.Privileged || len(sc.Capabilities.Add) != 2 {
			t.Errorf("%v: security context %+v, want NET_ADMIN and NET_RAW, not privileged", tc.cidrs, sc)
		}
	}
	if _, err := NetworkPolicyManifest("", nil); err == nil {
		t.Error("a manifest without its image and Service range was made")
	}
}
