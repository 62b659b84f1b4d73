package podman

import (
	"context"
	"slices"

	"github.com/distribution/reference"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// imageNames returns the names an image given as ref may carry in Podman. Podman keeps
// qualified names as given, but names an image it loads (or builds, or imports) under a short
// name localhost/<name>, where Docker says docker.io/library/<name>: loading a docker-save
// archive tagged "haproxy:v1" gives localhost/haproxy:v1 in Podman. So a docker.io name
// (written out or short) is looked up as given, in full, short and under localhost/. IDs and
// digests are left as they are.
func imageNames(ref string) []string {
	names := []string{ref}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return names
	}
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	add(named.String())
	if reference.Domain(named) == "docker.io" {
		familiar := reference.FamiliarString(named)
		add(familiar)
		add("localhost/" + familiar)
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
