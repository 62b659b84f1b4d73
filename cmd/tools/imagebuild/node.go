package imagebuild

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/pkg/errors"
	"golang.org/x/sync/errgroup"

	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// Defaults of the node image.
const (
	DefaultKubernetesVersion = "v1.34.4"
	DefaultFlannelVersion    = "v0.28.10"
)

// NodeImageName is the name of the node image of a Kubernetes version.
func NodeImageName(kubernetesVersion string) string {
	return "localhost/dockyard/node:" + kubernetesVersion
}

// NodePackages are the Debian packages of the node image on top of minbase: systemd as PID 1,
// containerd and runc, the CNI plugins, and the tools kubelet, kubeadm's preflight checks and
// kube-proxy use (iptables/nft, conntrack, ip, mount, losetup, nsenter, ethtool, socat, ...),
// and curl and jq, which bootstrap data may call as on kind's node images (Cluster API's own
// end-to-end flavors do).
var NodePackages = []string{
	"systemd", "systemd-sysv", "dbus",
	"containerd", "runc", "containernetworking-plugins",
	"iptables", "nftables", "conntrack", "ebtables", "iproute2", "kmod", "ethtool", "socat",
	"ca-certificates", "procps", "util-linux", "mount", "curl", "jq",
}

func nodeRootfs() RootfsSpec {
	return RootfsSpec{Name: "node", Packages: NodePackages, Script: mustEmbedded("node/rootfs.sh")}
}

// NodeOptions select what goes into the node image.
type NodeOptions struct {
	// KubernetesVersion such as v1.34.4.
	KubernetesVersion string
	// FlannelVersion of the preloaded CNI image.
	FlannelVersion string
	// AddonsOf are other Kubernetes versions whose add-on images (kube-proxy and CoreDNS, the
	// ones kubeadm runs on every node) are preloaded too, for clusters upgraded between them
	// with no registry to pull from: while the control plane rolls out, the new nodes run the
	// old version's add-ons; once it is upgraded, the nodes not yet upgraded run the new
	// version's. An image of the version upgraded from needs the add-ons of the one upgraded
	// to, and the other way round.
	AddonsOf []string
	// Repository is the image's repository; empty: localhost/dockyard/node.
	Repository string
}

// upgradeAddons are the images of a kubeadm that every node runs, whatever its own version
// (control plane components and etcd run only on control plane nodes of their own version;
// the sandbox image is the node's own).
var upgradeAddons = []Component{ComponentProxy, ComponentCoreDNS}

// nodeBinaries are the Kubernetes commands of the node image: the node's own and those of the
// control plane images.
var nodeBinaries = []string{"kubeadm", "kubelet", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}

// NodeImage builds localhost/dockyard/node:<version> (or o.Repository's) into the engine and
// returns its name. Its steps: the inputs that decide whether it is up to date, the parts
// (Debian root filesystems, Kubernetes binaries, the images kubeadm needs), the images it
// preloads, then the layers.
func (b *Builder) NodeImage(ctx context.Context, o NodeOptions) (string, error) {
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = DefaultKubernetesVersion
	}
	if o.FlannelVersion == "" {
		o.FlannelVersion = DefaultFlannelVersion
	}
	ref := NodeImageName(o.KubernetesVersion)
	if o.Repository != "" {
		ref = o.Repository + ":" + o.KubernetesVersion
	}
	k8s, err := gobuild.Kubernetes(o.KubernetesVersion, nodeBinaries...)
	if err != nil {
		return "", err
	}
	hash, err := b.nodeInputs(ctx, o, k8s)
	if err != nil {
		return "", err
	}
	if name, err := b.existing(ctx, hash, ref); err != nil || name != "" {
		return name, err
	}
	unlock, err := b.lock(ctx, "node-"+o.KubernetesVersion)
	if err != nil {
		return "", err
	}
	defer unlock()
	start := time.Now()

	parts, err := b.nodeParts(ctx, o, k8s)
	if err != nil {
		return "", err
	}
	preloaded, flannel, versions, err := b.nodePreloads(ctx, o, parts)
	if err != nil {
		return "", err
	}
	containerdVersion, err := ContainerdVersion(string(parts.nodeFS.Outputs["containerd-version"]))
	if err != nil {
		return "", err
	}
	stage, err := b.nodeLayers(o, parts, flannel, preloaded)
	if err != nil {
		return "", err
	}
	config := imageConfig{
		Entrypoint: []string{"/usr/local/bin/entrypoint"},
		Cmd:        []string{"/sbin/init"},
		Env:        []string{defaultPath, "container=docker"},
		StopSignal: "SIGRTMIN+3",
		Labels:     b.nodeLabels(o, parts.nodeFS, containerdVersion, preloaded, versions),
		Created:    time.Now().UTC().Truncate(time.Second),
	}
	preload, err := b.preloadLayer(ctx, o.KubernetesVersion, stage, config, preloaded, containerdVersion)
	if err != nil {
		return "", err
	}

	config.Labels[InputsLabel] = hash
	img, err := assemble(append(stage, preload), config)
	if err != nil {
		return "", err
	}
	if err := b.load(ctx, ref, img); err != nil {
		return "", err
	}
	b.logf("built %s in %s (%d MiB compressed)", ref, time.Since(start).Round(time.Second), imageSize(img)>>20)
	return ref, nil
}

// nodeLayers are the node image's layers below the preloaded images: the Debian root
// filesystem, the Kubernetes commands, and the node's files (containerd's configuration, the
// preloaded images' list, the CNI manifest).
func (b *Builder) nodeLayers(o NodeOptions, p *nodeParts, flannel namedImage, preloaded []namedImage) ([]v1.Layer, error) {
	pause, _ := FindImage(p.list, ComponentPause)
	containerdConfig, err := RenderContainerdConfig(string(p.nodeFS.Outputs["containerd-default.toml"]), ContainerdOptions{
		SandboxImage:       pause.Ref,
		SystemdCgroup:      true,
		CNIBinDir:          "/opt/cni/bin",
		CNIConfDir:         "/etc/cni/net.d",
		RegistryConfigPath: "/etc/containerd/certs.d",
	})
	if err != nil {
		return nil, err
	}
	k8sLayer, err := b.binaryLayer("node-kubernetes", []binaryFile{
		{Src: p.k8sBins["kubeadm"], Dst: "/usr/bin/kubeadm", Mode: 0o755},
		{Src: p.k8sBins["kubelet"], Dst: "/usr/bin/kubelet", Mode: 0o755},
		{Src: p.k8sBins["kubectl"], Dst: "/usr/bin/kubectl", Mode: 0o755},
	}, nil)
	if err != nil {
		return nil, err
	}
	cni, err := defaultCNIManifest(flannel.Ref)
	if err != nil {
		return nil, err
	}
	filesLayer, err := b.nodeFilesLayer(o.KubernetesVersion, containerdConfig, preloaded, cni)
	if err != nil {
		return nil, err
	}
	return []v1.Layer{p.nodeFS.Layer, k8sLayer, filesLayer}, nil
}

// nodeLabels say what a node image holds: versions of Kubernetes, its components, containerd,
// runc, systemd and the CNI plugins, and the preloaded images.
func (b *Builder) nodeLabels(o NodeOptions, nodeFS *Rootfs, containerdVersion string, preloaded []namedImage, versions map[Component]string) map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":       "dockyard-node",
		"org.opencontainers.image.description": "Kubernetes node for Dockyard (systemd, containerd, kubeadm; images preloaded)",
		"org.opencontainers.image.version":     o.KubernetesVersion,
		LabelPrefix + "built-by":               "dockyard-build",
		LabelPrefix + "version.kubernetes":     o.KubernetesVersion,
		LabelPrefix + "version.flannel":        o.FlannelVersion,
		LabelPrefix + "version.containerd":     containerdVersion,
		LabelPrefix + "version.runc":           nodeFS.Packages["runc"],
		LabelPrefix + "version.systemd":        nodeFS.Packages["systemd"],
		LabelPrefix + "version.cni-plugins":    nodeFS.Packages["containernetworking-plugins"],
		LabelPrefix + "debian.suite":           b.suite(),
		LabelPrefix + "images":                 imageRefs(preloaded),
	}
	for c, v := range versions {
		labels[LabelPrefix+"version."+string(c)] = v
	}
	return labels
}

// nodeInputs hashes what a node image is made of: an image with the same hash is up to date.
func (b *Builder) nodeInputs(ctx context.Context, o NodeOptions, k8s gobuild.Build) (string, error) {
	in, err := b.baseInputs(ctx)
	if err != nil {
		return "", err
	}
	in.Set("image", "node")
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	in.Set("flannel", o.FlannelVersion)
	if len(o.AddonsOf) > 0 {
		var others []any
		for _, v := range o.AddonsOf {
			other, err := gobuild.Kubernetes(v, nodeBinaries...)
			if err != nil {
				return "", errors.Wrapf(err, "Kubernetes %s, whose add-ons are preloaded", v)
			}
			others = append(others, other)
		}
		if err := in.SetJSON("addons-of", others); err != nil {
			return "", err
		}
	}
	for name, v := range map[string]any{"kubernetes": k8s, "node-rootfs": nodeRootfs(), "iptables-rootfs": iptablesRootfs()} {
		if err := in.SetJSON(name, v); err != nil {
			return "", err
		}
	}
	return in.Hash(), nil
}

// nodeParts are what a node image is assembled from.
type nodeParts struct {
	nodeFS, iptFS *Rootfs
	// k8sBins are the built Kubernetes commands, list the images their kubeadm needs.
	k8sBins map[string]string
	list    []KubeadmImage
	// addons are the other versions' add-ons (NodeOptions.AddonsOf).
	addons []versionAddons
}

// nodeParts builds the root filesystems (debootstrap: network, disk) while Go compiles
// Kubernetes (CPU), asks kubeadm which images it needs and builds their sources.
func (b *Builder) nodeParts(ctx context.Context, o NodeOptions, k8s gobuild.Build) (*nodeParts, error) {
	p := &nodeParts{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { p.nodeFS, err = b.Rootfs(gctx, nodeRootfs()); return err })
	g.Go(func() (err error) { p.iptFS, err = b.Rootfs(gctx, iptablesRootfs()); return err })
	buildErr := func() (err error) {
		if p.k8sBins, err = b.runBuild(gctx, k8s); err != nil {
			return err
		}
		if p.list, err = kubeadmImages(gctx, p.k8sBins["kubeadm"], o.KubernetesVersion); err != nil {
			return err
		}
		b.logf("kubeadm %s needs: %s", o.KubernetesVersion, imageRefs(p.list))
		all := p.list
		for _, v := range o.AddonsOf {
			a, err := b.addonsOf(gctx, v, all)
			if err != nil {
				return err
			}
			p.addons = append(p.addons, a)
			all = append(all, a.images...)
		}
		return b.prebuild(gctx, all, o.FlannelVersion)
	}()
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return p, buildErr
}

// nodePreloads makes the images a node image preloads: the control plane components, the
// CNI's (flannel), and other versions' add-ons; versions are the components' versions.
func (b *Builder) nodePreloads(ctx context.Context, o NodeOptions, p *nodeParts) (preloaded []namedImage, flannel namedImage, versions map[Component]string, err error) {
	components, versions, err := b.componentImages(ctx, p.list, p.k8sBins, p.iptFS)
	if err != nil {
		return nil, flannel, nil, err
	}
	if flannel, err = b.flannelImage(ctx, o.FlannelVersion, p.iptFS); err != nil {
		return nil, flannel, nil, err
	}
	preloaded = append(components, flannel)
	for _, a := range p.addons {
		if len(a.images) == 0 {
			continue
		}
		imgs, _, err := b.componentImages(ctx, a.images, a.bins, p.iptFS)
		if err != nil {
			return nil, flannel, nil, err
		}
		preloaded = append(preloaded, imgs...)
	}
	return preloaded, flannel, versions, nil
}

func imageRefs[T interface{ ref() string }](items []T) string {
	refs := make([]string, 0, len(items))
	for _, it := range items {
		refs = append(refs, it.ref())
	}
	sort.Strings(refs)
	return strings.Join(refs, ",")
}

func (i KubeadmImage) ref() string { return i.Ref }
func (i namedImage) ref() string   { return i.Ref }

// versionAddons are the add-on images of another Kubernetes version a node image preloads,
// with the binaries they are built from.
type versionAddons struct {
	bins   map[string]string
	images []KubeadmImage
}

// addonsOf builds Kubernetes at version and returns the add-ons its kubeadm runs on every node
// that the image does not have yet (have).
func (b *Builder) addonsOf(ctx context.Context, version string, have []KubeadmImage) (versionAddons, error) {
	other, err := gobuild.Kubernetes(version, nodeBinaries...)
	if err != nil {
		return versionAddons{}, err
	}
	bins, err := b.runBuild(ctx, other)
	if err != nil {
		return versionAddons{}, errors.Wrapf(err, "building Kubernetes %s, whose add-ons are preloaded", version)
	}
	all, err := kubeadmImages(ctx, bins["kubeadm"], version)
	if err != nil {
		return versionAddons{}, err
	}
	extra := addonsToPreload(all, have)
	b.logf("clusters upgraded from or to %s also need: %s", version, imageRefs(extra))
	return versionAddons{bins: bins, images: extra}, nil
}

// addonsToPreload returns the add-ons (upgradeAddons) of another version's list (all) that the
// image's list (have) lacks.
func addonsToPreload(all, have []KubeadmImage) []KubeadmImage {
	has := map[string]bool{}
	for _, img := range have {
		has[img.Ref] = true
	}
	var extra []KubeadmImage
	for _, img := range all {
		if slices.Contains(upgradeAddons, img.Component) && !has[img.Ref] {
			extra = append(extra, img)
		}
	}
	return extra
}

// kubeadmImages asks the built kubeadm which images its version needs.
func kubeadmImages(ctx context.Context, kubeadm, version string) ([]KubeadmImage, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubeadm, "config", "images", "list", "--kubernetes-version", version)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.Errorf("kubeadm config images list: %v: %s", err, stderr.String())
	}
	return ParseImageList(stdout.String())
}

// prebuild compiles every binary the component images need, so that the compilation overlaps
// with debootstrap; componentImages then finds them in the cache.
func (b *Builder) prebuild(ctx context.Context, list []KubeadmImage, flannelVersion string) error {
	var builds []gobuild.Build
	for _, img := range list {
		switch img.Component {
		case ComponentEtcd:
			v, err := EtcdModuleVersion(img.Tag)
			if err != nil {
				return err
			}
			build, err := gobuild.Etcd(v)
			if err != nil {
				return err
			}
			builds = append(builds, build)
		case ComponentCoreDNS:
			v, err := CoreDNSModuleVersion(img.Tag)
			if err != nil {
				return err
			}
			builds = append(builds, coreDNSBuild(v))
		case ComponentPause:
			builds = append(builds, pauseBuild(img.Tag))
		}
	}
	flannel, err := flannelBuild(ctx, flannelVersion)
	if err != nil {
		return err
	}
	for _, build := range append(builds, flannel) {
		if _, err := b.runBuild(ctx, build); err != nil {
			return err
		}
	}
	return nil
}

// flannelImageRef matches the flannel image references of images/cni/flannel.yaml.
var flannelImageRef = regexp.MustCompile(`localhost/dockyard/flannel:[^\s"']+`)

// defaultCNIManifest is the node image's /kind/manifests/default-cni.yaml: images/cni/flannel.yaml
// (a kind-style template of the pod subnet) running flannelRef, the flannel image the node
// preloads, whatever flannel version the image is built with.
func defaultCNIManifest(flannelRef string) ([]byte, error) {
	manifest := mustEmbedded("cni/flannel.yaml")
	if !flannelImageRef.Match(manifest) {
		return nil, errors.Errorf("images/cni/flannel.yaml names no %s image", flannelImageRef)
	}
	return flannelImageRef.ReplaceAllLiteral(manifest, []byte(flannelRef)), nil
}

// nodeFilesLayer holds Dockyard's files of the node: entrypoint, kubelet units, containerd
// configuration, sysctls, the kind-style version file and the node image's CNI manifest.
func (b *Builder) nodeFilesLayer(kubernetesVersion, containerdConfig string, preloaded []namedImage, cniManifest []byte) (*fileLayer, error) {
	var list strings.Builder
	for _, img := range preloaded {
		list.WriteString(img.Ref + "\n")
	}
	files := []struct {
		path    string
		mode    int64
		content []byte
	}{
		{"/usr/local/bin/entrypoint", 0o755, mustEmbedded("node/entrypoint")},
		{"/etc/systemd/system/kubelet.service", 0o644, mustEmbedded("node/kubelet.service")},
		{"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", 0o644, mustEmbedded("node/10-kubeadm.conf")},
		{"/etc/default/kubelet", 0o644, mustEmbedded("node/default-kubelet")},
		{"/etc/sysctl.d/99-dockyard.conf", 0o644, mustEmbedded("node/99-dockyard.conf")},
		{"/etc/containerd/config.toml", 0o644, []byte(containerdConfig)},
		{"/etc/dockyard/preloaded-images", 0o644, []byte(list.String())},
		{"/kind/version", 0o644, []byte(kubernetesVersion)},
		// The CNI follows the node image, by kind's convention: kind applies this file at
		// create time, Dockyard's flavors with images/cni/install-cni.sh.
		{"/kind/manifests/default-cni.yaml", 0o644, cniManifest},
	}
	in := &Inputs{}
	for _, f := range files {
		in.SetBytes(fmt.Sprintf("%s %o", f.path, f.mode), f.content)
	}
	return b.cachedLayer("node-files", in.Hash(), func(t *tarBuilder) error {
		for _, f := range files {
			if err := t.File(f.path, f.mode, f.content); err != nil {
				return err
			}
		}
		for _, d := range []string{"/etc/kubernetes/manifests", "/etc/cni/net.d", "/etc/containerd/certs.d", "/var/lib/kubelet"} {
			if err := t.Dir(d, 0o755); err != nil {
				return err
			}
		}
		return t.Symlink("/etc/systemd/system/multi-user.target.wants/kubelet.service", "/etc/systemd/system/kubelet.service")
	})
}

// preloadLayer returns a layer holding /var/lib/containerd with every image of preloaded
// imported and unpacked, so a node starts with them in place (Docker copies the image's /var
// into the node's fresh /var volume). Unpacking needs a running containerd, and containerd's
// overlay snapshots need /var on a volume (overlay on overlay fails), so the layer is captured
// from a build container of the node image itself.
func (b *Builder) preloadLayer(ctx context.Context, kubernetesVersion string, stage []v1.Layer, config imageConfig, preloaded []namedImage, containerdVersion string) (*fileLayer, error) {
	key, err := preloadKey(stage, preloaded, containerdVersion)
	if err != nil {
		return nil, err
	}
	kind := "node-preload-" + kubernetesVersion
	file := b.layerPath(kind, key)
	if l, ok := openLayer(file); ok {
		return l, nil
	}
	// The preloaded store is the largest layer; keep one per Kubernetes version.
	defer b.pruneLayers(kind, file)

	start := time.Now()
	stageRef, err := b.loadPreloadStage(ctx, kubernetesVersion, stage, config)
	if err != nil {
		return nil, err
	}

	// The build container is a Dockyard node, created by Dockyard's node layer with the
	// flags every node gets where --privileged is refused (see docker.NodeSpec), without a
	// network, in a build-only "cluster" whose label finds its container and /var volume.
	nodes := docker.NewManager(b.Runtime, docker.ManagerOptions{Privilege: docker.PrivilegeNever})
	cluster := docker.ClusterKey{Namespace: "dockyard-build", Name: "dockyard-build-" + short(key)}
	b.removeBuildNode(ctx, nodes, cluster) // left over by an interrupted build
	defer func() {
		// Not ctx: clean up after an interruption too.
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		b.removeBuildNode(c, nodes, cluster)
		b.dropImage(c, stageRef, "the preload build image")
	}()
	node, err := nodes.AddNode(ctx, docker.NodeSpec{
		Cluster: cluster,
		Machine: "preload",
		Image:   stageRef,
		Role:    docker.RoleWorker,
		Network: "none",
	})
	if err != nil {
		return nil, err
	}
	if err := waitForContainerd(ctx, node); err != nil {
		return nil, err
	}

	if err := b.importPreloaded(ctx, node, preloaded, containerdVersion); err != nil {
		return nil, err
	}
	layer, err := b.captureContainerdStore(ctx, node, file)
	if err != nil {
		return nil, err
	}
	size, _ := layer.Size()
	b.logf("[preload] done in %s (layer %d MiB)", time.Since(start).Round(time.Second), size>>20)
	return layer, nil
}

// preloadKey hashes what the preloaded store is made of: the stage's layers, the preloaded
// images and containerd's version.
func preloadKey(stage []v1.Layer, preloaded []namedImage, containerdVersion string) (string, error) {
	in := &Inputs{}
	for i, l := range stage {
		d, err := l.DiffID()
		if err != nil {
			return "", err
		}
		in.Set(fmt.Sprintf("stage-layer-%d", i), d.String())
	}
	for _, img := range preloaded {
		d, err := img.Image.Digest()
		if err != nil {
			return "", err
		}
		in.Set("image:"+img.Ref, d.String())
	}
	in.Set("containerd", containerdVersion)
	return in.Hash(), nil
}

// loadPreloadStage assembles the stage into the build image and loads it into the engine under
// the name it returns.
func (b *Builder) loadPreloadStage(ctx context.Context, kubernetesVersion string, stage []v1.Layer, config imageConfig) (string, error) {
	stageImg, err := assemble(stage, config)
	if err != nil {
		return "", err
	}
	// One stage name per Kubernetes version (builds of a version hold its lock), so that an
	// interrupted build or a runtime that cannot remove images leaves at most one behind.
	stageRef := "localhost/dockyard/node-build:" + kubernetesVersion
	refs, err := refMap(namedImage{Ref: stageRef, Image: stageImg})
	if err != nil {
		return "", err
	}
	b.logf("[preload] loading build image %s", stageRef)
	if err := b.loadImages(ctx, refs); err != nil {
		return "", err
	}
	return stageRef, nil
}

// removeBuildNode removes the build container of a build-only cluster, and only warns when it
// cannot.
func (b *Builder) removeBuildNode(ctx context.Context, nodes *docker.Manager, cluster docker.ClusterKey) {
	if err := nodes.DeleteCluster(ctx, cluster, "none"); err != nil {
		b.logf("warning: removing the build container of %s: %v", cluster, err)
	}
}

// importPreloaded imports the preloaded images into the build container's containerd, pins
// them where containerd can, and checks that it lists each.
func (b *Builder) importPreloaded(ctx context.Context, node *docker.Node, preloaded []namedImage, containerdVersion string) error {
	bundle, err := refMap(preloaded...)
	if err != nil {
		return err
	}
	b.logf("[preload] importing %d images into the build container's containerd", len(preloaded))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.MultiRefWrite(bundle, pw)) }()
	_, err = node.Run(ctx, pr, "ctr", "--namespace", "k8s.io", "images", "import", "-")
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return err
	}
	if SupportsImagePinning(containerdVersion) {
		for _, img := range preloaded {
			if _, err := node.Run(ctx, nil, "ctr", "--namespace", "k8s.io", "images", "label", img.Ref, "io.cri-containerd.pinned=pinned"); err != nil {
				return err
			}
		}
	}
	listed, err := node.Run(ctx, nil, "ctr", "--namespace", "k8s.io", "images", "list", "--quiet")
	if err != nil {
		return err
	}
	for _, img := range preloaded {
		if !containsLine(listed, img.Ref) {
			return errors.Errorf("preloading: %s missing from the node's containerd after import:\n%s", img.Ref, listed)
		}
	}
	return nil
}

// captureContainerdStore stops the build container's containerd and writes its
// /var/lib/containerd to the layer file.
func (b *Builder) captureContainerdStore(ctx context.Context, node *docker.Node, file string) (*fileLayer, error) {
	// A clean stop closes containerd's metadata database before it is copied.
	if _, err := node.Run(ctx, nil, "systemctl", "stop", "containerd"); err != nil {
		return nil, err
	}
	b.logf("[preload] capturing /var/lib/containerd")
	return writeLayer(file, func(w io.Writer) error {
		return node.RunTo(ctx, w, "tar", "--numeric-owner", "--sort=name",
			"--exclude=var/lib/containerd/tmpmounts/*", "-C", "/", "-cf", "-", "var/lib/containerd")
	})
}

// NodeContainerFlags are the docker run flags equivalent to the node containers Dockyard's
// node layer creates where --privileged is refused (docker.NodeSpec; Dockyard adds name,
// hostname, network, ports, labels and a named /var volume), for starting a node image by
// hand. The image build itself creates its build node through the node layer.
var NodeContainerFlags = []string{
	"--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
	"--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
	"--security-opt", "systempaths=unconfined",
	"--device-cgroup-rule", "a *:* rwm",
	"--cgroupns", "private",
	"--tmpfs", "/run", "--tmpfs", "/tmp",
	"--volume", "/var",
	"--volume", "/lib/modules:/lib/modules:ro",
	"--stop-signal", "SIGRTMIN+3",
	"--tty",
}

// waitForContainerd waits until containerd answers in the build node.
func waitForContainerd(ctx context.Context, node *docker.Node) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := node.Run(ctx, nil, "ctr", "--namespace", "k8s.io", "version")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			logs, _ := node.Console(ctx, 40)
			return errors.Errorf("containerd did not start in the build container: %v\n%s", err, logs)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// pruneLayers removes the cached layers of a kind other than keep.
func (b *Builder) pruneLayers(kind, keep string) {
	if _, ok := openLayer(keep); !ok {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(keep), kind+"-"+strings.Repeat("?", 16)+".tar.gz*"))
	for _, m := range matches {
		if m != keep && m != keep+".json" {
			_ = os.Remove(m)
		}
	}
}
