package containerd

import (
	"context"
	"io"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/images/archive"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Images live in containerd's image store under their full names (docker.io short names are
// normalized as Docker does: "haproxy:latest" is docker.io/library/haproxy:latest) and are
// unpacked into the overlayfs snapshotter. An image ID is the digest of its configuration.

// normalize returns the name containerd stores an image reference under.
func normalize(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", errors.Wrapf(err, "image reference %q", ref)
	}
	return named.String(), nil
}

func isID(ref string) bool { return strings.HasPrefix(ref, "sha256:") && len(ref) == 71 }

// findImages returns the images a reference names: one by name, or every name of an ID.
func (r *Runtime) findImages(ctx context.Context, ref string) ([]images.Image, error) {
	ctx = ns(ctx)
	if isID(ref) {
		all, err := r.client.ImageService().List(ctx)
		if err != nil {
			return nil, wrap(err, "listing images")
		}
		var out []images.Image
		for _, img := range all {
			if id, err := client.NewImage(r.client, img).Config(ctx); err == nil && id.Digest.String() == ref {
				out = append(out, img)
			}
		}
		if len(out) == 0 {
			return nil, notFound("image %s", ref)
		}
		return out, nil
	}
	name, err := normalize(ref)
	if err != nil {
		return nil, err
	}
	img, err := r.client.ImageService().Get(ctx, name)
	if err != nil {
		return nil, wrap(err, "image %s", ref)
	}
	return []images.Image{img}, nil
}

// image returns an image unpacked for containers.
func (r *Runtime) image(ctx context.Context, ref string) (client.Image, error) {
	imgs, err := r.findImages(ctx, ref)
	if err != nil {
		return nil, err
	}
	img := client.NewImage(r.client, imgs[0])
	ok, err := img.IsUnpacked(ns(ctx), Snapshotter)
	if err != nil {
		return nil, wrap(err, "image %s", ref)
	}
	if !ok {
		if err := img.Unpack(ns(ctx), Snapshotter); err != nil {
			return nil, wrap(err, "unpacking image %s", ref)
		}
	}
	return img, nil
}

// ImageExists reports whether containerd has an image.
func (r *Runtime) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := r.findImages(ctx, ref)
	if container.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// PullImage pulls an image from its registry and unpacks it.
func (r *Runtime) PullImage(ctx context.Context, ref string) error {
	name, err := normalize(ref)
	if err != nil {
		return err
	}
	_, err = r.client.Pull(ns(ctx), name, client.WithPullUnpack, client.WithPullSnapshotter(Snapshotter))
	return wrap(err, "pulling image %s", ref)
}

// SaveImages returns a tar stream of images in the OCI layout with Docker's manifest.json, which
// both LoadImages and docker load read.
func (r *Runtime) SaveImages(ctx context.Context, refs []string) (io.ReadCloser, error) {
	var opts []archive.ExportOpt
	for _, ref := range refs {
		imgs, err := r.findImages(ctx, ref)
		if err != nil {
			return nil, errors.Wrap(err, "saving images")
		}
		opts = append(opts, archive.WithImages(imgs))
	}
	opts = append(opts, archive.WithPlatform(platforms.DefaultStrict()))
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(wrap(r.client.Export(ns(ctx), pw, opts...), "saving images %s", strings.Join(refs, ", ")))
	}()
	return pr, nil
}

// LoadImages imports a docker-save (or OCI) tar stream and unpacks its images.
func (r *Runtime) LoadImages(ctx context.Context, tarStream io.Reader) error {
	ctx = ns(ctx)
	imgs, err := r.client.Import(ctx, tarStream, client.WithImportPlatform(platforms.DefaultStrict()))
	if err != nil {
		return wrap(err, "loading images")
	}
	if len(imgs) == 0 {
		return errors.New("loading images: the stream holds no image")
	}
	for _, img := range imgs {
		if err := client.NewImage(r.client, img).Unpack(ctx, Snapshotter); err != nil {
			return wrap(err, "unpacking image %s", img.Name)
		}
	}
	return nil
}

// InspectImage returns an image's ID (its configuration's digest) and labels.
func (r *Runtime) InspectImage(ctx context.Context, ref string) (*container.Image, error) {
	imgs, err := r.findImages(ctx, ref)
	if err != nil {
		return nil, err
	}
	img := client.NewImage(r.client, imgs[0])
	cfg, err := img.Config(ns(ctx))
	if err != nil {
		return nil, wrap(err, "inspecting image %s", ref)
	}
	spec, err := img.Spec(ns(ctx))
	if err != nil {
		return nil, wrap(err, "inspecting image %s", ref)
	}
	return &container.Image{ID: cfg.Digest.String(), Labels: spec.Config.Labels}, nil
}

// RemoveImage removes an image name (or every name of an ID). An image a container was created
// from cannot be removed while that container exists, unless another name keeps it.
func (r *Runtime) RemoveImage(ctx context.Context, ref string) error {
	ctx = ns(ctx)
	imgs, err := r.findImages(ctx, ref)
	if container.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if err := r.imageInUse(ctx, img, len(imgs) > 1); err != nil {
			return err
		}
	}
	for i, img := range imgs {
		var opts []images.DeleteOpt
		if i == len(imgs)-1 {
			opts = append(opts, images.SynchronousDelete())
		}
		if err := r.client.ImageService().Delete(ctx, img.Name, opts...); err != nil && !container.IsNotFound(wrap(err, "")) {
			return wrap(err, "removing image %s", img.Name)
		}
	}
	return nil
}

// imageInUse fails when a container uses the image and no other name of it would remain.
func (r *Runtime) imageInUse(ctx context.Context, img images.Image, removingAllNames bool) error {
	cs, err := r.client.Containers(ctx, `image=="`+img.Name+`"`)
	if err != nil {
		return wrap(err, "listing containers")
	}
	if len(cs) == 0 {
		return nil
	}
	if !removingAllNames {
		all, err := r.client.ImageService().List(ctx, `target.digest=="`+img.Target.Digest.String()+`"`)
		if err == nil && len(all) > 1 {
			return nil // another name keeps it; the container names the image by that name then
		}
	}
	return errors.Errorf("removing image %s: image is in use by container %s", img.Name, cs[0].ID())
}
