// Package logdir is the directory a log collection writes into, made to be handed to someone
// else: private modes, every file redacted as it is written, and no link inside it followed.
package logdir

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// ErrNotEmpty is the error of Open for a directory that already has entries.
var ErrNotEmpty = errors.New("the directory is not empty")

// Dir is a directory a log collection writes into, made to be handed to someone else:
//
//   - every directory it creates is 0700 and every file 0600, whatever the umask;
//   - every file is redacted with bootstrap.Redact (tokens, certificate keys, private keys,
//     base64 holding PEM blocks, service account tokens) as it is written;
//   - no symbolic link inside it is followed: a file is created with O_CREATE|O_EXCL, which
//     fails on any existing entry, a link included; a directory is opened through os.Root and
//     must be the very directory its parent holds under that name (a link, or a directory
//     swapped for one, is refused);
//   - an existing entry of the same name is an error, or, when overwriting, removed (a link
//     itself, never its target) and created again.
type Dir struct {
	root      *os.Root
	path      string
	overwrite bool
}

// Open opens the directory at path for a log collection, creating it and its missing
// parents (0700). A directory that already has entries is refused (ErrNotEmpty) unless
// overwrite is set: then files of the same names are replaced. path itself may be a link the
// user made; nothing inside it is followed. Close it after use.
func Open(path string, overwrite bool) (*Dir, error) {
	created, err := mkdirAll(path)
	if err != nil {
		return nil, errors.Wrapf(err, "creating the log directory %s", path)
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, errors.Wrapf(err, "opening the log directory %s", path)
	}
	d := &Dir{root: root, path: path, overwrite: overwrite}
	self, err := root.Open(".")
	if err != nil {
		_ = root.Close()
		return nil, errors.Wrapf(err, "opening the log directory %s", path)
	}
	defer self.Close()
	if created {
		err = self.Chmod(0o700)
	} else if !overwrite {
		names, rerr := self.Readdirnames(4)
		if len(names) == 4 {
			names[3] = "..."
		}
		switch {
		case len(names) > 0:
			err = errors.Wrapf(ErrNotEmpty, "it holds %s", strings.Join(names, ", "))
		case !errors.Is(rerr, io.EOF):
			err = rerr
		}
	}
	if err != nil {
		_ = root.Close()
		return nil, errors.Wrapf(err, "writing logs into %s", path)
	}
	return d, nil
}

// mkdirAll creates the directory at path and its missing parents, 0700; created says whether
// path itself was missing.
func mkdirAll(path string) (created bool, err error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return false, nil
	case err == nil:
		return false, errors.Errorf("%s is not a directory", path)
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if parent := filepath.Dir(path); parent != path {
		if created, err := mkdirAll(parent); err != nil {
			return false, err
		} else if created {
			// A parent the umask left without its owner's bits could not hold path.
			if err := os.Chmod(parent, 0o700); err != nil {
				return false, err
			}
		}
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		return false, err
	}
	return true, nil
}

// Path is the directory's path, for messages.
func (d *Dir) Path() string { return d.path }

// Close releases the directory. Every file was closed, and its error returned, by WriteFile.
func (d *Dir) Close() { _ = d.root.Close() }

// Dir opens the subdirectory name (one path element), creating it 0700 when missing; an
// existing one is made 0700. A link (or anything not a directory) by that name is refused,
// or, when overwriting, removed (the link itself) and replaced by a directory.
func (d *Dir) Dir(name string) (*Dir, error) {
	path := filepath.Join(d.path, name)
	if err := checkLogName(name); err != nil {
		return nil, err
	}
	if err := d.root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, errors.Wrapf(err, "creating %s", path)
	}
	fi, err := d.root.Lstat(name)
	if err != nil {
		return nil, errors.Wrapf(err, "creating %s", path)
	}
	if !fi.IsDir() {
		if !d.overwrite {
			return nil, errors.Errorf("%s is a %s, not a directory: not written through", path, kind(fi))
		}
		if err := d.root.Remove(name); err != nil {
			return nil, errors.Wrapf(err, "replacing %s", path)
		}
		if err := d.root.Mkdir(name, 0o700); err != nil {
			return nil, errors.Wrapf(err, "creating %s", path)
		}
		if fi, err = d.root.Lstat(name); err != nil {
			return nil, errors.Wrapf(err, "creating %s", path)
		}
	}
	// os.Root follows a link inside the root: what was opened must be the directory Lstat saw.
	root, err := d.root.OpenRoot(name)
	if err != nil {
		return nil, errors.Wrapf(err, "opening %s", path)
	}
	sub := &Dir{root: root, path: path, overwrite: d.overwrite}
	if err := sub.check(fi); err != nil {
		_ = root.Close()
		return nil, err
	}
	return sub, nil
}

// check makes sure the directory is the one fi describes (no link was followed to it) and
// makes it 0700.
func (d *Dir) check(fi fs.FileInfo) error {
	self, err := d.root.Open(".")
	if err != nil {
		return errors.Wrapf(err, "opening %s", d.path)
	}
	defer self.Close()
	opened, err := self.Stat()
	if err != nil {
		return errors.Wrapf(err, "opening %s", d.path)
	}
	if !fi.IsDir() || !os.SameFile(fi, opened) {
		return errors.Errorf("%s was replaced while being opened (by a link?): not written through", d.path)
	}
	return errors.Wrapf(self.Chmod(0o700), "making %s private", d.path)
}

// WriteFile writes data, redacted, into the file name (one path element), 0600. An existing
// entry by that name (a link included) is an error, or, when overwriting, removed (the link
// itself) and the file created again.
func (d *Dir) WriteFile(name string, data []byte) error {
	path := filepath.Join(d.path, name)
	if err := checkLogName(name); err != nil {
		return err
	}
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := d.root.OpenFile(name, flags, 0o600)
	if errors.Is(err, fs.ErrExist) && d.overwrite {
		if err := d.root.RemoveAll(name); err != nil {
			return errors.Wrapf(err, "replacing %s", path)
		}
		f, err = d.root.OpenFile(name, flags, 0o600)
	}
	if err != nil {
		return errors.Wrapf(err, "creating %s", path)
	}
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.WriteString(bootstrap.Redact(string(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return errors.Wrapf(err, "writing %s", path)
}

// WriteJSON writes v as indented JSON into the file name, like WriteFile.
func (d *Dir) WriteJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "encoding %s", name)
	}
	return d.WriteFile(name, append(data, '\n'))
}

// checkLogName refuses a name that is not a single path element.
func checkLogName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return errors.Errorf("%q is not a file name", name)
	}
	return nil
}

func kind(fi fs.FileInfo) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symbolic link"
	case fi.Mode().IsRegular():
		return "file"
	}
	return fi.Mode().Type().String()
}
