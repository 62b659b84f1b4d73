package imagebuild

import (
	"context"
	"fmt"
	"io"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Transfer copies images from the engine the builder made them in to another engine (Podman,
// containerd) as a docker-save stream, the one format every runtime loads. An image the target
// already has with the same ID is left alone, so a second transfer costs one inspect per image.
func Transfer(ctx context.Context, from, to container.Runtime, refs []string, log io.Writer) error {
	for _, ref := range refs {
		src, err := from.InspectImage(ctx, ref)
		if err != nil {
			return errors.Wrapf(err, "image %s on the build engine (make images builds it)", ref)
		}
		dst, err := to.InspectImage(ctx, ref)
		switch {
		case err == nil && dst.ID == src.ID:
			fmt.Fprintf(log, "%s: already loaded (%s)\n", ref, short(src.ID))
			continue
		case err != nil && !container.IsNotFound(err):
			return errors.Wrapf(err, "inspecting image %s on the target engine", ref)
		}
		if err := copyImage(ctx, from, to, ref); err != nil {
			return err
		}
		got, err := to.InspectImage(ctx, ref)
		if err != nil {
			return errors.Wrapf(err, "image %s after loading it", ref)
		}
		if got.ID != src.ID {
			return errors.Errorf("image %s loaded with ID %s, want %s", ref, got.ID, src.ID)
		}
		fmt.Fprintf(log, "%s: loaded (%s)\n", ref, short(src.ID))
	}
	return nil
}

func copyImage(ctx context.Context, from, to container.Runtime, ref string) error {
	stream, err := from.SaveImages(ctx, []string{ref})
	if err != nil {
		return errors.Wrapf(err, "saving image %s", ref)
	}
	defer func() { _ = stream.Close() }()
	if err := to.LoadImages(ctx, stream); err != nil {
		return errors.Wrapf(err, "loading image %s", ref)
	}
	return nil
}
