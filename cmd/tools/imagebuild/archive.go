package imagebuild

import (
	"encoding/json"
	"io"

	"github.com/distribution/reference"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/pkg/errors"
)

// Annotations of an OCI archive's index naming its image: the OCI image layout's own (the tag
// alone), and containerd's (the whole reference), which `ctr images import` and Docker's image
// store read.
const (
	ociRefNameAnnotation = "org.opencontainers.image.ref.name"
	ImageNameAnnotation  = "io.containerd.image.name"
)

// WriteOCIArchive writes img as an OCI image layout in a tar stream, named ref, byte for byte
// the same for the same image: entries in a fixed order, Unix epoch times, no owner. The
// manifest inside is the image's own, so the archive carries the digest a reference pinned to
// img names; `ctr images import` keeps it (Docker's save and load do not).
func WriteOCIArchive(w io.Writer, ref string, img v1.Image) error {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return errors.Wrapf(err, "image reference %q", ref)
	}
	tagged, ok := named.(reference.Tagged)
	if !ok {
		return errors.Errorf("image reference %q has no tag: an archive names its image by one", ref)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return errors.Wrapf(err, "reading the manifest of %s", ref)
	}
	digest, err := img.Digest()
	if err != nil {
		return errors.Wrapf(err, "digest of %s", ref)
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return errors.Wrapf(err, "media type of %s", ref)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return errors.Wrapf(err, "reading the configuration of %s", ref)
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return errors.Wrapf(err, "configuration digest of %s", ref)
	}
	layers, err := img.Layers()
	if err != nil {
		return errors.Wrapf(err, "layers of %s", ref)
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mediaType,
			Digest:    digest,
			Size:      int64(len(manifest)),
			Annotations: map[string]string{
				ociRefNameAnnotation: tagged.Tag(),
				ImageNameAnnotation:  named.String(),
			},
		}},
	})
	if err != nil {
		return errors.Wrap(err, "encoding the archive's index")
	}

	t := newTarBuilder(w)
	blob := func(h v1.Hash) string { return "/blobs/" + h.Algorithm + "/" + h.Hex }
	if err := t.File("/oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := t.File("/index.json", 0o644, index); err != nil {
		return err
	}
	if err := t.File(blob(digest), 0o644, manifest); err != nil {
		return err
	}
	if err := t.File(blob(configDigest), 0o644, config); err != nil {
		return err
	}
	written := map[v1.Hash]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return errors.Wrapf(err, "layer digest of %s", ref)
		}
		if written[d] {
			continue
		}
		written[d] = true
		if err := archiveLayer(t, blob(d), l); err != nil {
			return errors.Wrapf(err, "writing layer %s of %s", d, ref)
		}
	}
	return t.Close()
}

func archiveLayer(t *tarBuilder, p string, l v1.Layer) error {
	size, err := l.Size()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return t.Stream(p, 0o644, size, rc)
}
