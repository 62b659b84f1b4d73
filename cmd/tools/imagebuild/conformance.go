package imagebuild

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// The images Kubernetes' conformance tests run, built without a registry. e2e.test names its
// images <registry>/<name>:<tag> (k8s.io/kubernetes/test/utils/image); the registries come from
// the YAML file KUBE_TEST_REPO_LIST names. ConformanceRepoList points them at one local prefix,
// `e2e.test --list-images` then says which names and tags to build, and ConformanceImages
// builds those it has a recipe for.

// DefaultConformancePrefix is where the conformance images are named by default. Dockyard's
// default load policy lets a cluster in namespace conformance load localhost/conformance/...
const DefaultConformancePrefix = "localhost/conformance/e2e"

// conformanceRegistries are the fields of e2e.test's registry list pointed at the local prefix:
// every registry an image of the suite can come from. Left at their defaults: invalidRegistry
// (a test expects the pull to fail), gcAuthenticatedRegistry and privateRegistry (images that
// need credentials; the tests using them cannot run without that registry).
var conformanceRegistries = []string{
	"buildImageRegistry", "cloudProviderGcpRegistry", "dockerLibraryRegistry", "gcEtcdRegistry",
	"gcRegistry", "promoterE2eRegistry", "sigStorageRegistry",
}

// ConformanceRepoList is the KUBE_TEST_REPO_LIST file that makes e2e.test name its images
// <prefix>/<name>:<tag>.
func ConformanceRepoList(prefix string) []byte {
	var b strings.Builder
	b.WriteString("# e2e.test's registries (KUBE_TEST_REPO_LIST), written by dockyard-build conformance.\n")
	for _, r := range conformanceRegistries {
		fmt.Fprintf(&b, "%s: %s\n", r, prefix)
	}
	return []byte(b.String())
}

// ConformanceImage is an image e2e.test asks for, under the local prefix.
type ConformanceImage struct {
	// Ref is the full name, <prefix>/<Name>:<Tag>.
	Ref string
	// Name is the repository below the prefix (agnhost, httpd, ...), Tag the tag.
	Name, Tag string
}

// conformanceRecipes are the images the [Conformance] tests of k8s.io/kubernetes/test/e2e run
// (read from the tests and their helpers) that ConformanceImages knows how to build. Both tags of
// httpd (httpd, httpd-new) and of nginx (nginx, nginx-new) are built from one recipe.
var conformanceRecipes = map[string]bool{
	"agnhost": true, "busybox": true, "etcd": true, "httpd": true, "jessie-dnsutils": true,
	"nautilus": true, "nginx": true, "nonewprivs": true, "pause": true, "sample-apiserver": true,
}

// SelectConformanceImages splits the output of `e2e.test --list-images` (run with
// ConformanceRepoList(prefix)) into the images to build, sorted and without duplicates, and the
// others: images no conformance test runs, or not under the prefix (the invalid and private
// registries' images).
func SelectConformanceImages(listImages, prefix string) (build []ConformanceImage, others []string) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(listImages))
	for sc.Scan() {
		ref := strings.TrimSpace(sc.Text())
		if ref == "" || seen[ref] {
			continue
		}
		seen[ref] = true
		rest, ok := strings.CutPrefix(ref, prefix+"/")
		i := strings.LastIndex(rest, ":")
		if !ok || i < 0 || !conformanceRecipes[rest[:i]] {
			others = append(others, ref)
			continue
		}
		build = append(build, ConformanceImage{Ref: ref, Name: rest[:i], Tag: rest[i+1:]})
	}
	sort.Slice(build, func(i, j int) bool { return build[i].Ref < build[j].Ref })
	sort.Strings(others)
	return build, others
}

// OnlyConformanceImages keeps the images whose Name is one of names (all of them when names is
// empty): a focused set needs a few. A name no image has is an error, naming the known ones.
func OnlyConformanceImages(images []ConformanceImage, names []string) ([]ConformanceImage, error) {
	if len(names) == 0 {
		return images, nil
	}
	var kept []ConformanceImage
	known := map[string]bool{}
	for _, img := range images {
		known[img.Name] = true
		if slices.Contains(names, img.Name) {
			kept = append(kept, img)
		}
	}
	for _, n := range names {
		if !known[n] {
			return nil, errors.Errorf("no conformance image is named %q (e2e.test runs %s)", n, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	return kept, nil
}

// Root filesystems of the conformance images.
func e2eAgnhostRootfs() RootfsSpec {
	return RootfsSpec{
		Name:     "e2e-agnhost",
		Packages: []string{"bash", "bind9-dnsutils", "curl", "netcat-openbsd", "iproute2", "iperf", "ca-certificates"},
		Script:   mustEmbedded("e2e/agnhost-rootfs.sh"),
	}
}

// e2eBusyboxRootfs builds BusyBox from source (images/e2e/busybox-rootfs.sh says why).
func e2eBusyboxRootfs(source []byte) RootfsSpec {
	return RootfsSpec{
		Name:     "e2e-busybox",
		Packages: []string{"gcc", "make", "libc6-dev", "bzip2"},
		Files:    map[string][]byte{"busybox.tar.bz2": source},
		Script:   mustEmbedded("e2e/busybox-rootfs.sh"),
	}
}

func e2eHTTPDRootfs() RootfsSpec {
	return RootfsSpec{
		Name:     "e2e-httpd",
		Packages: []string{"apache2"},
		Files: map[string][]byte{
			"index.html":       mustEmbedded("e2e/index.html"),
			"httpd-foreground": mustEmbedded("e2e/httpd-foreground"),
		},
		Script: mustEmbedded("e2e/httpd-rootfs.sh"),
	}
}

func e2eNginxRootfs() RootfsSpec {
	return RootfsSpec{Name: "e2e-nginx", Packages: []string{"nginx"}, Script: mustEmbedded("e2e/nginx-rootfs.sh")}
}

func e2eDNSUtilsRootfs() RootfsSpec {
	return RootfsSpec{Name: "e2e-dnsutils", Packages: []string{"dnsutils"}}
}

// layerFile is a file of a conformance image's layer: from this machine (Src) or given
// (Content), or a symbolic link (Link).
type layerFile struct {
	Dst     string
	Mode    int64
	Src     string
	Content []byte
	Link    string
}

// filesLayer is a cached layer of files, keyed by their content.
func (b *Builder) filesLayer(kind string, files []layerFile) (*fileLayer, error) {
	in := &Inputs{}
	for _, f := range files {
		switch {
		case f.Link != "":
			in.Set("link:"+f.Dst, f.Link)
		case f.Src != "":
			h, err := fileutil.SHA256(f.Src)
			if err != nil {
				return nil, err
			}
			in.Set("file:"+f.Dst, fmt.Sprintf("%o %s", f.Mode, h))
		default:
			in.Set("content:"+f.Dst, fmt.Sprintf("%o %s", f.Mode, hashOf(f.Content)))
		}
	}
	return b.cachedLayer(kind, in.Hash(), func(t *tarBuilder) error {
		for _, f := range files {
			var err error
			switch {
			case f.Link != "":
				err = t.Symlink(f.Dst, f.Link)
			case f.Src != "":
				err = t.HostFile(f.Dst, f.Mode, f.Src)
			default:
				err = t.File(f.Dst, f.Mode, f.Content)
			}
			if err != nil {
				return errors.Wrapf(err, "adding %s", f.Dst)
			}
		}
		return nil
	})
}

// conformanceBuild is what the conformance images are built from, made once per run.
type conformanceBuild struct {
	kubernetesVersion string
	// k8s holds the binaries of gobuild.KubernetesTest; k8sDir the k8s.io/kubernetes module.
	k8s    map[string]string
	k8sDir string
	rootfs map[string]*Rootfs
	base   *fileLayer
}

func (c *conformanceBuild) rootfsOf(ctx context.Context, b *Builder, spec RootfsSpec) (*Rootfs, error) {
	if r, ok := c.rootfs[spec.Name]; ok {
		return r, nil
	}
	r, err := b.Rootfs(ctx, spec)
	if err != nil {
		return nil, err
	}
	c.rootfs[spec.Name] = r
	return r, nil
}

// ConformanceImages builds the given images (SelectConformanceImages) into the engine from
// Debian's packages and the Go module proxy; an image whose layers and configuration did not
// change is not loaded again.
func (b *Builder) ConformanceImages(ctx context.Context, kubernetesVersion string, images []ConformanceImage) error {
	start := time.Now()
	unlock, err := b.lock(ctx, "conformance-images-"+kubernetesVersion)
	if err != nil {
		return err
	}
	defer unlock()
	k8s, err := gobuild.KubernetesTest(kubernetesVersion)
	if err != nil {
		return err
	}
	bins, err := b.runBuild(ctx, k8s)
	if err != nil {
		return err
	}
	mod, err := b.goBuilder().Download(ctx, "k8s.io/kubernetes", kubernetesVersion)
	if err != nil {
		return err
	}
	base, err := b.staticBaseLayer()
	if err != nil {
		return err
	}
	c := &conformanceBuild{kubernetesVersion: kubernetesVersion, k8s: bins, k8sDir: mod.Dir, rootfs: map[string]*Rootfs{}, base: base}
	for _, img := range images {
		layers, cfg, err := b.conformanceRecipe(ctx, c, img)
		if err != nil {
			return errors.Wrapf(err, "image %s", img.Ref)
		}
		if err := b.conformanceImage(ctx, img, layers, cfg); err != nil {
			return errors.Wrapf(err, "image %s", img.Ref)
		}
	}
	b.logf("conformance images ready in %s", time.Since(start).Round(time.Second))
	return nil
}

// conformanceImage assembles and loads one image unless the engine has it with the same
// layers and configuration.
func (b *Builder) conformanceImage(ctx context.Context, img ConformanceImage, layers []v1.Layer, cfg imageConfig) error {
	in := &Inputs{}
	in.Set("recipe", recipeVersion)
	in.Set("image", img.Ref)
	var digests []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		digests = append(digests, d.String())
	}
	if err := in.SetJSON("layers", digests); err != nil {
		return err
	}
	if err := in.SetJSON("config", cfg); err != nil {
		return err
	}
	hash := in.Hash()
	if name, err := b.existing(ctx, hash, img.Ref); err != nil || name != "" {
		return err
	}
	labels := componentLabels("e2e-"+img.Name, img.Tag)
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	labels[InputsLabel] = hash
	cfg.Labels = labels
	assembled, err := assemble(layers, cfg)
	if err != nil {
		return err
	}
	if err := b.load(ctx, img.Ref, assembled); err != nil {
		return err
	}
	b.logf("built %s (%d MiB compressed)", img.Ref, imageSize(assembled)>>20)
	return nil
}

// conformanceRecipe returns the layers and configuration of one image.
func (b *Builder) conformanceRecipe(ctx context.Context, c *conformanceBuild, img ConformanceImage) ([]v1.Layer, imageConfig, error) {
	switch img.Name {
	case "agnhost", "nautilus":
		return b.agnhostRecipe(ctx, c, img)
	case "busybox":
		return b.busyboxRecipe(ctx, c)
	case "httpd":
		fs, err := c.rootfsOf(ctx, b, e2eHTTPDRootfs())
		if err != nil {
			return nil, imageConfig{}, err
		}
		return []v1.Layer{fs.Layer}, imageConfig{Cmd: []string{"httpd-foreground"}, StopSignal: "SIGWINCH",
			Labels: map[string]string{LabelPrefix + "version.apache2": fs.Packages["apache2"]}}, nil
	case "nginx":
		fs, err := c.rootfsOf(ctx, b, e2eNginxRootfs())
		if err != nil {
			return nil, imageConfig{}, err
		}
		return []v1.Layer{fs.Layer}, imageConfig{Entrypoint: []string{"nginx", "-g", "daemon off;"}, StopSignal: "SIGQUIT",
			Labels: map[string]string{LabelPrefix + "version.nginx": fs.Packages["nginx"]}}, nil
	case "jessie-dnsutils":
		fs, err := c.rootfsOf(ctx, b, e2eDNSUtilsRootfs())
		if err != nil {
			return nil, imageConfig{}, err
		}
		return []v1.Layer{fs.Layer}, imageConfig{Cmd: []string{"bash"}}, nil
	case "nonewprivs":
		// nnp is setuid root: the test checks that allowPrivilegeEscalation: false keeps a
		// user's effective UID.
		l, err := b.filesLayer("e2e-nonewprivs", []layerFile{{Dst: "/usr/local/bin/nnp", Mode: 0o4755, Src: c.k8s[gobuild.NoNewPrivs]}})
		if err != nil {
			return nil, imageConfig{}, err
		}
		return []v1.Layer{c.base, l}, imageConfig{Cmd: []string{"nnp"}}, nil
	case "sample-apiserver":
		return b.sampleAPIServerRecipe(ctx, c)
	case "etcd":
		return b.etcdRecipe(ctx, c, img)
	case "pause":
		l, err := b.goBinaryLayer(ctx, pauseBuild(img.Tag), "pause", "/pause")
		if err != nil {
			return nil, imageConfig{}, err
		}
		return []v1.Layer{l}, imageConfig{Entrypoint: []string{"/pause"}}, nil
	}
	return nil, imageConfig{}, errors.Errorf("no recipe for %s", img.Name)
}

// agnhostRecipe returns the layers and configuration of agnhost, or of nautilus on top of it.
func (b *Builder) agnhostRecipe(ctx context.Context, c *conformanceBuild, img ConformanceImage) ([]v1.Layer, imageConfig, error) {
	// agnhost as upstream: its binary (and agnhost-2, for the entrypoint tests) in /, the
	// porter's certificate, CoreDNS for the DNS tests that run it. nautilus is agnhost's
	// test-webserver serving an image and data.json from /.
	fs, err := c.rootfsOf(ctx, b, e2eAgnhostRootfs())
	if err != nil {
		return nil, imageConfig{}, err
	}
	coredns, err := b.runBuild(ctx, coreDNSBuild(DefaultConformanceCoreDNSVersion))
	if err != nil {
		return nil, imageConfig{}, err
	}
	porter := filepath.Join(c.k8sDir, "test", "images", "agnhost", "porter")
	l, err := b.filesLayer("e2e-agnhost", []layerFile{
		{Dst: "/agnhost", Mode: 0o755, Src: c.k8s[gobuild.Agnhost]},
		{Dst: "/agnhost-2", Link: "agnhost"},
		{Dst: "/localhost.crt", Mode: 0o644, Src: filepath.Join(porter, "localhost.crt")},
		{Dst: "/localhost.key", Mode: 0o644, Src: filepath.Join(porter, "localhost.key")},
		{Dst: "/coredns", Mode: 0o755, Src: coredns["coredns"]},
	})
	if err != nil {
		return nil, imageConfig{}, err
	}
	cfg := imageConfig{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, WorkingDir: "/"}
	if img.Name == "agnhost" {
		return []v1.Layer{fs.Layer, l}, cfg, nil
	}
	html := filepath.Join(c.k8sDir, "test", "images", "nautilus", "html")
	n, err := b.filesLayer("e2e-nautilus", []layerFile{
		{Dst: "/nautilus.jpg", Mode: 0o644, Src: filepath.Join(html, "nautilus.jpg")},
		{Dst: "/data.json", Mode: 0o644, Src: filepath.Join(html, "data.json")},
	})
	if err != nil {
		return nil, imageConfig{}, err
	}
	cfg.Cmd = []string{"test-webserver"}
	return []v1.Layer{fs.Layer, l, n}, cfg, nil
}

// busyboxRecipe returns the layers and configuration of busybox: the binary built from source
// and a link per applet, on the base.
func (b *Builder) busyboxRecipe(ctx context.Context, c *conformanceBuild) ([]v1.Layer, imageConfig, error) {
	source, err := b.sourceTarball(ctx, busyboxSource)
	if err != nil {
		return nil, imageConfig{}, err
	}
	fs, err := c.rootfsOf(ctx, b, e2eBusyboxRootfs(source))
	if err != nil {
		return nil, imageConfig{}, err
	}
	bin, applets := fs.Outputs["busybox"], strings.Fields(string(fs.Outputs["busybox-applets"]))
	if len(bin) == 0 || len(applets) == 0 {
		return nil, imageConfig{}, errors.New("the busybox root filesystem has no busybox binary or applet list")
	}
	files := busyboxFiles(bin, applets)
	l, err := b.filesLayer("e2e-busybox", files)
	if err != nil {
		return nil, imageConfig{}, err
	}
	return []v1.Layer{c.base, l}, imageConfig{Cmd: []string{"sh"},
		Labels: map[string]string{LabelPrefix + "version.busybox": busyboxSource.Pool}}, nil
}

// sampleAPIServerRecipe returns the layers and configuration of sample-apiserver, built at
// the version the conformance tests' Kubernetes requires.
func (b *Builder) sampleAPIServerRecipe(ctx context.Context, c *conformanceBuild) ([]v1.Layer, imageConfig, error) {
	build, err := gobuild.SampleAPIServer(c.kubernetesVersion)
	if err != nil {
		return nil, imageConfig{}, err
	}
	l, err := b.goBinaryLayer(ctx, build, "sample-apiserver", "/sample-apiserver")
	if err != nil {
		return nil, imageConfig{}, err
	}
	return []v1.Layer{c.base, l}, imageConfig{Entrypoint: []string{"/sample-apiserver"},
		Labels: map[string]string{LabelPrefix + "version.sample-apiserver": build.Version}}, nil
}

// etcdRecipe returns the layers and configuration of etcd, built at the module version of the
// image's tag.
func (b *Builder) etcdRecipe(ctx context.Context, c *conformanceBuild, img ConformanceImage) ([]v1.Layer, imageConfig, error) {
	v, err := EtcdModuleVersion(img.Tag)
	if err != nil {
		return nil, imageConfig{}, err
	}
	build, err := gobuild.Etcd(v)
	if err != nil {
		return nil, imageConfig{}, err
	}
	l, err := b.goBinaryLayer(ctx, build, "etcd", "/usr/local/bin/etcd")
	if err != nil {
		return nil, imageConfig{}, err
	}
	return []v1.Layer{c.base, l}, imageConfig{Entrypoint: []string{"/usr/local/bin/etcd"},
		Labels: map[string]string{LabelPrefix + "version.etcd": v}}, nil
}

// goBinaryLayer builds a Go binary and returns a layer holding it at dst (layer "e2e-<name>").
func (b *Builder) goBinaryLayer(ctx context.Context, build gobuild.Build, name, dst string) (v1.Layer, error) {
	bins, err := b.runBuild(ctx, build)
	if err != nil {
		return nil, err
	}
	return b.filesLayer("e2e-"+name, []layerFile{{Dst: dst, Mode: 0o755, Src: bins[name]}})
}

// DefaultConformanceCoreDNSVersion is the CoreDNS the agnhost image carries as /coredns (the
// upstream image downloads a CoreDNS release; the one kubeadm v1.34 deploys is built already).
const DefaultConformanceCoreDNSVersion = "v1.12.1"

// busyboxFiles lays out the busybox image: the binary and a link per applet in /bin.
func busyboxFiles(busybox []byte, applets []string) []layerFile {
	files := []layerFile{{Dst: "/bin/busybox", Mode: 0o755, Content: busybox}}
	for _, a := range applets {
		if a != "busybox" && !strings.Contains(a, "/") {
			files = append(files, layerFile{Dst: "/bin/" + a, Link: "busybox"})
		}
	}
	return files
}

// ConformanceRunnerRepository is where Cluster API's kubetest (K8SConformanceSpec,
// ClusterUpgradeConformanceSpec) looks for Kubernetes' conformance image:
// registry.k8s.io/conformance:<the workload cluster's version>.
const ConformanceRunnerRepository = "registry.k8s.io/conformance"

// conformanceRunnerRepoList is where the runner image keeps its KUBE_TEST_REPO_LIST file.
const conformanceRunnerRepoList = "/etc/dockyard/conformance/repo-list.yaml"

// ConformanceRunnerImage builds the image Cluster API's kubetest runs, under ref: ginkgo,
// e2e.test and kubectl of kubernetesVersion in /usr/local/bin, as Kubernetes publishes it
// (kubetest runs /usr/local/bin/ginkgo with /usr/local/bin/e2e.test). One difference: the image
// sets KUBE_TEST_REPO_LIST to ConformanceRepoList(prefix), so the tests run the images
// ConformanceImages built under prefix instead of pulling registry.k8s.io's; kubetest sets that
// variable only when its input names a list, which the Cluster API specs never do. e2eTest and
// ginkgo are the binaries to use (gobuild.KubernetesTest's, and ginkgo at the version
// Kubernetes' go.mod requires), built by the caller for the conformance run itself.
func (b *Builder) ConformanceRunnerImage(ctx context.Context, kubernetesVersion, ref, e2eTest, ginkgo, prefix string) error {
	// kubectl from the node image's build of the same release (built already when the node
	// image was).
	node, err := gobuild.Kubernetes(kubernetesVersion, nodeBinaries...)
	if err != nil {
		return err
	}
	nodeBins, err := b.runBuild(ctx, node)
	if err != nil {
		return err
	}
	base, err := b.staticBaseLayer()
	if err != nil {
		return err
	}
	l, err := b.filesLayer("conformance-runner", []layerFile{
		{Dst: "/usr/local/bin/ginkgo", Mode: 0o755, Src: ginkgo},
		{Dst: "/usr/local/bin/" + gobuild.E2ETest, Mode: 0o755, Src: e2eTest},
		{Dst: "/usr/local/bin/kubectl", Mode: 0o755, Src: nodeBins["kubectl"]},
		{Dst: conformanceRunnerRepoList, Mode: 0o644, Content: ConformanceRepoList(prefix)},
	})
	if err != nil {
		return err
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return errors.Errorf("the conformance runner image %q has no tag", ref)
	}
	img := ConformanceImage{Ref: ref, Name: "conformance", Tag: ref[i+1:]}
	cfg := imageConfig{
		Entrypoint: []string{"/usr/local/bin/ginkgo"},
		Env:        []string{defaultPath, "KUBE_TEST_REPO_LIST=" + conformanceRunnerRepoList},
		WorkingDir: "/",
	}
	return b.conformanceImage(ctx, img, []v1.Layer{base, l}, cfg)
}
