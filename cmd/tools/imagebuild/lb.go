package imagebuild

import (
	"context"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// LoadBalancerRepository is the repository of the load balancer image; the tag is the Debian
// version of haproxy ("+" and "~" become "_"), and "latest" names the newest build.
const LoadBalancerRepository = "localhost/dockyard/haproxy"

// HAProxyConfigPath is where the load balancer image reads its configuration.
const HAProxyConfigPath = "/usr/local/etc/haproxy/haproxy.cfg"

func haproxyRootfs() RootfsSpec {
	return RootfsSpec{Name: "haproxy", Packages: []string{"haproxy"}}
}

// LoadBalancerImage builds the haproxy image into the engine and returns its name. haproxy
// runs as PID 1 in master-worker mode; SIGHUP (or SIGUSR2) to PID 1 reloads the configuration
// without dropping established connections.
func (b *Builder) LoadBalancerImage(ctx context.Context) (string, error) {
	in, err := b.baseInputs(ctx, "haproxy", "rootfs")
	if err != nil {
		return "", err
	}
	in.Set("image", "haproxy")
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	if err := in.SetJSON("rootfs", haproxyRootfs()); err != nil {
		return "", err
	}
	hash := in.Hash()
	if name, err := b.existingLoadBalancer(ctx, hash); err != nil || name != "" {
		return name, err
	}
	unlock, err := b.lock(ctx, "haproxy")
	if err != nil {
		return "", err
	}
	defer unlock()
	start := time.Now()

	fs, err := b.Rootfs(ctx, haproxyRootfs())
	if err != nil {
		return "", err
	}
	version := fs.Packages["haproxy"]
	ref := LoadBalancerRepository + ":" + ImageTag(version)
	cfg, err := b.cachedLayer("haproxy-config", hashOf(mustEmbedded("haproxy/haproxy.cfg")), func(t *tarBuilder) error {
		return t.File(HAProxyConfigPath, 0o644, mustEmbedded("haproxy/haproxy.cfg"))
	})
	if err != nil {
		return "", err
	}
	img, err := assemble([]v1.Layer{fs.Layer, cfg}, imageConfig{
		Entrypoint: []string{"haproxy", "-W", "-db", "-f", HAProxyConfigPath},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "dockyard-haproxy",
			"org.opencontainers.image.version": version,
			LabelPrefix + "built-by":           "dockyard-build",
			LabelPrefix + "version.haproxy":    version,
			LabelPrefix + "debian.suite":       b.suite(),
			LabelPrefix + "reload-signal":      "SIGHUP",
			InputsLabel:                        hash,
		},
		Created: time.Now().UTC().Truncate(time.Second),
	})
	if err != nil {
		return "", err
	}
	if err := b.load(ctx, ref, img, LoadBalancerRepository+":latest"); err != nil {
		return "", err
	}
	b.logf("built %s in %s (%d MiB compressed)", ref, time.Since(start).Round(time.Second), imageSize(img)>>20)
	return ref, nil
}

// existingLoadBalancer returns the versioned name of the newest load balancer image when the
// engine has it, and its ":latest", built from the given inputs; "" otherwise (or with Force).
// The version is only known once the root filesystem is built, so ":latest" leads to it.
func (b *Builder) existingLoadBalancer(ctx context.Context, inputsHash string) (string, error) {
	if b.Force {
		return "", nil
	}
	latest, ok, err := b.imageLabels(ctx, LoadBalancerRepository+":latest")
	if err != nil || !ok || latest[InputsLabel] != inputsHash || latest[LabelPrefix+"version.haproxy"] == "" {
		return "", err
	}
	ref := LoadBalancerRepository + ":" + ImageTag(latest[LabelPrefix+"version.haproxy"])
	return b.existing(ctx, inputsHash, ref)
}

// ImageTag turns a Debian version into a valid image tag: "+" and "~" (not allowed in tags)
// become "_", e.g. 2.6.12-1+deb12u3 → 2.6.12-1_deb12u3.
func ImageTag(debianVersion string) string {
	return strings.NewReplacer("+", "_", "~", "_", ":", "_").Replace(debianVersion)
}

func hashOf(b []byte) string {
	in := &Inputs{}
	in.SetBytes("content", b)
	return in.Hash()
}
