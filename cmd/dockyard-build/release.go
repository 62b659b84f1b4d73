package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/cmd/tools/release"
	"github.com/dockyard-dev/dockyard/pkg/gobuild"
	"github.com/dockyard-dev/dockyard/templates"
)

// runRelease writes a release into --out: the components rendered for --version with the
// manager image pinned by digest, metadata.yaml, the flavors and ClusterClasses this command was
// built with (or --flavors'), the manager image as an OCI archive with its SBOM (from --sbom-tool, CycloneDX's
// cyclonedx-gomod), and SHA256SUMS. It needs no engine and no root.
func runRelease(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("release", flag.ExitOnError)
	cache := fs.String("cache", gobuild.DockyardCache(), "cache directory")
	version := fs.String("version", "", "the release's version, e.g. v0.2.0 (required)")
	repo := fs.String("repo", ".", "Dockyard's source tree, whose main package is the manager")
	components := fs.String("components", "", "infrastructure-components.yaml rendered for --version (required)")
	metadata := fs.String("metadata", "metadata.yaml", "clusterctl's metadata.yaml, holding --version's release series")
	flavors := fs.String("flavors", "", "directory of the flavors and ClusterClasses (default: those this command was built with)")
	managerImage := fs.String("manager-image", "", "the manager image as the components name it (default localhost/dockyard/manager:<--version>)")
	sbomTool := fs.String("sbom-tool", "", "cyclonedx-gomod, which writes each image's SBOM (required)")
	out := fs.String("out", "", "directory to write the release into; must not exist (required)")
	_ = fs.Parse(args)
	if *version == "" || *components == "" || *sbomTool == "" || *out == "" {
		return errors.New("--version, --components, --sbom-tool and --out are required")
	}
	if *managerImage == "" {
		*managerImage = imagebuild.ManagerImageName(*version)
	}
	in := release.Input{Version: *version, Flavors: templates.Flavors}
	if *flavors != "" {
		in.Flavors = os.DirFS(*flavors)
	}
	var err error
	if in.Components, err = os.ReadFile(*components); err != nil {
		return errors.Wrap(err, "reading the components")
	}
	if in.Metadata, err = os.ReadFile(*metadata); err != nil {
		return errors.Wrap(err, "reading metadata.yaml")
	}
	b := &imagebuild.Builder{CacheDir: *cache, Log: os.Stderr}
	img, binary, err := b.ManagerImage(ctx, *repo, *managerImage, *version)
	if err != nil {
		return err
	}
	sbom, err := goSBOM(ctx, *sbomTool, *version, binary)
	if err != nil {
		return err
	}
	in.Images = []release.Image{{Name: "manager", Ref: *managerImage, Image: img, SBOM: sbom}}
	files, err := release.Write(*out, in)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Println(filepath.Join(*out, f))
	}
	return nil
}

// goSBOM returns the CycloneDX SBOM of a Go binary: its modules as the binary records them,
// without the serial number and time that would make two SBOMs of the same binary differ.
func goSBOM(ctx context.Context, tool, version, binary string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tool, "bin", "-json", "-noserial", "-notimestamp", "-version", version, binary)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.Errorf("writing the SBOM of %s with %s: %v\n%s", binary, tool, err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// runPublish pushes a release's images from its archives to the registry they are named in.
func runPublish(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("publish", flag.ExitOnError)
	dir := fs.String("release", "", "the release's directory, as make release wrote it (required)")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("--release is required")
	}
	pushed, err := release.Publish(ctx, *dir, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	for _, p := range pushed {
		fmt.Printf("pushed %s@%s\n", p.Ref, p.Digest)
	}
	return err
}
