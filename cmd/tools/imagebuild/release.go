package imagebuild

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// The images a management cluster runs, named and tagged as their releases publish them, so
// the components YAML of a clusterctl repository is used unmodified: pull policy IfNotPresent
// finds them in the engine (or in a node that preloaded them) and nothing is pulled.

// Release versions of the components, as the clusterctl repository names them.
type Release struct {
	// Dockyard is Dockyard's own version (the Makefile's VERSION).
	Dockyard string
	// RepoDir is Dockyard's source tree, whose main package is the manager.
	RepoDir string
	// ManagerBinary, when set, is the manager binary the image holds instead of one built from
	// RepoDir: the dockyard command, which runs as the manager when called so, passes itself.
	ManagerBinary string
	// Modules, when RepoDir is empty, are the module versions (path → version) Cluster API's
	// managers are built at where Dockyard's go.mod would give them: those the dockyard binary
	// was built with.
	Modules map[string]string
	// ClusterAPI is the version of Cluster API's core, kubeadm bootstrap and control plane.
	ClusterAPI string
	// CertManager is cert-manager's version (see gobuild.CertManager for why v1.11).
	CertManager string
	// Only, when set, names the images to build; the others are left as the engine has them.
	Only []string
}

// Users the images run as: the upstream images' non-root users. Numeric, so Kubernetes can
// check runAsNonRoot.
const (
	nonRootUser     = "65532:65532"
	certManagerUser = "1000"
)

// ManagerImageName is Dockyard's manager image of a version.
func ManagerImageName(version string) string { return "localhost/dockyard/manager:" + version }

// ClusterAPIImageName is the image of a Cluster API controller (cluster-api-controller,
// kubeadm-bootstrap-controller, kubeadm-control-plane-controller) of a version.
func ClusterAPIImageName(controller, version string) string {
	return "registry.k8s.io/cluster-api/" + controller + ":" + version
}

// CertManagerImageName is the image of a cert-manager command (controller, webhook,
// cainjector) of a version.
func CertManagerImageName(command, version string) string {
	return "quay.io/jetstack/cert-manager-" + command + ":" + version
}

// clusterAPIControllers maps each Cluster API image to the command gobuild builds for it.
var clusterAPIControllers = map[string]string{
	"cluster-api-controller":           gobuild.ClusterAPICore,
	"kubeadm-bootstrap-controller":     gobuild.ClusterAPIKubeadmBootstrap,
	"kubeadm-control-plane-controller": gobuild.ClusterAPIKubeadmControlPlane,
}

// ReleaseImageNames lists every image ReleaseImages builds for a release.
func ReleaseImageNames(r Release) []string {
	names := []string{ManagerImageName(r.Dockyard)}
	for _, c := range sortedKeys(clusterAPIControllers) {
		names = append(names, ClusterAPIImageName(c, r.ClusterAPI))
	}
	for _, c := range gobuild.CertManagerCommands {
		names = append(names, CertManagerImageName(c, r.CertManager))
	}
	return names
}

// componentImage is one binary on the static base, as its entrypoint.
type componentImage struct {
	Ref, Binary, Path, User, Title, Version string
}

// ReleaseImages builds the images of every component of a release (r.Only's, when set) into
// the engine and returns their names; only the binaries of those images are built. An image
// whose binary did not change is not loaded again.
func (b *Builder) ReleaseImages(ctx context.Context, r Release) ([]string, error) {
	start := time.Now()
	unlock, err := b.lock(ctx, "release-images")
	if err != nil {
		return nil, err
	}
	defer unlock()
	var list []componentImage
	for _, images := range []func(context.Context, Release) ([]componentImage, error){
		b.managerImages, b.clusterAPIImages, b.certManagerImages,
	} {
		l, err := images(ctx, r)
		if err != nil {
			return nil, err
		}
		list = append(list, l...)
	}

	var names []string
	for _, ci := range list {
		if !releaseWants(r, ci.Ref) {
			continue
		}
		if err := b.componentImage(ctx, ci); err != nil {
			return nil, err
		}
		names = append(names, ci.Ref)
	}
	b.logf("release images ready in %s", time.Since(start).Round(time.Second))
	return names, nil
}

// releaseWants reports whether a release builds any of the images: all of them, unless its
// Only names some.
func releaseWants(r Release, refs ...string) bool {
	return len(r.Only) == 0 || slices.ContainsFunc(refs, func(ref string) bool { return slices.Contains(r.Only, ref) })
}

// managerImages returns Dockyard's manager image when the release builds it, of the binary it
// names or one built from its source tree.
func (b *Builder) managerImages(ctx context.Context, r Release) ([]componentImage, error) {
	ref := ManagerImageName(r.Dockyard)
	if !releaseWants(r, ref) {
		return nil, nil
	}
	manager := r.ManagerBinary
	if manager == "" {
		var err error
		if manager, err = b.buildManager(ctx, r.RepoDir); err != nil {
			return nil, err
		}
	} else if err := checkStatic(manager); err != nil {
		return nil, errors.Wrap(err, "making Dockyard's manager image of this binary")
	}
	return []componentImage{{Ref: ref, Binary: manager, Path: "/manager", User: nonRootUser,
		Title: "dockyard-manager", Version: r.Dockyard}}, nil
}

// clusterAPIImages returns the images of Cluster API's controllers when the release builds any
// of them, their binaries built at Dockyard's versions of the modules both use.
func (b *Builder) clusterAPIImages(ctx context.Context, r Release) ([]componentImage, error) {
	capiRefs := map[string]string{}
	for _, c := range sortedKeys(clusterAPIControllers) {
		capiRefs[c] = ClusterAPIImageName(c, r.ClusterAPI)
	}
	if !releaseWants(r, slices.Collect(maps.Values(capiRefs))...) {
		return nil, nil
	}
	capi, err := gobuild.ClusterAPI(r.ClusterAPI, gobuild.ClusterAPICore, gobuild.ClusterAPIKubeadmBootstrap, gobuild.ClusterAPIKubeadmControlPlane)
	if err != nil {
		return nil, err
	}
	// At Dockyard's versions of the modules both use, as make mgmt-binaries builds them: the
	// managers' compilations are shared with Dockyard's.
	if r.RepoDir != "" {
		if capi, err = capi.PinnedTo(filepath.Join(r.RepoDir, "go.mod")); err != nil {
			return nil, err
		}
	} else {
		capi = capi.PinnedToModules(r.Modules)
	}
	capiBins, err := b.runBuild(ctx, capi)
	if err != nil {
		return nil, err
	}
	var list []componentImage
	for _, c := range sortedKeys(clusterAPIControllers) {
		list = append(list, componentImage{Ref: capiRefs[c], Binary: capiBins[clusterAPIControllers[c]],
			Path: "/manager", User: nonRootUser, Title: c, Version: r.ClusterAPI})
	}
	return list, nil
}

// certManagerImages returns the images of cert-manager's commands when the release builds any
// of them.
func (b *Builder) certManagerImages(ctx context.Context, r Release) ([]componentImage, error) {
	var cmRefs []string
	for _, c := range gobuild.CertManagerCommands {
		cmRefs = append(cmRefs, CertManagerImageName(c, r.CertManager))
	}
	if !releaseWants(r, cmRefs...) {
		return nil, nil
	}
	cm, err := gobuild.CertManager(r.CertManager)
	if err != nil {
		return nil, err
	}
	cmBins, err := b.runBuild(ctx, cm)
	if err != nil {
		return nil, err
	}
	var list []componentImage
	for i, c := range gobuild.CertManagerCommands {
		list = append(list, componentImage{Ref: cmRefs[i], Binary: cmBins[c],
			Path: "/app/cmd/" + c + "/" + c, User: certManagerUser, Title: "cert-manager-" + c, Version: r.CertManager})
	}
	return list, nil
}

// componentImage assembles and loads one image unless the engine has it from the same binary:
// the inputs are hashed first, and the layers made only for an image the engine lacks.
func (b *Builder) componentImage(ctx context.Context, ci componentImage) error {
	hash, err := componentInputs(ci)
	if err != nil {
		return err
	}
	if name, err := b.existing(ctx, hash, ci.Ref); err != nil || name != "" {
		return err
	}
	img, err := b.assembleComponent(ci, hash)
	if err != nil {
		return err
	}
	if err := b.load(ctx, ci.Ref, img); err != nil {
		return err
	}
	b.logf("built %s (%d MiB compressed)", ci.Ref, imageSize(img)>>20)
	return nil
}

// componentInputs is the hash of what a component image is made of (the image carries it as
// InputsLabel).
func componentInputs(ci componentImage) (string, error) {
	binHash, err := fileutil.SHA256(ci.Binary)
	if err != nil {
		return "", err
	}
	in := &Inputs{}
	in.Set("recipe", recipeVersion)
	in.Set("image", ci.Ref)
	in.Set("binary", binHash)
	in.Set("path", ci.Path)
	in.Set("user", ci.User)
	return in.Hash(), nil
}

// assembleComponent assembles one component image of the inputs hashed as hash. The same
// binary gives the same image, byte for byte.
func (b *Builder) assembleComponent(ci componentImage, hash string) (v1.Image, error) {
	base, err := b.staticBaseLayer()
	if err != nil {
		return nil, err
	}
	layer, err := b.binaryLayer("component", []binaryFile{{Src: ci.Binary, Dst: ci.Path, Mode: 0o755}}, nil)
	if err != nil {
		return nil, err
	}
	labels := componentLabels(ci.Title, ci.Version)
	labels[InputsLabel] = hash
	return assemble([]v1.Layer{base, layer}, imageConfig{Entrypoint: []string{ci.Path}, User: ci.User, Labels: labels})
}

// ManagerImage builds Dockyard's manager from the source tree at repoDir and assembles its
// image named ref, for a release: nothing is loaded into an engine. It returns the image and
// the manager binary it holds (what its SBOM describes).
func (b *Builder) ManagerImage(ctx context.Context, repoDir, ref, version string) (v1.Image, string, error) {
	manager, err := b.buildManager(ctx, repoDir)
	if err != nil {
		return nil, "", err
	}
	ci := componentImage{Ref: ref, Binary: manager, Path: "/manager", User: nonRootUser, Title: "dockyard-manager", Version: version}
	hash, err := componentInputs(ci)
	if err != nil {
		return nil, "", err
	}
	img, err := b.assembleComponent(ci, hash)
	return img, manager, err
}

// buildManager builds Dockyard's manager from the source tree: static, reproducible (the same
// sources give the same binary, so an unchanged tree rebuilds no image).
func (b *Builder) buildManager(ctx context.Context, repoDir string) (string, error) {
	// One binary per source tree: a release of an earlier revision (make release
	// RELEASE_SOURCE=…) builds beside make component-images without taking its file.
	abs, err := filepath.Abs(repoDir)
	if err != nil {
		return "", errors.Wrap(err, "Dockyard's source tree")
	}
	out := filepath.Join(b.CacheDir, "build", "dockyard-manager", hashOf([]byte(abs))[:12], "manager")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	// A first build compiles controller-runtime and Cluster API (about 2 minutes on a cold
	// Go cache): say so, not a silent gap.
	start := time.Now()
	b.logf("[go] building Dockyard's manager from %s", repoDir)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out+".tmp", ".")
	cmd.Dir = repoDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Errorf("building Dockyard's manager in %s: %v\n%s", repoDir, err, output)
	}
	b.logf("[go] built Dockyard's manager in %s", time.Since(start).Round(time.Second))
	return out, errors.Wrap(os.Rename(out+".tmp", out), "storing Dockyard's manager binary")
}
