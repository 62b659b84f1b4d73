// Package fileutil writes files so that a reader never sees one half-written, and sums them.
package fileutil

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

// WriteAtomic writes data to path with mode through a temporary file in the same directory,
// renamed over path: a reader sees the old content or the new, never part of it, and two
// writers at once never share the temporary file. On error path is left as it was.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return errors.Wrapf(err, "writing %s", path)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Wrapf(err, "writing %s", path)
	}
	return errors.Wrapf(os.Rename(f.Name(), path), "replacing %s", path)
}

// WriteIfChanged writes data to path as WriteAtomic does, unless path holds data already: a
// file that does not change keeps its modification time, and a reader is never disturbed.
func WriteIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return WriteAtomic(path, data, mode)
}

// SHA256 returns the hex SHA-256 of a file's content.
func SHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", errors.Wrapf(err, "reading %s", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
