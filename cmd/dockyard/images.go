package main

import (
	"context"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/cmd/tools/mirror"
	"github.com/dockyard-dev/dockyard/docker"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
	"github.com/dockyard-dev/dockyard/pkg/repository"
	"github.com/dockyard-dev/dockyard/pkg/repository/embedded"
)

// pullMissingImages pulls into Docker, where Dockyard's images are built, those of want it does
// not hold from registry, where dockyard push images published them (cmd/tools/mirror names them
// there). Those the registry lacks are left for buildMissingImages, and said.
func pullMissingImages(ctx context.Context, registry string, want []string) error {
	rt, err := runtimes.New(runtimes.Config{Name: runtimes.Docker})
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close() }()
	start := time.Now()
	pulled, absent, err := mirror.Pull(ctx, rt, registry, want, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	if len(pulled) > 0 {
		say("pulled from %s: %s", registry, strings.Join(pulled, ", "))
		say("pulled %d images in %s", len(pulled), time.Since(start).Round(time.Second))
	}
	if len(absent) > 0 {
		say("%s does not hold %s", registry, strings.Join(absent, ", "))
	}
	return nil
}

// buildMissingImages builds into Docker, where Dockyard's images are built, those of want it
// does not hold, as make images and make component-images build them: from Debian's archive and
// the Go module proxy, no registry. Dockyard's manager image is made of this binary, which runs
// as the manager when called so. Building needs root (debootstrap) and Go; with every image
// there, it needs neither.
func buildMissingImages(ctx context.Context, kubernetesVersion string, want []string) error {
	rt, err := runtimes.New(runtimes.Config{Name: runtimes.Docker})
	if err != nil {
		return err
	}
	defer func() { _ = rt.Close() }()
	engine := docker.NewManager(rt, docker.ManagerOptions{})
	missing, err := missingImages(ctx, engine, want)
	if err != nil || len(missing) == 0 {
		return err
	}
	plan, err := planImages(kubernetesVersion, missing)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.Errorf("images %s are not on the engine, and building them needs root (debootstrap): run dockyard as root, or build them with make %s",
			strings.Join(missing, ", "), strings.Join(plan.makeTargets(), " "))
	}
	if _, err := exec.LookPath("go"); err != nil {
		return errors.Errorf("images %s are not on the engine, and building them needs Go (go on the PATH): the binaries come from the Go module proxy",
			strings.Join(missing, ", "))
	}
	took := ""
	if plan.node || plan.components != nil {
		took = "the first time takes about 20 minutes; "
	}
	say("building %d images the engine lacks (%sthey are cached in %s): %s",
		len(missing), took, gobuild.DockyardCache(), strings.Join(missing, ", "))
	b := &imagebuild.Builder{CacheDir: gobuild.DockyardCache(), Log: os.Stderr, Runtime: rt}
	if plan.node {
		if _, err := b.NodeImage(ctx, imagebuild.NodeOptions{KubernetesVersion: kubernetesVersion}); err != nil {
			return err
		}
	}
	if plan.loadBalancer {
		if _, err := b.LoadBalancerImage(ctx); err != nil {
			return err
		}
	}
	if plan.components != nil {
		if _, err := b.ReleaseImages(ctx, *plan.components); err != nil {
			return err
		}
	}
	if plan.registry {
		if _, err := b.RegistryImage(ctx, imagebuild.DefaultDistributionVersion); err != nil {
			return err
		}
	}
	if plan.networkPolicy {
		if _, err := b.NetworkPolicyImage(ctx, imagebuild.DefaultKubeRouterVersion); err != nil {
			return err
		}
	}
	if still, err := missingImages(ctx, engine, want); err != nil || len(still) > 0 {
		return errors.Errorf("images %s are still not on the engine after building (%v)", strings.Join(still, ", "), err)
	}
	return nil
}

func missingImages(ctx context.Context, engine *docker.Manager, want []string) ([]string, error) {
	var missing []string
	for _, ref := range want {
		ok, err := engine.ImageExists(ctx, ref)
		if err != nil {
			return nil, errors.Wrapf(err, "looking for image %s on the engine", ref)
		}
		if !ok {
			missing = append(missing, ref)
		}
	}
	return missing, nil
}

// localLoadBalancerImage is the load balancer image of --images local: the newest build.
const localLoadBalancerImage = imagebuild.LoadBalancerRepository + ":latest"

// localRegistryImage is the local registry's image this binary builds.
var localRegistryImage = imagebuild.RegistryImageName(imagebuild.DefaultDistributionVersion)

// localNetworkPolicyImage is the network policy controller's image (--network-policy).
var localNetworkPolicyImage = imagebuild.KubeRouterImageName(imagebuild.DefaultKubeRouterVersion)

// imagePlan is what to build for a list of missing images.
type imagePlan struct {
	node, loadBalancer, registry, networkPolicy bool
	components                                  *imagebuild.Release
}

// makeTargets are the targets of a checkout's Makefile that build the same images.
func (p imagePlan) makeTargets() []string {
	var targets []string
	if p.node || p.loadBalancer {
		targets = append(targets, "images")
	}
	if p.components != nil {
		targets = append(targets, "component-images")
	}
	if p.registry {
		targets = append(targets, "registry-image")
	}
	if p.networkPolicy {
		targets = append(targets, "netpol-image")
	}
	return targets
}

// planImages maps missing images to the builds that make them, refusing an image no build of
// this binary makes (another version's, or kind's).
func planImages(kubernetesVersion string, missing []string) (imagePlan, error) {
	var plan imagePlan
	release, err := componentRelease()
	if err != nil {
		return plan, err
	}
	components := imagebuild.ReleaseImageNames(release)
	for _, ref := range missing {
		switch {
		case ref == imagebuild.NodeImageName(kubernetesVersion):
			plan.node = true
		case ref == localLoadBalancerImage:
			plan.loadBalancer = true
		case ref == localRegistryImage:
			plan.registry = true
		case ref == localNetworkPolicyImage:
			plan.networkPolicy = true
		case slices.Contains(components, ref):
			release.Only = append(release.Only, ref)
		default:
			return plan, errors.Errorf("image %s is not on the engine, and this dockyard builds only its own version's images (%s, %s, %s, %s, %s): build or pull it there",
				ref, imagebuild.NodeImageName(kubernetesVersion), localLoadBalancerImage, localRegistryImage, localNetworkPolicyImage, strings.Join(components, ", "))
		}
	}
	if len(release.Only) > 0 {
		plan.components = &release
	}
	return plan, nil
}

// componentRelease is the release of the components of the repository this binary carries, its
// manager image made of the binary itself, Cluster API's managers built at the module versions
// the binary was built with.
func componentRelease() (imagebuild.Release, error) {
	r, err := embedded.Repository()
	if err != nil {
		return imagebuild.Release{}, err
	}
	return releaseOf(r)
}

func releaseOf(r *repository.Repository) (imagebuild.Release, error) {
	providers, certManager, err := r.Contents()
	if err != nil {
		return imagebuild.Release{}, err
	}
	release := imagebuild.Release{CertManager: certManager}
	for _, p := range providers {
		switch p.Name {
		case "dockyard":
			release.Dockyard = p.Version
		case "cluster-api":
			release.ClusterAPI = p.Version
		}
	}
	if release.Dockyard == "" || release.ClusterAPI == "" || release.CertManager == "" {
		return release, errors.Errorf("the clusterctl repository dockyard carries lacks Dockyard, Cluster API or cert-manager (%+v)", release)
	}
	if release.ManagerBinary, err = os.Executable(); err != nil {
		return release, errors.Wrap(err, "finding this binary, which Dockyard's manager image is made of")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return release, errors.New("this binary carries no build information, which Cluster API's managers are built to")
	}
	release.Modules = map[string]string{}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		release.Modules[dep.Path] = dep.Version
	}
	return release, nil
}
