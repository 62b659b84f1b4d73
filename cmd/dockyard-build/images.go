package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// imageFlags are the flags every image command shares.
type imageFlags struct {
	cache  *string
	mirror *string
	force  *bool
}

func addImageFlags(fs *flag.FlagSet) imageFlags {
	return imageFlags{
		cache:  fs.String("cache", gobuild.DockyardCache(), "cache directory"),
		mirror: fs.String("mirror", imagebuild.DefaultMirror, "Debian archive for debootstrap"),
		force:  fs.Bool("force", false, "rebuild even when the engine has an image with the same inputs"),
	}
}

// builder returns a Builder on the engine DOCKER_HOST names (the local socket when unset),
// built by the one picker with an hour for each image to move (a node image is gigabytes);
// done releases the engine connection.
func (f imageFlags) builder() (b *imagebuild.Builder, done func(), err error) {
	if os.Geteuid() != 0 {
		return nil, nil, errors.New("building images needs root (debootstrap and chroot)")
	}
	rt, err := runtimes.New(runtimes.Config{Name: runtimes.Docker, Timeouts: container.Timeouts{Call: container.DefaultTimeouts.Call, Transfer: time.Hour}})
	if err != nil {
		return nil, nil, err
	}
	return &imagebuild.Builder{
		CacheDir: *f.cache,
		Log:      os.Stderr,
		Runtime:  rt,
		Mirror:   *f.mirror,
		Force:    *f.force,
	}, func() { _ = rt.Close() }, nil
}

// runNodeImage builds localhost/dockyard/node:<version> (or --repository's).
func runNodeImage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-image", flag.ExitOnError)
	common := addImageFlags(fs)
	k8sVersion := fs.String("kubernetes-version", imagebuild.DefaultKubernetesVersion, "Kubernetes version")
	flannelVersion := fs.String("flannel-version", imagebuild.DefaultFlannelVersion, "flannel version of the preloaded CNI image")
	addonsOf := fs.String("addons-of", "", "comma-separated Kubernetes versions clusters of these nodes are upgraded from or to: their kube-proxy and CoreDNS images are preloaded too (no registry to pull them from)")
	repository := fs.String("repository", "", "the image's repository (default localhost/dockyard/node)")
	_ = fs.Parse(args)
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	ref, err := b.NodeImage(ctx, imagebuild.NodeOptions{
		KubernetesVersion: *k8sVersion, FlannelVersion: *flannelVersion, AddonsOf: splitList(*addonsOf), Repository: *repository,
	})
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// runLBImage builds localhost/dockyard/haproxy:<Debian haproxy version>.
func runLBImage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("lb-image", flag.ExitOnError)
	common := addImageFlags(fs)
	_ = fs.Parse(args)
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	ref, err := b.LoadBalancerImage(ctx)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// runRegistryImage builds localhost/dockyard/registry:<version>.
func runRegistryImage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("registry-image", flag.ExitOnError)
	common := addImageFlags(fs)
	version := fs.String("version", imagebuild.DefaultDistributionVersion, "release of distribution's registry")
	_ = fs.Parse(args)
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	ref, err := b.RegistryImage(ctx, *version)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// runNetworkPolicyImage builds localhost/dockyard/kube-router:<version>.
func runNetworkPolicyImage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("netpol-image", flag.ExitOnError)
	common := addImageFlags(fs)
	version := fs.String("version", imagebuild.DefaultKubeRouterVersion, "release of kube-router")
	_ = fs.Parse(args)
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	ref, err := b.NetworkPolicyImage(ctx, *version)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// runTestExtensionImage builds Cluster API's test extension of a release as
// localhost/dockyard/capi-test-extension:<version>.
func runTestExtensionImage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("capi-test-extension-image", flag.ExitOnError)
	common := addImageFlags(fs)
	version := fs.String("cluster-api-version", "", "Cluster API release whose test extension to build")
	goMod := fs.String("go-mod", "test/capie2e/go.mod", "go.mod whose module versions the build takes where it names them")
	_ = fs.Parse(args)
	if *version == "" {
		return errors.New("--cluster-api-version is required")
	}
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	ref, err := b.ClusterAPITestExtensionImage(ctx, *version, *goMod)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// runCNIImage builds localhost/dockyard/flannel:<version>.
func runCNIImage(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cni-image", flag.ExitOnError)
	common := addImageFlags(fs)
	flannelVersion := fs.String("flannel-version", imagebuild.DefaultFlannelVersion, "flannel version")
	_ = fs.Parse(args)
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	ref, err := b.CNIImage(ctx, *flannelVersion)
	if err != nil {
		return err
	}
	fmt.Println(ref)
	return nil
}

// runComponentImages builds the images clusterctl init and move run: Dockyard's manager,
// Cluster API's three controllers and cert-manager's three commands.
func runComponentImages(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("component-images", flag.ExitOnError)
	common := addImageFlags(fs)
	var r imagebuild.Release
	fs.StringVar(&r.Dockyard, "version", "", "Dockyard's version, the manager image's tag")
	fs.StringVar(&r.RepoDir, "repo", ".", "Dockyard's source tree")
	fs.StringVar(&r.ClusterAPI, "cluster-api-version", "", "Cluster API version (the one go.mod requires)")
	fs.StringVar(&r.CertManager, "cert-manager-version", "v1.11.5", "cert-manager version")
	_ = fs.Parse(args)
	if r.Dockyard == "" || r.ClusterAPI == "" {
		return errors.New("--version and --cluster-api-version are required")
	}
	b, done, err := common.builder()
	if err != nil {
		return err
	}
	defer done()
	names, err := b.ReleaseImages(ctx, r)
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Println(n)
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
