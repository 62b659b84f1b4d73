package imagebuild

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// iptablesRootfs is the Debian layer of the images that program the node's packet filter
// (kube-proxy, flannel): iptables (nft and legacy), nft and conntrack, with the iptables
// commands routed through images/iptables/iptables-wrapper.
func iptablesRootfs() RootfsSpec {
	return RootfsSpec{
		Name:     "iptables",
		Packages: []string{"iptables", "nftables", "conntrack"},
		Files:    map[string][]byte{"iptables-wrapper": mustEmbedded("iptables/iptables-wrapper")},
		Script:   mustEmbedded("iptables/rootfs.sh"),
	}
}

// staticBaseLayer holds what a static Go program in an otherwise empty image may look for:
// user and group databases, a resolver order and a writable /tmp.
func (b *Builder) staticBaseLayer() (*fileLayer, error) {
	files := map[string]string{
		"/etc/passwd":        "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n",
		"/etc/group":         "root:x:0:\nnogroup:x:65534:\n",
		"/etc/nsswitch.conf": "hosts: files dns\n",
	}
	in := &Inputs{}
	_ = in.SetJSON("files", files)
	return b.cachedLayer("static-base", in.Hash(), func(t *tarBuilder) error {
		for _, p := range []string{"/etc/passwd", "/etc/group", "/etc/nsswitch.conf"} {
			if err := t.File(p, 0o644, []byte(files[p])); err != nil {
				return err
			}
		}
		if err := t.Dir("/root", 0o700); err != nil {
			return err
		}
		return t.Dir("/tmp", 0o1777)
	})
}

// binaryFile is a file of this machine to put into a layer.
type binaryFile struct {
	Src  string
	Dst  string
	Mode int64
}

// binaryLayer is a layer of files of this machine (binaries) and embedded files, keyed by
// their content.
func (b *Builder) binaryLayer(kind string, files []binaryFile, embedded map[string][]byte) (*fileLayer, error) {
	in := &Inputs{}
	for _, f := range files {
		h, err := fileutil.SHA256(f.Src)
		if err != nil {
			return nil, err
		}
		in.Set("file:"+f.Dst, fmt.Sprintf("%o %s", f.Mode, h))
	}
	for dst, content := range embedded {
		in.SetBytes("embedded:"+dst, content)
	}
	return b.cachedLayer(kind, in.Hash(), func(t *tarBuilder) error {
		for _, f := range files {
			if err := t.HostFile(f.Dst, f.Mode, f.Src); err != nil {
				return err
			}
		}
		for _, dst := range sortedKeys(embedded) {
			if err := t.File(dst, 0o755, embedded[dst]); err != nil {
				return err
			}
		}
		return nil
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runBuild builds a gobuild.Build and returns the path of each binary by name.
func (b *Builder) runBuild(ctx context.Context, build gobuild.Build) (map[string]string, error) {
	dir, err := b.goBuilder().Run(ctx, build)
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	for _, bin := range build.Binaries {
		paths[bin.Name] = filepath.Join(dir, bin.Name)
	}
	return paths, nil
}

// coreDNSBuild builds CoreDNS with its default plugin set.
func coreDNSBuild(version string) gobuild.Build {
	return gobuild.Build{
		Name:     "coredns",
		Version:  version,
		Require:  map[string]string{"github.com/coredns/coredns": version},
		Binaries: []gobuild.Binary{{Name: "coredns", Package: "github.com/coredns/coredns"}},
	}
}

// pauseBuild builds images/pause, reporting the tag kubeadm asks for as its version.
func pauseBuild(tag string) gobuild.Build {
	src := mustEmbedded("pause/main.go")
	in := &Inputs{}
	in.SetBytes("src", src)
	return gobuild.Build{
		Name:    "pause",
		Version: tag + "-" + short(in.Hash())[:8],
		Binaries: []gobuild.Binary{{
			Name:       "pause",
			MainSource: string(src),
			LDFlags:    []string{"-X main.version=" + tag},
		}},
	}
}

// flannelBackendsLeftOut are the backends removed from flannel's main package: tencentvpc
// needs a module the proxy does not serve, udp needs cgo. Dockyard uses host-gw.
var flannelBackendsLeftOut = []string{"tencentvpc", "udp"}

// FlannelMainSource derives the main package Dockyard builds flanneld from: flannel's own
// main.go (as published on the module proxy) without the imports of the backends in
// flannelBackendsLeftOut. Every one of them must be found, so a change upstream is noticed.
func FlannelMainSource(upstream string) (string, error) {
	lines := strings.Split(upstream, "\n")
	kept := lines[:0]
	removed := map[string]bool{}
	for _, line := range lines {
		drop := false
		for _, backend := range flannelBackendsLeftOut {
			if strings.TrimSpace(line) == `_ "github.com/flannel-io/flannel/pkg/backend/`+backend+`"` {
				drop, removed[backend] = true, true
			}
		}
		if !drop {
			kept = append(kept, line)
		}
	}
	for _, backend := range flannelBackendsLeftOut {
		if !removed[backend] {
			return "", errors.Errorf("flannel main.go: import of backend %q not found", backend)
		}
	}
	if !strings.Contains(upstream, "package main") {
		return "", errors.New("flannel main.go: not a main package")
	}
	return strings.Join(kept, "\n"), nil
}

// flannelBuild downloads flannel's module (to read its main.go) and returns the build.
func flannelBuild(ctx context.Context, version string) (gobuild.Build, error) {
	const module = "github.com/flannel-io/flannel"
	mod, err := (&gobuild.Builder{}).Download(ctx, module, version)
	if err != nil {
		return gobuild.Build{}, err
	}
	upstream, err := os.ReadFile(filepath.Join(mod.Dir, "main.go"))
	if err != nil {
		return gobuild.Build{}, err
	}
	src, err := FlannelMainSource(string(upstream))
	if err != nil {
		return gobuild.Build{}, err
	}
	in := &Inputs{}
	in.Set("src", src)
	return gobuild.Build{
		Name:    "flannel",
		Version: version + "-" + short(in.Hash())[:8],
		Require: map[string]string{module: version},
		Binaries: []gobuild.Binary{{
			Name:       "flanneld",
			MainSource: src,
			LDFlags:    []string{"-X " + module + "/pkg/version.Version=" + version},
		}},
	}, nil
}

// namedImage is an image and the reference it is stored under.
type namedImage struct {
	Ref   string
	Image v1.Image
}

func refMap(images ...namedImage) (map[name.Reference]v1.Image, error) {
	m := map[name.Reference]v1.Image{}
	for _, img := range images {
		tag, err := name.NewTag(img.Ref, name.StrictValidation)
		if err != nil {
			return nil, errors.Wrapf(err, "image name %q", img.Ref)
		}
		m[tag] = img.Image
	}
	return m, nil
}

func componentLabels(component, version string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":   component,
		"org.opencontainers.image.version": version,
		LabelPrefix + "built-by":           "dockyard-build",
	}
}

// flannelImage assembles localhost/dockyard/flannel:<version>: flanneld and the CNI
// configuration writer on the iptables layer.
func (b *Builder) flannelImage(ctx context.Context, version string, base *Rootfs) (namedImage, error) {
	build, err := flannelBuild(ctx, version)
	if err != nil {
		return namedImage{}, err
	}
	bins, err := b.runBuild(ctx, build)
	if err != nil {
		return namedImage{}, err
	}
	layer, err := b.binaryLayer("flannel",
		[]binaryFile{{Src: bins["flanneld"], Dst: "/opt/bin/flanneld", Mode: 0o755}},
		map[string][]byte{
			"/usr/local/bin/dockyard-cni-config": mustEmbedded("cni/dockyard-cni-config"),
			"/usr/local/bin/dockyard-flanneld":   mustEmbedded("cni/dockyard-flanneld"),
		})
	if err != nil {
		return namedImage{}, err
	}
	hash, err := b.flannelInputs(ctx, version)
	if err != nil {
		return namedImage{}, err
	}
	labels := componentLabels("flannel", version)
	labels[LabelPrefix+"version.flannel"] = version
	labels[InputsLabel] = hash
	img, err := assemble([]v1.Layer{base.Layer, layer}, imageConfig{
		Entrypoint: []string{"/usr/local/bin/dockyard-flanneld"},
		Labels:     labels,
	})
	if err != nil {
		return namedImage{}, err
	}
	return namedImage{Ref: FlannelImageName(version), Image: img}, nil
}

// FlannelImageName is the name of the flannel image of a version.
func FlannelImageName(version string) string {
	return "localhost/dockyard/flannel:" + version
}

// componentImages builds every image kubeadm lists. k8sBins holds the control plane binaries.
func (b *Builder) componentImages(ctx context.Context, list []KubeadmImage, k8sBins map[string]string, iptables *Rootfs) ([]namedImage, map[Component]string, error) {
	base, err := b.staticBaseLayer()
	if err != nil {
		return nil, nil, err
	}
	versions := map[Component]string{}
	var out []namedImage
	for _, want := range list {
		layers, entrypoint, version, err := b.componentRecipe(ctx, want, k8sBins, base, iptables)
		if err != nil {
			return nil, nil, err
		}
		img, err := assemble(layers, imageConfig{Entrypoint: entrypoint, Labels: componentLabels(string(want.Component), want.Tag)})
		if err != nil {
			return nil, nil, err
		}
		versions[want.Component] = version
		out = append(out, namedImage{Ref: want.Ref, Image: img})
	}
	return out, versions, nil
}

// componentRecipe returns the layers, entrypoint and version of the image of one component
// kubeadm lists.
func (b *Builder) componentRecipe(ctx context.Context, want KubeadmImage, k8sBins map[string]string, base *fileLayer, iptables *Rootfs) ([]v1.Layer, []string, string, error) {
	switch want.Component {
	case ComponentAPIServer, ComponentControllerManager, ComponentScheduler, ComponentProxy:
		layers, dst, err := b.kubernetesComponentLayers(want.Component, k8sBins, base, iptables)
		if err != nil {
			return nil, nil, "", err
		}
		return layers, []string{dst}, want.Tag, nil
	case ComponentEtcd:
		v, err := EtcdModuleVersion(want.Tag)
		if err != nil {
			return nil, nil, "", err
		}
		build, err := gobuild.Etcd(v)
		if err != nil {
			return nil, nil, "", err
		}
		l, err := b.builtBinaryLayer(ctx, build, "etcd", "/usr/local/bin/etcd")
		if err != nil {
			return nil, nil, "", err
		}
		return []v1.Layer{base, l}, []string{"/usr/local/bin/etcd"}, v, nil
	case ComponentCoreDNS:
		v, err := CoreDNSModuleVersion(want.Tag)
		if err != nil {
			return nil, nil, "", err
		}
		l, err := b.builtBinaryLayer(ctx, coreDNSBuild(v), "coredns", "/coredns")
		if err != nil {
			return nil, nil, "", err
		}
		return []v1.Layer{base, l}, []string{"/coredns"}, v, nil
	case ComponentPause:
		l, err := b.builtBinaryLayer(ctx, pauseBuild(want.Tag), "pause", "/pause")
		if err != nil {
			return nil, nil, "", err
		}
		return []v1.Layer{l}, []string{"/pause"}, want.Tag, nil
	default:
		return nil, nil, "", errors.Errorf("no recipe for %s", want.Ref)
	}
}

// kubernetesComponentLayers returns the layers of a Kubernetes component's image and the path
// of its entrypoint: the binary on the static base, kube-proxy behind its wrapper on iptables.
func (b *Builder) kubernetesComponentLayers(component Component, k8sBins map[string]string, base *fileLayer, iptables *Rootfs) ([]v1.Layer, string, error) {
	c := string(component)
	dst := "/usr/local/bin/" + c
	if component == ComponentProxy {
		// kubeadm runs /usr/local/bin/kube-proxy: there, a wrapper that keeps kube-proxy
		// from failing on the conntrack table size a container cannot change (see
		// images/kube-proxy/kube-proxy); the binary itself lives beside it.
		l, err := b.binaryLayer(c,
			[]binaryFile{{Src: k8sBins[c], Dst: "/usr/local/lib/kube-proxy/kube-proxy", Mode: 0o755}},
			map[string][]byte{dst: mustEmbedded("kube-proxy/kube-proxy")})
		if err != nil {
			return nil, "", err
		}
		return []v1.Layer{iptables.Layer, l}, dst, nil
	}
	l, err := b.binaryLayer(c, []binaryFile{{Src: k8sBins[c], Dst: dst, Mode: 0o755}}, nil)
	if err != nil {
		return nil, "", err
	}
	return []v1.Layer{base, l}, dst, nil
}

// builtBinaryLayer builds a Go binary and returns a layer holding it at dst (layer kind name).
func (b *Builder) builtBinaryLayer(ctx context.Context, build gobuild.Build, name, dst string) (*fileLayer, error) {
	bins, err := b.runBuild(ctx, build)
	if err != nil {
		return nil, err
	}
	return b.binaryLayer(name, []binaryFile{{Src: bins[name], Dst: dst, Mode: 0o755}}, nil)
}
