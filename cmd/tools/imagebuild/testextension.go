package imagebuild

import (
	"context"

	"github.com/dockyard-dev/dockyard/pkg/gobuild"
)

// ClusterAPITestExtensionImageName is the image of Cluster API's test extension of a release,
// as the project builds it (Cluster API publishes none for its releases).
func ClusterAPITestExtensionImageName(version string) string {
	return "localhost/dockyard/capi-test-extension:" + version
}

// ClusterAPITestExtensionImage builds Cluster API's test extension of a release
// (gobuild.ClusterAPITestExtension), at the module versions goMod requires where it requires
// them (the end-to-end suite's go.mod, which holds the same Cluster API), into the engine as
// ClusterAPITestExtensionImageName(version), on the static base, running as a non-root user;
// an image of the same binary is not loaded again. It returns the image's name.
func (b *Builder) ClusterAPITestExtensionImage(ctx context.Context, version, goMod string) (string, error) {
	build, err := gobuild.ClusterAPITestExtension(version)
	if err != nil {
		return "", err
	}
	if goMod != "" {
		if build, err = build.PinnedTo(goMod); err != nil {
			return "", err
		}
	}
	bins, err := b.runBuild(ctx, build)
	if err != nil {
		return "", err
	}
	ref := ClusterAPITestExtensionImageName(version)
	// Its Deployment (the extension's config/default) runs /manager.
	ci := componentImage{Ref: ref, Binary: bins["test-extension"], Path: "/manager", User: nonRootUser,
		Title: "cluster-api-test-extension", Version: version}
	return ref, b.componentImage(ctx, ci)
}
