package imagebuild

import (
	"strings"
	"testing"
)

// TestDefaultCNIManifest: the node image's /kind/manifests/default-cni.yaml stays a kind-style
// template and runs the flannel image the node preloads, for the default flannel version and
// for another one.
func TestDefaultCNIManifest(t *testing.T) {
	for _, version := range []string{DefaultFlannelVersion, "v0.99.1"} {
		ref := FlannelImageName(version)
		manifest, err := defaultCNIManifest(ref)
		if err != nil {
			t.Fatal(err)
		}
		text := string(manifest)
		if !strings.HasPrefix(text, "# would you kindly template this file\n") {
			t.Errorf("%s: the manifest does not start with kind's template marker", version)
		}
		for _, field := range []string{`"EnableIPv4": {{ .EnableIPv4 }},`, `"Network": "{{ .PodSubnetIPv4 }}",`,
			`"EnableIPv6": {{ .EnableIPv6 }},`, `"IPv6Network": "{{ .PodSubnetIPv6 }}",`} {
			if !strings.Contains(text, field) {
				t.Errorf("%s: flannel's network configuration lacks %s (the per-family fields install-cni.sh fills)", version, field)
			}
		}
		images := 0
		for _, line := range strings.Split(text, "\n") {
			if image, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
				images++
				if image != ref {
					t.Errorf("%s: the manifest runs %s, the node preloads %s", version, image, ref)
				}
			}
		}
		if images == 0 {
			t.Errorf("%s: no image in the manifest", version)
		}
	}
}
