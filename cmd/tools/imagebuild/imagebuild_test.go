package imagebuild

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/klauspost/compress/gzip"
	"sigs.k8s.io/yaml"

	"github.com/dockyard-dev/dockyard/images"
)

func TestInputsHash(t *testing.T) {
	a := &Inputs{}
	a.Set("kubernetes", "v1.34.4")
	a.Set("flannel", "v0.28.10")
	b := &Inputs{}
	b.Set("flannel", "v0.28.10")
	b.Set("kubernetes", "v1.34.4")
	if a.Hash() != b.Hash() {
		t.Errorf("hash depends on the order inputs were set in")
	}

	c := &Inputs{}
	c.Set("kubernetes", "v1.34.5")
	c.Set("flannel", "v0.28.10")
	if a.Hash() == c.Hash() {
		t.Errorf("different values give the same hash")
	}

	// Field boundaries are part of the hash.
	d, e := &Inputs{}, &Inputs{}
	d.Set("ab", "c")
	e.Set("a", "bc")
	if d.Hash() == e.Hash() {
		t.Errorf(`("ab","c") and ("a","bc") hash alike`)
	}

	// Replacing a value is not appending one.
	f := &Inputs{}
	f.Set("kubernetes", "v1.34.3")
	f.Set("kubernetes", "v1.34.4")
	f.Set("flannel", "v0.28.10")
	if f.Hash() != a.Hash() {
		t.Errorf("setting a name twice does not replace the value")
	}
	if len(a.Hash()) != 64 {
		t.Errorf("hash %q is not hex SHA-256", a.Hash())
	}
}

func TestInputsSetFS(t *testing.T) {
	fs1 := fstest.MapFS{"a/x": {Data: []byte("1")}, "b": {Data: []byte("2")}}
	fs2 := fstest.MapFS{"a/x": {Data: []byte("1")}, "b": {Data: []byte("3")}}
	fs3 := fstest.MapFS{"a/y": {Data: []byte("1")}, "b": {Data: []byte("2")}}
	hash := func(fsys fstest.MapFS) string {
		in := &Inputs{}
		if err := in.SetFS("files", fsys); err != nil {
			t.Fatal(err)
		}
		return in.Hash()
	}
	if hash(fs1) == hash(fs2) {
		t.Errorf("file content not hashed")
	}
	if hash(fs1) == hash(fs3) {
		t.Errorf("file names not hashed")
	}
	if hash(fs1) != hash(fstest.MapFS{"b": {Data: []byte("2")}, "a/x": {Data: []byte("1")}}) {
		t.Errorf("hash of equal trees differs")
	}
}

func TestSourcesExcludeTests(t *testing.T) {
	src, _ := sourcesFS()
	in := &Inputs{}
	if err := in.SetFS("src", src); err != nil {
		t.Fatal(err)
	}
	entries, err := src.(filteredFS).ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "_test.go") {
			t.Errorf("test file %s is part of the build inputs", e.Name())
		}
		names = append(names, e.Name())
	}
	if !strings.Contains(strings.Join(names, " "), "node.go") {
		t.Errorf("sources %v lack node.go", names)
	}
}

const kubeadmList134 = `registry.k8s.io/kube-apiserver:v1.34.4
registry.k8s.io/kube-controller-manager:v1.34.4
registry.k8s.io/kube-scheduler:v1.34.4
registry.k8s.io/kube-proxy:v1.34.4
registry.k8s.io/coredns/coredns:v1.12.1
registry.k8s.io/pause:3.10.1
registry.k8s.io/etcd:3.6.5-0
`

func TestParseImageList(t *testing.T) {
	images, err := ParseImageList(kubeadmList134)
	if err != nil {
		t.Fatal(err)
	}
	want := map[Component]KubeadmImage{
		ComponentAPIServer:         {Ref: "registry.k8s.io/kube-apiserver:v1.34.4", Component: ComponentAPIServer, Tag: "v1.34.4"},
		ComponentControllerManager: {Ref: "registry.k8s.io/kube-controller-manager:v1.34.4", Component: ComponentControllerManager, Tag: "v1.34.4"},
		ComponentScheduler:         {Ref: "registry.k8s.io/kube-scheduler:v1.34.4", Component: ComponentScheduler, Tag: "v1.34.4"},
		ComponentProxy:             {Ref: "registry.k8s.io/kube-proxy:v1.34.4", Component: ComponentProxy, Tag: "v1.34.4"},
		ComponentCoreDNS:           {Ref: "registry.k8s.io/coredns/coredns:v1.12.1", Component: ComponentCoreDNS, Tag: "v1.12.1"},
		ComponentPause:             {Ref: "registry.k8s.io/pause:3.10.1", Component: ComponentPause, Tag: "3.10.1"},
		ComponentEtcd:              {Ref: "registry.k8s.io/etcd:3.6.5-0", Component: ComponentEtcd, Tag: "3.6.5-0"},
	}
	if len(images) != len(want) {
		t.Fatalf("got %d images, want %d: %+v", len(images), len(want), images)
	}
	for _, img := range images {
		if img != want[img.Component] {
			t.Errorf("got %+v, want %+v", img, want[img.Component])
		}
	}
	if img, ok := FindImage(images, ComponentPause); !ok || img.Tag != "3.10.1" {
		t.Errorf("FindImage(pause) = %+v, %v", img, ok)
	}

	// Another registry (kubeadm's imageRepository) keeps its name.
	images, err = ParseImageList("\nmirror.example.com:5000/k8s/pause:3.10.1\n\n")
	if err != nil || len(images) != 1 || images[0].Ref != "mirror.example.com:5000/k8s/pause:3.10.1" || images[0].Component != ComponentPause {
		t.Errorf("custom repository: %+v, %v", images, err)
	}
}

// A node image that may be upgraded preloads the next version's kube-proxy and CoreDNS, which an
// upgraded control plane rolls out to every node, and nothing it already has or that only new
// control plane nodes run.
func TestAddonsToPreloadForAnUpgrade(t *testing.T) {
	own, err := ParseImageList(`registry.k8s.io/kube-apiserver:v1.33.13
registry.k8s.io/kube-controller-manager:v1.33.13
registry.k8s.io/kube-scheduler:v1.33.13
registry.k8s.io/kube-proxy:v1.33.13
registry.k8s.io/coredns/coredns:v1.12.0
registry.k8s.io/pause:3.10
registry.k8s.io/etcd:3.5.24-0
`)
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseImageList(kubeadmList134)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, img := range addonsToPreload(next, own) {
		got = append(got, img.Ref)
	}
	if want := "registry.k8s.io/kube-proxy:v1.34.4 registry.k8s.io/coredns/coredns:v1.12.1"; strings.Join(got, " ") != want {
		t.Errorf("preloaded for the upgrade: %v, want %s", got, want)
	}
	if extra := addonsToPreload(own, own); len(extra) != 0 {
		t.Errorf("an upgrade to the same version preloads %v", extra)
	}
}

func TestParseImageListErrors(t *testing.T) {
	for name, out := range map[string]string{
		"empty":         "\n\n",
		"unknown image": kubeadmList134 + "registry.k8s.io/kube-something-new:v1.34.4\n",
		"no tag":        "registry.k8s.io/pause\n",
		"not a ref":     "W1122 03:00:00 could not fetch a Kubernetes version from the internet\n",
		"duplicate":     "registry.k8s.io/pause:3.10.1\nregistry.k8s.io/pause:3.10\n",
		"digest":        "registry.k8s.io/pause:3.10.1@sha256:" + strings.Repeat("a", 64) + "\n",
	} {
		if images, err := ParseImageList(out); err == nil {
			t.Errorf("%s: no error, got %+v", name, images)
		}
	}
}

func TestModuleVersions(t *testing.T) {
	for tag, want := range map[string]string{"3.6.5-0": "v3.6.5", "3.5.21-0": "v3.5.21", "3.6.5": "v3.6.5", "v3.6.5": "v3.6.5"} {
		if got, err := EtcdModuleVersion(tag); err != nil || got != want {
			t.Errorf("EtcdModuleVersion(%q) = %q, %v; want %q", tag, got, err, want)
		}
	}
	for _, tag := range []string{"", "latest", "2.4.0", "3.6"} {
		if got, err := EtcdModuleVersion(tag); err == nil {
			t.Errorf("EtcdModuleVersion(%q) = %q, want an error", tag, got)
		}
	}
	for tag, want := range map[string]string{"v1.12.1": "v1.12.1", "1.11.3": "v1.11.3"} {
		if got, err := CoreDNSModuleVersion(tag); err != nil || got != want {
			t.Errorf("CoreDNSModuleVersion(%q) = %q, %v; want %q", tag, got, err, want)
		}
	}
	if _, err := CoreDNSModuleVersion("v1.12"); err == nil {
		t.Errorf("CoreDNSModuleVersion(v1.12): no error")
	}
}

// containerdDefault16 is an excerpt of `containerd config default` of containerd 1.6.20.
const containerdDefault16 = `disabled_plugins = []
imports = []
oom_score = 0
root = "/var/lib/containerd"
version = 2

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]

  [plugins."io.containerd.grpc.v1.cri"]
    device_ownership_from_security_context = false
    restrict_oom_score_adj = false
    sandbox_image = "registry.k8s.io/pause:3.6"
    systemd_cgroup = false

    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/opt/cni/bin"
      conf_dir = "/etc/cni/net.d"
      max_conf_num = 1

    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      snapshotter = "overlayfs"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes]

        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
          runtime_type = "io.containerd.runc.v2"

          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
            BinaryName = ""
            SystemdCgroup = false

    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = ""

      [plugins."io.containerd.grpc.v1.cri".registry.mirrors]

[timeouts]
  "io.containerd.timeout.bolt.open" = "0s"
`

func TestRenderContainerdConfig(t *testing.T) {
	got, err := RenderContainerdConfig(strings.Replace(containerdDefault16, `disabled_plugins = []`, `disabled_plugins = ["cri"]`, 1), ContainerdOptions{
		SandboxImage:       "registry.k8s.io/pause:3.10.1",
		SystemdCgroup:      true,
		CNIBinDir:          "/opt/cni/bin",
		CNIConfDir:         "/etc/cni/net.d",
		RegistryConfigPath: "/etc/containerd/certs.d",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ section, key, want string }{
		{"", "disabled_plugins", "[]"},
		{"", "version", "2"},
		{criPlugin, "sandbox_image", `"registry.k8s.io/pause:3.10.1"`},
		{criPlugin, "restrict_oom_score_adj", "true"},
		{criPlugin, "systemd_cgroup", "false"}, // the deprecated v1-shim option stays off
		{criPlugin + ".containerd.runtimes.runc.options", "SystemdCgroup", "true"},
		{criPlugin + ".containerd.runtimes.runc.options", "BinaryName", `""`},
		{criPlugin + ".cni", "bin_dir", `"/opt/cni/bin"`},
		{criPlugin + ".cni", "conf_dir", `"/etc/cni/net.d"`},
		{criPlugin + ".registry", "config_path", `"/etc/containerd/certs.d"`},
		{"timeouts", "io.containerd.timeout.bolt.open", `"0s"`},
	} {
		if v, ok := lookupTOML(got, c.section, c.key); !ok || v != c.want {
			t.Errorf("[%s] %s = %q (found %v), want %q", c.section, c.key, v, ok, c.want)
		}
	}
	if strings.Count(got, "SystemdCgroup") != 1 || strings.Count(got, "sandbox_image") != 1 {
		t.Errorf("settings duplicated:\n%s", got)
	}
	// Indentation is kept.
	if !strings.Contains(got, "\n            SystemdCgroup = true\n") {
		t.Errorf("SystemdCgroup not replaced in place:\n%s", got)
	}
}

func TestRenderContainerdConfigErrors(t *testing.T) {
	opts := ContainerdOptions{SandboxImage: "registry.k8s.io/pause:3.10.1"}
	if _, err := RenderContainerdConfig(strings.Replace(containerdDefault16, "version = 2", "version = 3", 1), opts); err == nil {
		t.Errorf("containerd 2 configuration (version 3) accepted")
	}
	noRunc := strings.Replace(containerdDefault16, `[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`, "", 1)
	if _, err := RenderContainerdConfig(noRunc, opts); err == nil {
		t.Errorf("missing runc options table not reported")
	}
	if _, err := RenderContainerdConfig(containerdDefault16, ContainerdOptions{}); err == nil {
		t.Errorf("missing sandbox image not reported")
	}
}

func TestSetTOMLValue(t *testing.T) {
	doc := "a = 1\n\n[t]\n  x = \"old\"\n\n[t.sub]\n  x = 2\n"
	got, err := SetTOMLValue(doc, "t", "y", "true")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a = 1\n\n[t]\n  y = true\n  x = \"old\"\n\n[t.sub]\n  x = 2\n"; got != want {
		t.Errorf("adding a key:\n%s\nwant:\n%s", got, want)
	}
	got, err = SetTOMLValue(doc, "t.sub", "x", "3")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := lookupTOML(got, "t.sub", "x"); v != "3" {
		t.Errorf("t.sub.x = %q", v)
	}
	if v, _ := lookupTOML(got, "t", "x"); v != `"old"` {
		t.Errorf("t.x changed to %q", v)
	}
	got, err = SetTOMLValue(doc, "", "b", "2")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := lookupTOML(got, "", "b"); v != "2" {
		t.Errorf("root b = %q\n%s", v, got)
	}
	if _, err := SetTOMLValue(doc, "missing", "x", "1"); err == nil {
		t.Errorf("missing table not reported")
	}
	if _, err := SetTOMLValue("[t]\n  x = [\n  1,\n]\n", "t", "x", "[]"); err == nil {
		t.Errorf("multi-line value replaced")
	}
}

func TestContainerdVersion(t *testing.T) {
	for out, want := range map[string]string{
		"containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n": "1.6.20",
		"containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da":      "1.7.27",
		"containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7":                 "2.1.4",
	} {
		got, err := ContainerdVersion(out)
		if err != nil || got != want {
			t.Errorf("ContainerdVersion(%q) = %q, %v; want %q", out, got, err, want)
		}
	}
	if _, err := ContainerdVersion("containerd"); err == nil {
		t.Errorf("no error without a version")
	}
	for v, want := range map[string]bool{"1.6.20": false, "1.7.0": true, "1.7.27": true, "2.1.4": true, "": false} {
		if got := SupportsImagePinning(v); got != want {
			t.Errorf("SupportsImagePinning(%q) = %v", v, got)
		}
	}
}

func TestFlannelMainSource(t *testing.T) {
	upstream := `package main

import (
	"fmt"

	_ "github.com/flannel-io/flannel/pkg/backend/hostgw"
	_ "github.com/flannel-io/flannel/pkg/backend/tencentvpc"
	_ "github.com/flannel-io/flannel/pkg/backend/udp"
	_ "github.com/flannel-io/flannel/pkg/backend/vxlan"
)
`
	got, err := FlannelMainSource(upstream)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "tencentvpc") || strings.Contains(got, "backend/udp") {
		t.Errorf("backends not removed:\n%s", got)
	}
	if !strings.Contains(got, "backend/hostgw") || !strings.Contains(got, "backend/vxlan") {
		t.Errorf("other backends removed:\n%s", got)
	}
	if _, err := FlannelMainSource(strings.Replace(upstream, "\t_ \"github.com/flannel-io/flannel/pkg/backend/udp\"\n", "", 1)); err == nil {
		t.Errorf("a missing backend import is not reported")
	}
}

func TestImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"2.6.12-1+deb12u3": "2.6.12-1_deb12u3",
		"1.6.20~ds1-1":     "1.6.20_ds1-1",
		"1:2.3-4":          "1_2.3-4",
	} {
		if got := ImageTag(in); got != want {
			t.Errorf("ImageTag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParsePackages(t *testing.T) {
	got := parsePackages("haproxy\t2.6.12-1+deb12u3\nlibc6\t2.36-9+deb12u10\n\nbroken line\n")
	if len(got) != 2 || got["haproxy"] != "2.6.12-1+deb12u3" || got["libc6"] != "2.36-9+deb12u10" {
		t.Errorf("parsePackages = %v", got)
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/tmp/with\040space/proc`); got != "/tmp/with space/proc" {
		t.Errorf("unescapeMount = %q", got)
	}
	if got := unescapeMount(`/plain`); got != "/plain" {
		t.Errorf("unescapeMount = %q", got)
	}
}

func TestLayerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "l.tar.gz")
	write := func(w io.Writer) error {
		tb := newTarBuilder(w)
		if err := tb.File("/usr/local/bin/tool", 0o755, []byte("#!/bin/sh\n")); err != nil {
			return err
		}
		if err := tb.Symlink("/etc/systemd/system/multi-user.target.wants/kubelet.service", "/etc/systemd/system/kubelet.service"); err != nil {
			return err
		}
		if err := tb.Dir("/tmp", 0o1777); err != nil {
			return err
		}
		return tb.Close()
	}
	l, err := writeLayer(file, write)
	if err != nil {
		t.Fatal(err)
	}
	again, ok := openLayer(file)
	if !ok {
		t.Fatal("written layer not found")
	}
	if again.meta != l.meta {
		t.Errorf("metadata %+v != %+v", again.meta, l.meta)
	}
	// Reproducible: the same entries give the same digests.
	l2, err := writeLayer(filepath.Join(dir, "l2.tar.gz"), write)
	if err != nil {
		t.Fatal(err)
	}
	if l2.meta != l.meta {
		t.Errorf("layer not reproducible: %+v != %+v", l2.meta, l.meta)
	}

	rc, err := again.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	modes := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
	}
	want := "usr/ usr/local/ usr/local/bin/ usr/local/bin/tool etc/ etc/systemd/ etc/systemd/system/ etc/systemd/system/multi-user.target.wants/ etc/systemd/system/multi-user.target.wants/kubelet.service tmp/"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("entries:\n%s\nwant:\n%s", got, want)
	}
	if modes["tmp/"] != 0o1777 || modes["usr/local/bin/tool"] != 0o755 {
		t.Errorf("modes %v", modes)
	}

	// A truncated layer is not taken from the cache.
	if err := os.Truncate(file, 10); err != nil {
		t.Fatal(err)
	}
	if _, ok := openLayer(file); ok {
		t.Errorf("truncated layer accepted")
	}
}

func TestLayerDigests(t *testing.T) {
	dir := t.TempDir()
	l, err := writeLayer(filepath.Join(dir, "x.tar.gz"), func(w io.Writer) error {
		_, err := w.Write([]byte("not really a tar"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	compressed, _ := os.ReadFile(l.path)
	if hashHex(compressed) != strings.TrimPrefix(l.meta.Digest, "sha256:") || int64(len(compressed)) != l.meta.Size {
		t.Errorf("digest or size of the compressed file wrong: %+v", l.meta)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if hashHex(plain) != strings.TrimPrefix(l.meta.DiffID, "sha256:") {
		t.Errorf("diffID wrong: %+v", l.meta)
	}
}

func TestEmbeddedFiles(t *testing.T) {
	for _, name := range []string{
		"node/entrypoint", "node/kubelet.service", "node/10-kubeadm.conf", "node/rootfs.sh",
		"haproxy/haproxy.cfg", "iptables/iptables-wrapper", "kube-proxy/kube-proxy", "iptables/rootfs.sh",
		"cni/flannel.yaml", "cni/dockyard-cni-config", "cni/dockyard-flanneld", "pause/main.go", "rootfs/clean.sh",
	} {
		if len(mustEmbedded(name)) == 0 {
			t.Errorf("%s is empty", name)
		}
	}
	dropIn := string(mustEmbedded("node/10-kubeadm.conf"))
	for _, want := range []string{"KUBELET_KUBECONFIG_ARGS", "KUBELET_CONFIG_ARGS", "/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "$KUBELET_KUBEADM_ARGS", "$KUBELET_EXTRA_ARGS",
		"KUBELET_DOCKYARD_ARGS=--image-gc-high-threshold=100", "$KUBELET_DOCKYARD_ARGS $KUBELET_KUBEADM_ARGS"} {
		if !strings.Contains(dropIn, want) {
			t.Errorf("kubeadm drop-in lacks %s", want)
		}
	}
}

// The CNI manifest must name the flannel image dockyard-build builds by default, under its
// local name, never pulled.
func TestFlannelManifest(t *testing.T) {
	docs := strings.Split(string(mustEmbedded("cni/flannel.yaml")), "\n---\n")
	var found int
	for _, doc := range docs {
		var obj struct {
			Kind string `json:"kind"`
			Data map[string]string
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Image           string `json:"image"`
							ImagePullPolicy string `json:"imagePullPolicy"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("manifest: %v", err)
		}
		if obj.Kind == "ConfigMap" && !strings.Contains(obj.Data["net-conf.json"], `"host-gw"`) {
			t.Errorf("net-conf.json does not use host-gw: %s", obj.Data["net-conf.json"])
		}
		for _, c := range obj.Spec.Template.Spec.Containers {
			found++
			if c.Image != FlannelImageName(DefaultFlannelVersion) || c.ImagePullPolicy != "IfNotPresent" {
				t.Errorf("container image %s (%s), want %s (IfNotPresent)", c.Image, c.ImagePullPolicy, FlannelImageName(DefaultFlannelVersion))
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d containers, want flanneld and cni-config", found)
	}
	// images.Files is the same tree.
	if _, err := images.Files.ReadFile("cni/flannel.yaml"); err != nil {
		t.Error(err)
	}
}

func TestNodeContainerFlags(t *testing.T) {
	flags := strings.Join(NodeContainerFlags, " ")
	for _, want := range []string{"--cap-drop SYS_RESOURCE", "--cgroupns private", "--volume /var", "systempaths=unconfined", "--stop-signal SIGRTMIN+3"} {
		if !strings.Contains(flags, want) {
			t.Errorf("node flags lack %q", want)
		}
	}
	if strings.Contains(flags, "--privileged") {
		t.Errorf("node flags ask for --privileged, which these engines refuse")
	}
}
