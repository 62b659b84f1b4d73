package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/cmd/tools/imagebuild"
	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

// Verify checks a release directory against its SHA256SUMS: every file listed has its sum, and
// no file is missing from the list.
func Verify(dir string) error {
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return errors.Wrapf(err, "reading the release's %s", SumsFile)
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != sha256.Size*2 || file == "" || path.IsAbs(file) || strings.Contains(file, "..") {
			return errors.Errorf("%s: line %q is not \"<sha256>  <file>\"", SumsFile, sc.Text())
		}
		listed[file] = sum
	}
	var problems []string
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == SumsFile {
			return nil
		}
		want, ok := listed[rel]
		if !ok {
			problems = append(problems, rel+" is not in "+SumsFile)
			return nil
		}
		delete(listed, rel)
		got, err := fileutil.SHA256(p)
		if err != nil {
			return err
		}
		if got != want {
			problems = append(problems, rel+" does not have the sum "+SumsFile+" gives")
		}
		return nil
	})
	if err != nil {
		return errors.Wrapf(err, "reading the release in %s", dir)
	}
	for file := range listed {
		problems = append(problems, file+" is missing")
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return errors.Errorf("the release in %s is not what its %s lists: %s", dir, SumsFile, strings.Join(problems, "; "))
	}
	return nil
}

// Published is an image pushed by Publish.
type Published struct {
	// Ref is the tagged reference the archive names the image by.
	Ref string
	// Digest is the digest it was pushed with, the one the release's components pin.
	Digest v1.Hash
}

// Publish pushes the images of a release directory (images/*.oci.tar) to the registries their
// archives name them in, after checking the release against its SHA256SUMS: a release whose
// components pin localhost:5001/dockyard/manager:v0.2.0@sha256:… pushes that image to
// localhost:5001, under that tag, with that digest. An archive naming an image by a name without
// a registry host (localhost/dockyard/manager) is refused: make release
// RELEASE_IMAGE_REPOSITORY=<registry>/<path> names them for a registry. The images are read
// straight from the archives, never through an engine, so their digests are kept.
func Publish(ctx context.Context, dir string, opts ...remote.Option) ([]Published, error) {
	if err := Verify(dir); err != nil {
		return nil, err
	}
	archives, err := filepath.Glob(filepath.Join(dir, ImagesDir, "*.oci.tar"))
	if err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, errors.Errorf("the release in %s has no image archive (%s/*.oci.tar)", dir, ImagesDir)
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	var pushed []Published
	for _, archive := range archives {
		p, err := publishArchive(archive, opts)
		if err != nil {
			return pushed, err
		}
		pushed = append(pushed, p...)
	}
	return pushed, nil
}

func publishArchive(archive string, opts []remote.Option) ([]Published, error) {
	tmp, err := os.MkdirTemp("", "dockyard-release-layout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := untar(archive, tmp); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(tmp)
	if err != nil {
		return nil, errors.Wrapf(err, "reading %s as an OCI image layout", archive)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, errors.Wrapf(err, "reading the index of %s", archive)
	}
	var pushed []Published
	for _, desc := range im.Manifests {
		ref := desc.Annotations[imagebuild.ImageNameAnnotation]
		if ref == "" {
			return pushed, errors.Errorf("%s: image %s has no name (annotation %s)", archive, desc.Digest, imagebuild.ImageNameAnnotation)
		}
		tag, err := name.NewTag(ref, name.StrictValidation)
		if err != nil {
			return pushed, errors.Wrapf(err, "%s names its image %q", archive, ref)
		}
		if host := tag.RegistryStr(); !strings.ContainsAny(host, ".:") {
			return pushed, errors.Errorf("%s names its image %s, which is in no registry (%q is no host): make release RELEASE_IMAGE_REPOSITORY=<registry>/<path> names images for one",
				archive, ref, host)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return pushed, errors.Wrapf(err, "reading image %s of %s", desc.Digest, archive)
		}
		if err := remote.Write(tag, img, opts...); err != nil {
			return pushed, errors.Wrapf(err, "pushing %s", ref)
		}
		pushed = append(pushed, Published{Ref: ref, Digest: desc.Digest})
	}
	return pushed, nil
}

// untar unpacks an archive of regular files and directories (what WriteOCIArchive writes) into
// dir, refusing anything else and any path leaving dir.
func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errors.Wrapf(err, "reading %s", archive)
		}
		rel := path.Clean(hdr.Name)
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return errors.Errorf("%s: entry %q leaves the archive", archive, hdr.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return errors.Wrapf(err, "unpacking %s from %s", hdr.Name, archive)
			}
		default:
			return errors.Errorf("%s: entry %q is neither a file nor a directory", archive, hdr.Name)
		}
	}
}
