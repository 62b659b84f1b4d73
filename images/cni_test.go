package images

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/test/ci"
)

// The paths install-cni.sh uses on a node, moved into a test directory.
var installCNIPaths = []string{"/kind/manifests/default-cni.yaml", "/run/dockyard-cni", "/etc/kubernetes/admin.conf"}

// fakeKubectl stands in for kubectl on the node: it answers kubeadm's ClusterConfiguration from
// a file (failing the first time when fail-once exists, like an API server that is not up yet),
// "applies" by copying the file to applied.yaml, and hands `kubectl kustomize` (local, no API)
// to a real kubectl.
const fakeKubectl = `#!/bin/sh
echo "$*" >>"$FAKE_DIR/calls"
[ "$KUBECONFIG" = "$FAKE_DIR/admin.conf" ] || { echo "KUBECONFIG=$KUBECONFIG" >&2; exit 3; }
case "$*" in
*"-n kube-system get configmap kubeadm-config -o jsonpath={.data.ClusterConfiguration}")
	if [ -e "$FAKE_DIR/fail-once" ]; then rm "$FAKE_DIR/fail-once"; echo "connection refused" >&2; exit 1; fi
	cat "$FAKE_DIR/cluster-configuration.yaml" ;;
*" apply -f "*)
	for a in "$@"; do last="$a"; done
	cp "$last" "$FAKE_DIR/applied.yaml" ;;
"kustomize "*)
	exec "$REAL_KUBECTL" "$@" ;;
*)
	echo "unexpected: kubectl $*" >&2; exit 2 ;;
esac
`

type installRun struct {
	applied string // the manifest applied, "" if none
	calls   string // the kubectl command lines
	output  string
	err     error
}

// runInstallCNI runs images/cni/install-cni.sh as a node would, against manifest as the node
// image's /kind/manifests/default-cni.yaml and clusterConfiguration as kubeadm's.
func runInstallCNI(t *testing.T, manifest, clusterConfiguration string, failOnce bool) installRun {
	t.Helper()
	script, err := Files.ReadFile("cni/install-cni.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := string(script)
	for _, p := range installCNIPaths {
		if !strings.Contains(text, p) {
			t.Fatalf("install-cni.sh no longer uses %s; update this test", p)
		}
		text = strings.ReplaceAll(text, p, filepath.Join(dir, filepath.Base(p)))
	}
	text = strings.ReplaceAll(text, "sleep 4", "sleep 0")
	files := map[string]string{
		"install-cni.sh":             text,
		"default-cni.yaml":           manifest,
		"cluster-configuration.yaml": clusterConfiguration,
		"bin/kubectl":                fakeKubectl,
	}
	if failOnce {
		files["fail-once"] = ""
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", filepath.Join(dir, "install-cni.sh"))
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"), "FAKE_DIR="+dir, "REAL_KUBECTL="+realKubectl())
	out, err := cmd.CombinedOutput()
	r := installRun{output: string(out), err: err}
	if b, err := os.ReadFile(filepath.Join(dir, "applied.yaml")); err == nil {
		r.applied = string(b)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
	r.calls = string(calls)
	return r
}

// realKubectl is a kubectl for `kubectl kustomize`: envtest's (make test sets
// KUBEBUILDER_ASSETS), else the one on PATH; "" when there is none.
func realKubectl() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "kubectl")); err == nil {
			return filepath.Join(dir, "kubectl")
		}
	}
	p, _ := exec.LookPath("kubectl")
	return p
}

// kindCNITemplate reads kindnetd's manifest from the kind module, as kindest/node ships it.
func kindCNITemplate(t *testing.T) string {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kind").Output()
	if err != nil {
		ci.Missing(t, fmt.Sprintf("the kind module is not in the module cache: %v", err))
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "pkg", "build", "nodeimage", "const_cni.go"))
	if err != nil {
		t.Fatal(err)
	}
	// const defaultCNIManifest = `...` + kindnetdImage + `...`
	m := regexp.MustCompile("(?s)defaultCNIManifest = `(.*?)`\\s*\\+\\s*kindnetdImage\\s*\\+\\s*`(.*?)`").FindSubmatch(src)
	if m == nil {
		t.Fatal("kind's const_cni.go no longer defines defaultCNIManifest as this test reads it; update the test")
	}
	return string(m[1]) + "docker.io/kindest/kindnetd:test" + string(m[2])
}

// kindTemplate renders a CNI manifest the way kind's installcni action does.
func kindTemplate(t *testing.T, manifest, podSubnet string) string {
	t.Helper()
	return goTemplate(t, manifest, &struct{ PodSubnet string }{PodSubnet: podSubnet})
}

// goTemplate renders a CNI manifest with text/template, as kind does, with the given fields.
func goTemplate(t *testing.T, manifest string, data any) string {
	t.Helper()
	tmpl, err := template.New("cni-manifest").Option("missingkey=error").Parse(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// installCNIFields are the template fields install-cni.sh gives a manifest: kind's PodSubnet
// and the per-family ones.
type installCNIFields struct {
	PodSubnet                    string
	PodSubnetIPv4, PodSubnetIPv6 string
	EnableIPv4, EnableIPv6       bool
}

// objects decodes a multi-document manifest, keyed by kind/namespace/name.
func objects(t *testing.T, name, manifest string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(manifest, -1) {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%s: document %d is not YAML: %v\n%s", name, i, err, doc)
		}
		if len(o) == 0 {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		objs[o["kind"].(string)+"/"+str(meta["namespace"])+"/"+str(meta["name"])] = o
	}
	return objs
}

func str(v any) string { s, _ := v.(string); return s }

// clusterConfiguration is kubeadm's ClusterConfiguration as the kubeadm-config ConfigMap holds
// it for a Cluster API cluster.
func clusterConfiguration(podSubnet string) string {
	return `apiServer:
  certSANs:
  - localhost
  - 127.0.0.1
apiVersion: kubeadm.k8s.io/v1beta4
clusterName: demo
controlPlaneEndpoint: 172.18.0.3:6443
kind: ClusterConfiguration
kubernetesVersion: v1.34.4
networking:
  dnsDomain: cluster.local
` + podSubnet + `  serviceSubnet: 10.96.0.0/12
`
}

// flannelNetConf is net-conf.json of flannel's ConfigMap in an applied manifest, decoded
// (numbers and booleans as JSON gives them).
func flannelNetConf(t *testing.T, manifest string) map[string]any {
	t.Helper()
	cm, ok := objects(t, "applied", manifest)["ConfigMap/kube-flannel/kube-flannel-cfg"]
	if !ok {
		t.Fatalf("no ConfigMap kube-flannel/kube-flannel-cfg in:\n%s", manifest)
	}
	text := str(cm["data"].(map[string]any)["net-conf.json"])
	var conf map[string]any
	if err := json.Unmarshal([]byte(text), &conf); err != nil {
		t.Fatalf("net-conf.json is not JSON: %v\n%s", err, text)
	}
	return conf
}

// TestInstallCNIFlannel: Dockyard's node image manifest, rendered and applied by the script,
// once the API server answers, for every IP family setup: flannel's net-conf.json enables the
// families of the cluster's pod subnets, each family's network its subnet; an absent family's
// network is its unspecified /0, which flannel parses like a missing key (unset: no masquerade
// or forward rules for it). The rendering is text/template's with the script's fields.
func TestInstallCNIFlannel(t *testing.T) {
	flannel, err := Files.ReadFile("cni/flannel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, podSubnet string // the ClusterConfiguration's podSubnet, as YAML
		want            installCNIFields
	}{
		{"ipv4", "10.200.0.0/16", installCNIFields{"10.200.0.0/16", "10.200.0.0/16", "::/0", true, false}},
		{"ipv6", "fd00:10:244::/56", installCNIFields{"fd00:10:244::/56", "0.0.0.0/0", "fd00:10:244::/56", false, true}},
		{"dual-stack", "10.244.0.0/16,fd00:10:244::/56",
			installCNIFields{"10.244.0.0/16,fd00:10:244::/56", "10.244.0.0/16", "fd00:10:244::/56", true, true}},
		{"dual-stack-ipv6-primary", "fd00:10:244::/56,10.244.0.0/16",
			installCNIFields{"fd00:10:244::/56,10.244.0.0/16", "10.244.0.0/16", "fd00:10:244::/56", true, true}},
		{"dual-stack-quoted-spaced", `"fd00:100:96::/48, 10.244.0.0/16"`,
			installCNIFields{"fd00:100:96::/48, 10.244.0.0/16", "10.244.0.0/16", "fd00:100:96::/48", true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runInstallCNI(t, string(flannel), clusterConfiguration("  podSubnet: "+tc.podSubnet+"\n"), true)
			if r.err != nil {
				t.Fatalf("install-cni.sh: %v\n%s", r.err, r.output)
			}
			if strings.Count(r.calls, "get configmap kubeadm-config") != 2 {
				t.Errorf("want a retry after the first failure; kubectl calls:\n%s", r.calls)
			}
			if strings.Contains(r.applied, "{{") {
				t.Errorf("template fields left after rendering:\n%s", r.applied)
			}
			if want := goTemplate(t, string(flannel), &tc.want); r.applied != want {
				t.Errorf("the script and text/template (fields %+v) render flannel's manifest differently:\n%s", tc.want, r.applied)
			}
			if n := len(objects(t, "flannel", r.applied)); n != 6 {
				t.Errorf("applied %d objects, want flannel's 6", n)
			}
			got := flannelNetConf(t, r.applied)
			want := map[string]any{
				"EnableIPv4":     tc.want.EnableIPv4,
				"Network":        tc.want.PodSubnetIPv4,
				"EnableIPv6":     tc.want.EnableIPv6,
				"IPv6Network":    tc.want.PodSubnetIPv6,
				"EnableNFTables": false,
				"Backend":        map[string]any{"Type": "host-gw"},
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("net-conf.json:\n%v\nwant\n%v", got, want)
			}
			// What flannel's config parsing needs: an IPv4 CIDR in Network, an IPv6 one in
			// IPv6Network (it fails on anything else, "" included), a real network for an
			// enabled family and the unset one (0.0.0.0/0, ::/0) for the other.
			for _, f := range []struct {
				enable, network string
				is4             bool
			}{{"EnableIPv4", "Network", true}, {"EnableIPv6", "IPv6Network", false}} {
				p, err := netip.ParsePrefix(str(got[f.network]))
				if err != nil || p.Addr().Is4() != f.is4 || p != p.Masked() {
					t.Errorf("%s %q is not a network of its family: %v", f.network, got[f.network], err)
					continue
				}
				if enabled := got[f.enable] == true; enabled != (p.Bits() != 0) {
					t.Errorf("%s is %v with %s %s", f.enable, enabled, f.network, p)
				}
			}
			if tc.want.EnableIPv4 && !strings.Contains(r.applied, `"Network": "`+tc.want.PodSubnetIPv4+`"`) {
				// test/images looks for this line.
				t.Errorf("flannel's network is not the IPv4 pod subnet:\n%s", r.applied)
			}
			if !strings.Contains(r.output, "for pod subnet "+tc.want.PodSubnet) {
				t.Errorf("the script does not report the pod subnet; output:\n%s", r.output)
			}
		})
	}
}

// TestInstallCNIFlannelUnsupportedPodSubnets: two subnets of one family (or more than two) is
// not a pod network flannel can run; the script says so at once rather than applying it.
func TestInstallCNIFlannelUnsupportedPodSubnets(t *testing.T) {
	flannel, err := Files.ReadFile("cni/flannel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, podSubnet := range []string{"10.244.0.0/16,10.245.0.0/16", "fd00:1::/56,fd00:2::/56", "10.244.0.0/16,fd00:1::/56,10.245.0.0/16"} {
		r := runInstallCNI(t, string(flannel), clusterConfiguration("  podSubnet: "+podSubnet+"\n"), false)
		if r.err == nil || r.applied != "" {
			t.Errorf("%s: install-cni.sh applied:\n%s", podSubnet, r.output)
			continue
		}
		if !strings.Contains(r.output, "more than one subnet of a family") || strings.Count(r.calls, "kubeadm-config") != 1 {
			t.Errorf("%s: want one attempt and the reason; output:\n%s\ncalls:\n%s", podSubnet, r.output, r.calls)
		}
	}
}

// TestInstallCNIKindnetd: kindest/node's manifest (kind's own, from the kind module) gets what
// kind gives it: the pod subnet (the whole comma-separated list, for dual-stack) in the
// template and CONTROL_PLANE_ENDPOINT in kindnetd's env.
func TestInstallCNIKindnetd(t *testing.T) {
	if realKubectl() == "" {
		ci.Missing(t, "no kubectl for `kubectl kustomize` (set KUBEBUILDER_ASSETS or put kubectl on PATH)")
	}
	kindnetd := kindCNITemplate(t)
	for _, marker := range []string{"would you kindly template this file", "would you kindly patch this file"} {
		if !strings.Contains(kindnetd, marker) {
			t.Errorf("kind's manifest lacks %q", marker)
		}
	}
	for _, podSubnet := range []string{"10.200.0.0/16", "fd00:10:244::/56", "10.244.0.0/16,fd00:10:244::/56", "fd00:10:244::/56,10.244.0.0/16"} {
		t.Run(podSubnet, func(t *testing.T) {
			r := runInstallCNI(t, kindnetd, clusterConfiguration("  podSubnet: "+podSubnet+"\n"), false)
			if r.err != nil {
				t.Fatalf("install-cni.sh: %v\n%s", r.err, r.output)
			}
			if strings.Contains(r.applied, "{{") {
				t.Errorf("template fields left after rendering:\n%s", r.applied)
			}
			// What kind applies: the template rendered, then the first container of each
			// DaemonSet with CONTROL_PLANE_ENDPOINT.
			want := objects(t, "kind", kindTemplate(t, kindnetd, podSubnet))
			daemonSets := 0
			podSubnetEnv := ""
			for _, o := range want {
				if o["kind"] != "DaemonSet" {
					continue
				}
				daemonSets++
				c := o["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
				for _, e := range c["env"].([]any) {
					if e := e.(map[string]any); e["name"] == "POD_SUBNET" {
						podSubnetEnv = str(e["value"])
					}
				}
				c["env"] = append(c["env"].([]any), map[string]any{"name": "CONTROL_PLANE_ENDPOINT", "value": "172.18.0.3:6443"})
			}
			if daemonSets != 1 {
				t.Errorf("kind's manifest has %d DaemonSets, want kindnet", daemonSets)
			}
			got := objects(t, "applied", r.applied)
			if !reflect.DeepEqual(got, want) {
				g, _ := yaml.Marshal(got)
				w, _ := yaml.Marshal(want)
				t.Errorf("applied:\n%s\nwant (kind's rendering and patch):\n%s", g, w)
			}
			if podSubnetEnv != podSubnet {
				t.Errorf("kindnetd's POD_SUBNET is %q, want the pod subnet %q", podSubnetEnv, podSubnet)
			}
		})
	}
}

// TestInstallCNIWithoutPodSubnet: a cluster without a pod subnet fails at once, saying why.
func TestInstallCNIWithoutPodSubnet(t *testing.T) {
	flannel, err := Files.ReadFile("cni/flannel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := runInstallCNI(t, string(flannel), clusterConfiguration(""), false)
	if r.err == nil || r.applied != "" {
		t.Fatalf("install-cni.sh succeeded without a pod subnet:\n%s", r.output)
	}
	if !strings.Contains(r.output, "no networking.podSubnet") || strings.Count(r.calls, "kubeadm-config") != 1 {
		t.Errorf("want one attempt and the reason; output:\n%s\ncalls:\n%s", r.output, r.calls)
	}
}

// TestInstallCNIScriptIsEmbeddable: the flavors inline the script in bootstrap data, which
// clusterctl substitutes ($) and cloud-init may render as jinja ({{ {% {#).
func TestInstallCNIScriptIsEmbeddable(t *testing.T) {
	script, err := Files.ReadFile("cni/install-cni.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"$", "{{", "{%", "{#"} {
		if bytes.Contains(script, []byte(s)) {
			t.Errorf("install-cni.sh contains %q", s)
		}
	}
}
