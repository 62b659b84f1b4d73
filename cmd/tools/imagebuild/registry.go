package imagebuild

import (
	"context"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// DefaultDistributionVersion is the release of distribution's registry the local registry
// image runs.
const DefaultDistributionVersion = "v3.1.2"

// RegistryImageName is the name of the local registry image of a distribution release.
func RegistryImageName(distributionVersion string) string {
	return "localhost/dockyard/registry:" + distributionVersion
}

// registryConfigPath is where the image keeps the registry's configuration.
const registryConfigPath = "/etc/distribution/config.yml"

// RegistryImage builds localhost/dockyard/registry:<version>: distribution's registry (an OCI
// registry, built from the Go module proxy) on the iptables image's Debian layer, serving
// plain HTTP on port 5000 from /var/lib/registry.
func (b *Builder) RegistryImage(ctx context.Context, distributionVersion string) (string, error) {
	if distributionVersion == "" {
		distributionVersion = DefaultDistributionVersion
	}
	ref := RegistryImageName(distributionVersion)
	build, err := gobuild.Distribution(distributionVersion)
	if err != nil {
		return "", err
	}
	in, err := b.baseInputs(ctx, "registry", "iptables", "rootfs")
	if err != nil {
		return "", err
	}
	in.Set("image", "registry")
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	for name, v := range map[string]any{"distribution": build, "rootfs": iptablesRootfs()} {
		if err := in.SetJSON(name, v); err != nil {
			return "", err
		}
	}
	hash := in.Hash()
	if name, err := b.existing(ctx, hash, ref); err != nil || name != "" {
		return name, err
	}
	unlock, err := b.lock(ctx, "registry-"+distributionVersion)
	if err != nil {
		return "", err
	}
	defer unlock()
	start := time.Now()
	base, err := b.Rootfs(ctx, iptablesRootfs())
	if err != nil {
		return "", err
	}
	bins, err := b.runBuild(ctx, build)
	if err != nil {
		return "", err
	}
	layer, err := b.binaryLayer("registry",
		[]binaryFile{{Src: bins["registry"], Dst: "/usr/local/bin/registry", Mode: 0o755}},
		map[string][]byte{registryConfigPath: mustEmbedded("registry/config.yml")})
	if err != nil {
		return "", err
	}
	labels := componentLabels("dockyard-registry", distributionVersion)
	labels[LabelPrefix+"version.distribution"] = distributionVersion
	labels[InputsLabel] = hash
	img, err := assemble([]v1.Layer{base.Layer, layer}, imageConfig{
		Entrypoint: []string{"/usr/local/bin/registry", "serve", registryConfigPath},
		Labels:     labels,
		Created:    time.Now().UTC().Truncate(time.Second),
	})
	if err != nil {
		return "", err
	}
	if err := b.load(ctx, ref, img); err != nil {
		return "", err
	}
	b.logf("built %s in %s (%d MiB compressed)", ref, time.Since(start).Round(time.Second), imageSize(img)>>20)
	return ref, nil
}
