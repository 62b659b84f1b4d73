package imagebuild

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/fileutil"
)

// fileLayer is an image layer stored as a gzipped tar file in the cache, with its digests
// recorded next to it so that assembling an image never re-reads or re-compresses it.
type fileLayer struct {
	path string
	meta layerMeta
}

type layerMeta struct {
	Digest string `json:"digest"`
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error) { return v1.NewHash(l.meta.Digest) }
func (l *fileLayer) DiffID() (v1.Hash, error) { return v1.NewHash(l.meta.DiffID) }
func (l *fileLayer) Size() (int64, error)     { return l.meta.Size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error) {
	return types.DockerLayer, nil
}
func (l *fileLayer) Compressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &readCloser{Reader: zr, close: func() error { _ = zr.Close(); return f.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }

// openLayer returns the layer stored at file (file.json holds its digests), or false when it
// is not (completely) there.
func openLayer(file string) (*fileLayer, bool) {
	b, err := os.ReadFile(file + ".json")
	if err != nil {
		return nil, false
	}
	var meta layerMeta
	if json.Unmarshal(b, &meta) != nil || meta.Digest == "" || meta.DiffID == "" {
		return nil, false
	}
	if st, err := os.Stat(file); err != nil || st.Size() != meta.Size {
		return nil, false
	}
	return &fileLayer{path: file, meta: meta}, true
}

// writeLayer writes the tar stream produced by write into file as a gzipped layer, computing
// its digests on the way. The files appear only when complete (written under temporary names,
// then renamed; the .json last), so an interrupted build leaves nothing that looks valid.
func writeLayer(file string, write func(w io.Writer) error) (*fileLayer, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	// A unique temporary name: two builds may write the same layer at once (make -j); both
	// write identical content and the last rename wins.
	f, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	defer f.Close()

	compressed := &countingHash{h: sha256.New()}
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, compressed), gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	uncompressed := sha256.New()
	if err := write(io.MultiWriter(zw, uncompressed)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	meta := layerMeta{
		Digest: fmt.Sprintf("sha256:%x", compressed.h.Sum(nil)),
		DiffID: fmt.Sprintf("sha256:%x", uncompressed.Sum(nil)),
		Size:   compressed.n,
	}
	if err := os.Rename(tmp, file); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(meta)
	if err := fileutil.WriteAtomic(file+".json", b, 0o644); err != nil {
		return nil, err
	}
	return &fileLayer{path: file, meta: meta}, nil
}

type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// tarBuilder writes a layer's tar stream: files, directories and symlinks at absolute image
// paths, parents created as needed (0755, root). Every entry is owned by root and dated at the
// Unix epoch, so equal content gives an equal layer digest.
type tarBuilder struct {
	tw   *tar.Writer
	dirs map[string]bool
}

var epoch = time.Unix(0, 0).UTC()

func newTarBuilder(w io.Writer) *tarBuilder {
	return &tarBuilder{tw: tar.NewWriter(w), dirs: map[string]bool{}}
}

func (t *tarBuilder) parents(p string) error {
	dir := path.Dir(p)
	if dir == "/" || dir == "." || t.dirs[dir] {
		return nil
	}
	return t.Dir(dir, 0o755)
}

func tarName(p string) string { return strings.TrimPrefix(path.Clean(p), "/") }

// Dir adds a directory.
func (t *tarBuilder) Dir(p string, mode int64) error {
	p = path.Clean(p)
	if t.dirs[p] {
		return nil
	}
	if err := t.parents(p); err != nil {
		return err
	}
	t.dirs[p] = true
	return t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: tarName(p) + "/", Mode: mode, ModTime: epoch})
}

// File adds a regular file with the given content.
func (t *tarBuilder) File(p string, mode int64, content []byte) error {
	if err := t.parents(p); err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: tarName(p), Mode: mode, Size: int64(len(content)), ModTime: epoch}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := t.tw.Write(content)
	return err
}

// HostFile adds the content of a file of this machine.
func (t *tarBuilder) HostFile(p string, mode int64, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := t.Stream(p, mode, st.Size(), f); err != nil {
		return errors.Wrapf(err, "adding %s", src)
	}
	return nil
}

// Stream adds a regular file of size bytes read from r, which must hold exactly that many.
func (t *tarBuilder) Stream(p string, mode, size int64, r io.Reader) error {
	if err := t.parents(p); err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: tarName(p), Mode: mode, Size: size, ModTime: epoch}
	if err := t.tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(t.tw, r)
	if err == nil && n != size {
		err = errors.Errorf("%s: read %d bytes, not %d (changed while being read?)", p, n, size)
	}
	return err
}

// Symlink adds a symbolic link.
func (t *tarBuilder) Symlink(p, target string) error {
	if err := t.parents(p); err != nil {
		return err
	}
	return t.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: tarName(p), Linkname: target, Mode: 0o777, ModTime: epoch})
}

// Close finishes the tar stream.
func (t *tarBuilder) Close() error { return t.tw.Close() }
