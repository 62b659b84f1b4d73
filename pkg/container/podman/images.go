package podman

import (
	"context"
	"strings"

	"github.com/distribution/reference"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// imageNames returns the names an image given as ref may carry in Podman. Podman keeps
// localhost/... names as given, but qualifies the short names of images it loads or pulls
// (kindest/node:v1 is docker.io/kindest/node:v1) and names what it builds or imports without
// a registry localhost/...; a short name may be either. IDs and digests are left as they are.
func imageNames(ref string) []string {
	names := []string{ref}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return names
	}
	if full := named.String(); full != ref {
		names = append(names, full)
	}
	if reference.Domain(named) == "docker.io" && !strings.HasPrefix(ref, "docker.io/") {
		names = append(names, "localhost/"+strings.TrimPrefix(reference.FamiliarString(named), "library/"))
	}
	return names
}

// resolveImage returns the name the engine knows the image by, ErrNotFound when it knows
// none of them.
func (r *Runtime) resolveImage(ctx context.Context, ref string) (string, *container.Image, error) {
	for _, name := range imageNames(ref) {
		img, err := r.Runtime.InspectImage(ctx, name)
		if container.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		return name, img, nil
	}
	return "", nil, errors.Wrapf(container.ErrNotFound, "image %s", ref)
}

// ImageExists reports whether the engine has the image under any of its name forms.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, _, err := r.resolveImage(ctx, ref)
	if container.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// InspectImage returns an image's ID (the digest of its configuration) and labels.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (*container.Image, error) {
	_, img, err := r.resolveImage(ctx, ref)
	return img, err
}

// RemoveImage removes an image name (or ID) and the image when nothing else uses it; one a
// container uses is an error (the compatible API answers 409 Conflict).
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	name, _, err := r.resolveImage(ctx, ref)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return r.Runtime.RemoveImage(ctx, name)
}
