// Package mirror copies the images Dockyard builds between a container engine and a registry,
// so a machine can take them from where another machine published them instead of building
// them: `dockyard push images` publishes what an engine holds, and `dockyard quickstart
// --image-registry` pulls what an engine lacks. Images travel as the engine saves and loads
// them, through the runtime seam, and over the registry API on the host (go-containerregistry),
// so the engine needs no access to the registry and keeps each image's ID: the same config,
// the same layers.
//
// An image's name in the registry is the registry's path and the last element of its name on
// the engine, with its tag: localhost/dockyard/node:v1.34.4 and
// registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2 are, in localhost:5001/dockyard,
// localhost:5001/dockyard/node:v1.34.4 and localhost:5001/dockyard/cluster-api-controller:v1.14.2.
package mirror

import (
	"context"
	"io"
	"net/http"
	"os"
	"path"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Name is where image ref is kept in registry (a host and a path: "localhost:5001/dockyard").
// ref must carry a tag: the name in the registry keeps it.
func Name(registry, ref string) (string, error) {
	t, err := dest(registry, ref)
	if err != nil {
		return "", err
	}
	return t.String(), nil
}

func dest(registry, ref string) (name.Tag, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, errors.Wrapf(err, "image %s must be named with a tag", ref)
	}
	repo, err := name.NewRepository(registry + "/" + path.Base(tag.RepositoryStr()))
	if err != nil {
		return name.Tag{}, errors.Wrapf(err, "%q is no registry path (a host and a path: localhost:5001/dockyard)", registry)
	}
	return repo.Tag(tag.TagStr()), nil
}

// Push copies images from the engine to registry, each under its Name, and returns those
// names. An image the engine lacks is an error naming it, before anything is pushed.
func Push(ctx context.Context, rt container.Runtime, registry string, refs []string, opts ...remote.Option) ([]string, error) {
	dests := make([]name.Tag, len(refs))
	for i, ref := range refs {
		var err error
		if dests[i], err = dest(registry, ref); err != nil {
			return nil, err
		}
		ok, err := rt.ImageExists(ctx, ref)
		if err != nil {
			return nil, errors.Wrapf(err, "looking for image %s on the engine", ref)
		}
		if !ok {
			return nil, errors.Errorf("image %s is not on the engine: build it first (make images component-images, or dockyard quickstart)", ref)
		}
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	var pushed []string
	for i, ref := range refs {
		if err := push(ctx, rt, ref, dests[i], opts); err != nil {
			return pushed, err
		}
		pushed = append(pushed, dests[i].String())
	}
	return pushed, nil
}

// push saves one image from the engine into a file (a saved image is read more than once) and
// writes it to dest.
func push(ctx context.Context, rt container.Runtime, ref string, dest name.Tag, opts []remote.Option) error {
	f, err := os.CreateTemp("", "dockyard-push-*.tar")
	if err != nil {
		return errors.WithStack(err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	saved, err := rt.SaveImages(ctx, []string{ref})
	if err != nil {
		_ = f.Close()
		return err
	}
	_, err = io.Copy(f, saved)
	_ = saved.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Wrapf(err, "saving image %s from the engine", ref)
	}
	img, err := tarball.ImageFromPath(f.Name(), nil)
	if err != nil {
		return errors.Wrapf(err, "reading image %s as the engine saved it", ref)
	}
	return errors.Wrapf(remote.Write(dest, img, opts...), "pushing %s as %s", ref, dest)
}

// Pull copies into the engine, named as they are there, those of refs it lacks that registry
// holds under their Name. It returns those it pulled and those the registry does not hold; an
// image the engine has is neither.
func Pull(ctx context.Context, rt container.Runtime, registry string, refs []string, opts ...remote.Option) (pulled, missing []string, err error) {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	for _, ref := range refs {
		if ok, err := rt.ImageExists(ctx, ref); err != nil {
			return pulled, nil, errors.Wrapf(err, "looking for image %s on the engine", ref)
		} else if ok {
			continue
		}
		src, err := dest(registry, ref)
		if err != nil {
			return pulled, nil, err
		}
		img, err := remote.Image(src, opts...)
		if isNotFound(err) {
			missing = append(missing, ref)
			continue
		}
		if err != nil {
			return pulled, nil, errors.Wrapf(err, "reading %s", src)
		}
		if err := load(ctx, rt, ref, img); err != nil {
			return pulled, nil, errors.Wrapf(err, "pulling %s as %s", src, ref)
		}
		pulled = append(pulled, ref)
	}
	return pulled, missing, nil
}

// load streams img into the engine as a saved image named ref.
func load(ctx context.Context, rt container.Runtime, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return errors.WithStack(err)
	}
	r, w := io.Pipe()
	go func() { w.CloseWithError(tarball.Write(tag, img, w)) }()
	err = rt.LoadImages(ctx, r)
	_ = r.CloseWithError(errors.New("the engine stopped reading"))
	return err
}

// isNotFound tells whether a registry answered that it has no such image (or repository).
func isNotFound(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	if terr.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range terr.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}
