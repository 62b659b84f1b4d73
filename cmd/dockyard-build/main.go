// Command dockyard-build builds what Dockyard needs without a container registry: the
// kube-apiserver and etcd binaries of the envtest suites, and (see images.go) the node,
// load balancer and CNI images. Everything is cached under --cache, keyed by version.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

const usage = `usage: dockyard-build <command> [flags]

commands:
  envtest     build kube-apiserver and etcd for envtest into --dir (KUBEBUILDER_ASSETS)
  node-image  build the node image localhost/dockyard/node:<--kubernetes-version> (needs root)
  lb-image    build the load balancer image localhost/dockyard/haproxy:<version> (needs root)
  cni-image   build the flannel image localhost/dockyard/flannel:<--flannel-version> (needs root)
  registry-image  build the local registry image localhost/dockyard/registry:<--version>
              (distribution's registry; needs root)
  netpol-image  build the network policy image localhost/dockyard/kube-router:<--version>
              (kube-router's firewall; needs root)
  component-images  build the images of Dockyard's manager, Cluster API's controllers and
              cert-manager, named as their releases publish them
  capi-test-extension-image  build Cluster API's test extension (its end-to-end suite's Runtime
              SDK server) of --cluster-api-version as localhost/dockyard/capi-test-extension
  conformance build e2e.test, ginkgo and the images Kubernetes' conformance tests run, named
              under --prefix, with the KUBE_TEST_REPO_LIST file naming them, into --dir, and
              registry.k8s.io/conformance:<version> for Cluster API's conformance specs
  release     write a release (--version) into --out: the components with the manager image
              pinned by digest, metadata.yaml, every flavor and ClusterClass, the manager image
              as an OCI archive with its SBOM, and SHA256SUMS; needs no engine
  publish     push a release's images (--release) from its archives to the registry they
              are named in, after checking the release against its SHA256SUMS
  load        copy images from Docker, where the builder makes them, into Podman or
              containerd (--container-runtime), unless they are there already

Run "dockyard-build <command> -h" for a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "envtest":
		err = runEnvtest(ctx, os.Args[2:])
	case "node-image":
		err = runNodeImage(ctx, os.Args[2:])
	case "lb-image":
		err = runLBImage(ctx, os.Args[2:])
	case "cni-image":
		err = runCNIImage(ctx, os.Args[2:])
	case "registry-image":
		err = runRegistryImage(ctx, os.Args[2:])
	case "netpol-image":
		err = runNetworkPolicyImage(ctx, os.Args[2:])
	case "component-images":
		err = runComponentImages(ctx, os.Args[2:])
	case "capi-test-extension-image":
		err = runTestExtensionImage(ctx, os.Args[2:])
	case "conformance":
		err = runConformance(ctx, os.Args[2:])
	case "release":
		err = runRelease(ctx, os.Args[2:])
	case "publish":
		err = runPublish(ctx, os.Args[2:])
	case "load":
		err = runLoad(ctx, os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockyard-build %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// runEnvtest builds kube-apiserver and etcd and links them into one directory, the layout
// controller-runtime's envtest expects in KUBEBUILDER_ASSETS.
func runEnvtest(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("envtest", flag.ExitOnError)
	cache := fs.String("cache", gobuild.DockyardCache(), "cache directory")
	k8sVersion := fs.String("kubernetes-version", "v1.34.4", "Kubernetes version of kube-apiserver")
	etcdVersion := fs.String("etcd-version", "v3.6.5", "etcd version")
	dir := fs.String("dir", "", "directory to link the binaries into (required)")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("--dir is required")
	}

	b := &gobuild.Builder{CacheDir: filepath.Join(*cache, "build"), Log: os.Stderr}
	k8s, err := gobuild.Kubernetes(*k8sVersion, "kube-apiserver", "kubectl")
	if err != nil {
		return err
	}
	etcd, err := gobuild.Etcd(*etcdVersion)
	if err != nil {
		return err
	}
	links := map[string]string{}
	for _, build := range []gobuild.Build{k8s, etcd} {
		binDir, err := b.Run(ctx, build)
		if err != nil {
			return err
		}
		for _, bin := range build.Binaries {
			links[bin.Name] = filepath.Join(binDir, bin.Name)
		}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return errors.Wrapf(err, "creating %s", *dir)
	}
	for name, target := range links {
		link := filepath.Join(*dir, name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return errors.Wrapf(err, "linking %s", link)
		}
	}
	fmt.Println(*dir)
	return nil
}
