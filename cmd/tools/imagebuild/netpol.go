package imagebuild

import (
	"context"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// DefaultKubeRouterVersion is the release of kube-router whose network policy controller
// enforces NetworkPolicies in Dockyard's clusters that ask for it: the newest the Go module
// proxy serves. kind's kube-network-policies needs nftables' queue expression, which hosts
// without CONFIG_NFT_QUEUE lack; kube-router programs iptables and ipsets.
const DefaultKubeRouterVersion = "v2.1.0"

// kubeRouterModule is kube-router's Go module.
const kubeRouterModule = "github.com/cloudnativelabs/kube-router/v2"

// kubeRouterRootfs is the iptables layer with ipset, which kube-router's firewall programs.
func kubeRouterRootfs() RootfsSpec {
	r := iptablesRootfs()
	r.Name = "iptables-ipset"
	r.Packages = append(r.Packages, "ipset")
	return r
}

// KubeRouterImageName is the name of the network policy image of a kube-router release.
func KubeRouterImageName(version string) string {
	return "localhost/dockyard/kube-router:" + version
}

// NetworkPolicyImage builds localhost/dockyard/kube-router:<version> into the engine unless an
// image of the same inputs is there: kube-router's binary (only its firewall runs:
// images/netpol/kube-router.yaml) on the iptables layer with ipset.
func (b *Builder) NetworkPolicyImage(ctx context.Context, version string) (string, error) {
	if version == "" {
		version = DefaultKubeRouterVersion
	}
	ref := KubeRouterImageName(version)
	build := gobuild.Build{
		Name: "kube-router", Version: version,
		Require: map[string]string{kubeRouterModule: version},
		Binaries: []gobuild.Binary{{
			Name: "kube-router", Package: kubeRouterModule + "/cmd/kube-router",
			LDFlags: []string{"-X " + kubeRouterModule + "/pkg/version.Version=" + version},
		}},
	}
	in, err := b.baseInputs(ctx, "netpol", "iptables", "rootfs")
	if err != nil {
		return "", err
	}
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	for name, v := range map[string]any{"kube-router": build, "rootfs": kubeRouterRootfs()} {
		if err := in.SetJSON(name, v); err != nil {
			return "", err
		}
	}
	hash := in.Hash()
	if name, err := b.existing(ctx, hash, ref); err != nil || name != "" {
		return name, err
	}
	unlock, err := b.lock(ctx, "kube-router-"+version)
	if err != nil {
		return "", err
	}
	defer unlock()
	start := time.Now()
	base, err := b.Rootfs(ctx, kubeRouterRootfs())
	if err != nil {
		return "", err
	}
	bins, err := b.runBuild(ctx, build)
	if err != nil {
		return "", err
	}
	layer, err := b.binaryLayer("kube-router", []binaryFile{{Src: bins["kube-router"], Dst: "/usr/local/bin/kube-router", Mode: 0o755}}, nil)
	if err != nil {
		return "", err
	}
	labels := componentLabels("kube-router", version)
	labels[LabelPrefix+"version.kube-router"] = version
	labels[InputsLabel] = hash
	img, err := assemble([]v1.Layer{base.Layer, layer}, imageConfig{
		Entrypoint: []string{"/usr/local/bin/kube-router"},
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
