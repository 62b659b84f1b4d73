package docker

import (
	"context"
	"fmt"
	"io"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// CopyImagesFrom copies images from another engine (where Dockyard's image builder made them)
// into this Manager's, as a docker-save stream, the one format every engine loads. An image this
// engine already has with the same ID is left alone, so copying again costs one inspect per
// image. Progress goes to log.
func (m *Manager) CopyImagesFrom(ctx context.Context, from *Manager, refs []string, log io.Writer) error {
	for _, ref := range refs {
		src, err := from.runtime.InspectImage(ctx, ref)
		if err != nil {
			return errors.Wrapf(err, "image %s on the engine it is copied from", ref)
		}
		dst, err := m.runtime.InspectImage(ctx, ref)
		switch {
		case err == nil && dst.ID == src.ID:
			fmt.Fprintf(log, "%s: already loaded (%s)\n", ref, shortID(src.ID))
			continue
		case err != nil && !container.IsNotFound(err):
			return errors.Wrapf(err, "inspecting image %s on the target engine", ref)
		}
		if err := copyImage(ctx, from.runtime, m.runtime, ref); err != nil {
			return err
		}
		got, err := m.runtime.InspectImage(ctx, ref)
		if err != nil {
			return errors.Wrapf(err, "image %s after loading it", ref)
		}
		if got.ID != src.ID {
			return errors.Errorf("image %s loaded with ID %s, want %s", ref, got.ID, src.ID)
		}
		fmt.Fprintf(log, "%s: loaded (%s)\n", ref, shortID(src.ID))
	}
	return nil
}

func copyImage(ctx context.Context, from, to container.Runtime, ref string) error {
	stream, err := from.SaveImages(ctx, []string{ref})
	if err != nil {
		return errors.Wrapf(err, "saving image %s", ref)
	}
	defer func() { _ = stream.Close() }()
	return errors.Wrapf(to.LoadImages(ctx, stream), "loading image %s", ref)
}

// shortID is an image ID as `docker images` shows it.
func shortID(id string) string {
	const prefix = "sha256:"
	if len(id) > len(prefix)+12 && id[:len(prefix)] == prefix {
		return id[len(prefix) : len(prefix)+12]
	}
	return id
}
