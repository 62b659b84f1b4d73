package imagebuild

import (
	"context"
	"io"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// The builder reaches the engine only through container.Runtime (the Docker SDK implementation
// in pkg/container/dockerengine, and whatever implementations follow). Images go in as docker-save
// tar streams that already carry their names, so nothing needs tagging.

// BuildLabel marks the containers the builder creates (the preload build node); its value says
// what for.
const BuildLabel = LabelPrefix + "build"

func (b *Builder) runtime() (container.Runtime, error) {
	if b.Runtime == nil {
		return nil, errors.New("imagebuild: Builder.Runtime is not set")
	}
	return b.Runtime, nil
}

// inspectImage returns an image in the engine; ok is false when the engine does not have it.
func (b *Builder) inspectImage(ctx context.Context, ref string) (img *container.Image, ok bool, err error) {
	rt, err := b.runtime()
	if err != nil {
		return nil, false, err
	}
	img, err = rt.InspectImage(ctx, ref)
	if container.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return img, true, nil
}

// imageLabels returns the labels of an image in the engine; ok is false when the engine does
// not have it.
func (b *Builder) imageLabels(ctx context.Context, ref string) (labels map[string]string, ok bool, err error) {
	img, ok, err := b.inspectImage(ctx, ref)
	if !ok {
		return nil, ok, err
	}
	return img.Labels, true, nil
}

// loadImages streams images, named as given, into the engine without writing the tarball
// anywhere.
func (b *Builder) loadImages(ctx context.Context, images map[name.Reference]v1.Image) error {
	rt, err := b.runtime()
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(tarball.MultiRefWrite(images, pw))
	}()
	err = rt.LoadImages(ctx, pr)
	// Unblocks the writer when the engine stopped reading early.
	pr.CloseWithError(io.ErrClosedPipe)
	return err
}

// load loads an image into the engine under ref (and extraRefs), checks that the engine now
// has it under every name, and drops the images these names pointed to before, as the engine
// reported them, so a rebuild leaves no untagged image behind.
func (b *Builder) load(ctx context.Context, ref string, img v1.Image, extraRefs ...string) error {
	named := []namedImage{{Ref: ref, Image: img}}
	for _, r := range extraRefs {
		named = append(named, namedImage{Ref: r, Image: img})
	}
	refs, err := refMap(named...)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	var before []string
	for _, n := range named {
		prev, ok, err := b.inspectImage(ctx, n.Ref)
		if err != nil {
			return err
		}
		if ok && !slices.Contains(before, prev.ID) {
			before = append(before, prev.ID)
		}
	}
	b.logf("loading %s into the engine", ref)
	if err := b.loadImages(ctx, refs); err != nil {
		return err
	}
	// The engine may report a failed load only inside its response stream; check the result.
	want := cf.Config.Labels[InputsLabel]
	var after []string
	for _, n := range named {
		got, ok, err := b.inspectImage(ctx, n.Ref)
		if err != nil {
			return err
		}
		if !ok {
			return errors.Errorf("loading %s: the engine does not have it afterwards", n.Ref)
		}
		if have := got.Labels[InputsLabel]; have != want {
			return errors.Errorf("loading %s: the engine has another image under it afterwards (inputs label %q, want %q)", n.Ref, have, want)
		}
		after = append(after, got.ID)
	}
	for _, prev := range before {
		if !slices.Contains(after, prev) {
			b.dropImage(ctx, prev, "the previous build of "+ref)
		}
	}
	return nil
}

// dropImage removes an image the builder made and no longer needs; an image still in use (a
// node runs it) stays.
func (b *Builder) dropImage(ctx context.Context, ref, what string) {
	if err := b.Runtime.RemoveImage(ctx, ref); err != nil {
		b.logf("kept %s (%s): %v", ref, what, err)
	}
}
