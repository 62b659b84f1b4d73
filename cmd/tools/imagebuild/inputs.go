package imagebuild

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"sort"

	"github.com/pkg/errors"
)

// Inputs collects what an artifact (a root filesystem, a layer, an image) is made from. Its
// Hash keys the artifact in the cache and in the engine (the image label InputsLabel): equal
// inputs mean the artifact can be reused.
type Inputs struct {
	values map[string][]byte
}

// Set records one named input. Setting a name twice replaces the earlier value.
func (in *Inputs) Set(name, value string) {
	in.SetBytes(name, []byte(value))
}

// SetBytes records one named input given as bytes (a file's content, a script).
func (in *Inputs) SetBytes(name string, value []byte) {
	if in.values == nil {
		in.values = map[string][]byte{}
	}
	in.values[name] = append([]byte(nil), value...)
}

// SetJSON records the JSON encoding of v (a build recipe, a list).
func (in *Inputs) SetJSON(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return errors.Wrapf(err, "encoding input %s", name)
	}
	in.SetBytes(name, b)
	return nil
}

// SetFS records every file of fsys (path and content) under name.
func (in *Inputs) SetFS(name string, fsys fs.FS) error {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		writeField(h, []byte(path))
		writeField(h, content)
		return nil
	})
	if err != nil {
		return errors.Wrapf(err, "hashing %s", name)
	}
	in.SetBytes(name, h.Sum(nil))
	return nil
}

// Names returns the recorded names, sorted.
func (in *Inputs) Names() []string {
	names := make([]string, 0, len(in.values))
	for n := range in.values {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Hash returns the hex SHA-256 of every name and value. It does not depend on the order the
// inputs were set in, and length prefixes keep ("ab","c") and ("a","bc") apart.
func (in *Inputs) Hash() string {
	h := sha256.New()
	for _, n := range in.Names() {
		writeField(h, []byte(n))
		writeField(h, in.values[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

type byteWriter interface{ Write([]byte) (int, error) }

func writeField(w byteWriter, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	_, _ = w.Write(n[:])
	_, _ = w.Write(b)
}

// short abbreviates a hash for names and tags.
func short(hash string) string {
	if len(hash) > 16 {
		return hash[:16]
	}
	return hash
}
