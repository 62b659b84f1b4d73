package imagebuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

// debianSource is a source tarball of Debian's archive, pinned by its SHA-256 (the archive's
// Sources index lists it).
type debianSource struct {
	// Pool is the file's path below the mirror, e.g. pool/main/b/busybox/busybox_1.37.0.orig.tar.bz2.
	Pool   string
	SHA256 string
}

// busyboxSource is BusyBox 1.37.0 as Debian's archive holds it (the upstream release).
var busyboxSource = debianSource{
	Pool:   "pool/main/b/busybox/busybox_1.37.0.orig.tar.bz2",
	SHA256: "3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4",
}

// sourceTarball returns a source tarball from the mirror, downloaded once into the cache
// (sources/<sha256>) and refused when its checksum differs.
func (b *Builder) sourceTarball(ctx context.Context, src debianSource) ([]byte, error) {
	path := filepath.Join(b.CacheDir, "sources", src.SHA256)
	if data, err := os.ReadFile(path); err == nil && hashHex(data) == src.SHA256 {
		return data, nil
	}
	url := b.mirror() + "/" + src.Pool
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, errors.Wrapf(err, "downloading %s", url)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, errors.Wrapf(err, "downloading %s", url)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.Errorf("downloading %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, errors.Wrapf(err, "downloading %s", url)
	}
	if got := hashHex(data); got != src.SHA256 {
		return nil, errors.Errorf("%s has SHA-256 %s, want %s", url, got, src.SHA256)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return nil, err
	}
	return data, os.Rename(path+".tmp", path)
}

func hashHex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
