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

// Where the image keeps the registry's configuration and its programs.
const (
	registryConfigPath = "/etc/distribution/config.yml"
	registryBinary     = "/usr/local/bin/registry"
	registryProxyPath  = "/usr/local/bin/registry-proxy"
)

// registryProxyModules are the modules images/registryproxy imports, at the versions Dockyard's
// go.mod requires (a test holds them to it), so its build resolves nothing newer.
func registryProxyModules() map[string]string {
	return map[string]string{"github.com/pkg/errors": "v0.9.1", "golang.org/x/crypto": "v0.56.0"}
}

// registryProxyBuild builds images/registryproxy, the registry's front, as a main package of its
// own: versioned by its source and modules, so a change of either builds it again.
func registryProxyBuild() gobuild.Build {
	src := mustEmbedded("registryproxy/main.go")
	in := &Inputs{}
	in.SetBytes("src", src)
	_ = in.SetJSON("modules", registryProxyModules())
	return gobuild.Build{
		Name: "registry-proxy", Version: short(in.Hash()),
		Require:  registryProxyModules(),
		Binaries: []gobuild.Binary{{Name: "registry-proxy", MainSource: string(src)}},
	}
}

// RegistryImage builds localhost/dockyard/registry:<version>: distribution's registry (an OCI
// registry, built from the Go module proxy) on the iptables image's Debian layer, keeping its
// data in /var/lib/registry, behind Dockyard's registry-proxy (images/registryproxy), its
// entrypoint, which starts it on the container's loopback and serves plain HTTP on port 5000:
// authentication, each user's push prefix, immutable tags.
func (b *Builder) RegistryImage(ctx context.Context, distributionVersion string) (string, error) {
	if distributionVersion == "" {
		distributionVersion = DefaultDistributionVersion
	}
	ref := RegistryImageName(distributionVersion)
	build, err := gobuild.Distribution(distributionVersion)
	if err != nil {
		return "", err
	}
	in, err := b.baseInputs(ctx, "registry", "registryproxy", "iptables", "rootfs")
	if err != nil {
		return "", err
	}
	in.Set("image", "registry")
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	proxy := registryProxyBuild()
	for name, v := range map[string]any{"distribution": build, "registry-proxy": proxy, "rootfs": iptablesRootfs()} {
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
	proxyBins, err := b.runBuild(ctx, proxy)
	if err != nil {
		return "", err
	}
	layer, err := b.binaryLayer("registry",
		[]binaryFile{{Src: bins["registry"], Dst: registryBinary, Mode: 0o755}, {Src: proxyBins["registry-proxy"], Dst: registryProxyPath, Mode: 0o755}},
		map[string][]byte{registryConfigPath: mustEmbedded("registry/config.yml")})
	if err != nil {
		return "", err
	}
	labels := componentLabels("dockyard-registry", distributionVersion)
	labels[LabelPrefix+"version.distribution"] = distributionVersion
	labels[InputsLabel] = hash
	img, err := assemble([]v1.Layer{base.Layer, layer}, imageConfig{
		Entrypoint: []string{registryProxyPath, "--", registryBinary, "serve", registryConfigPath},
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
