package containerd

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	cerrdefs "github.com/containerd/errdefs"
	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/pkg/errors"
	"golang.org/x/sys/unix"
)

// Copies reach a running container through /proc/<pid>/root, which shows its mount namespace
// (volumes, binds, tmpfs) as Docker's archive API does; paths are resolved inside that root,
// symlinks included, so nothing escapes it. A container that does not run has its root
// filesystem snapshot mounted for the copy, with its binds and volumes mapped onto their host
// directories (its tmpfs mounts do not exist then).

// containerRoot calls f with the root of a container's filesystem and whether its mounts are
// already in place (running) or must be mapped with hostPath (not running).
func (r *Runtime) containerRoot(ctx context.Context, name string, f func(root string, running bool, rec *record) error) error {
	ctx = ns(ctx)
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil {
		return wrap(err, "container %s", name)
	}
	rec, err := r.loadRecord(name)
	if err != nil {
		return err
	}
	if task, err := c.Task(ctx, nil); err == nil {
		if st, err := task.Status(ctx); err == nil && st.Status == client.Running {
			return f(fmt.Sprintf("/proc/%d/root", task.Pid()), true, rec)
		}
	} else if !cerrdefs.IsNotFound(err) {
		return wrap(err, "container %s", name)
	}
	return r.withRootfs(ctx, name, func(root string) error { return f(root, false, rec) })
}

// resolve maps a path of the container onto the host.
func resolve(root string, running bool, rec *record, p string) (string, error) {
	if running {
		return securejoin.SecureJoin(root, p)
	}
	return hostPath(rec, root, p)
}

// CopyToContainer extracts a tar stream into a directory of the container, which must exist.
func (r *Runtime) CopyToContainer(ctx context.Context, name, dir string, tarStream io.Reader) error {
	return r.containerRoot(ctx, name, func(root string, running bool, rec *record) error {
		base, err := resolve(root, running, rec, dir)
		if err != nil {
			return errors.Wrapf(err, "copying into %s:%s", name, dir)
		}
		if st, err := os.Stat(base); err != nil || !st.IsDir() {
			return notFound("copying into %s:%s: no such directory", name, dir)
		}
		return errors.Wrapf(extract(base, tarStream), "copying into %s:%s", name, dir)
	})
}

// extract writes a tar stream under base; entries are resolved within base.
func extract(base string, stream io.Reader) error {
	tr := tar.NewReader(stream)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.Wrap(err, "reading the tar stream")
		}
		if err := extractEntry(base, hdr, tr); err != nil {
			return errors.Wrapf(err, "extracting %s", hdr.Name)
		}
	}
}

func extractEntry(base string, hdr *tar.Header, tr io.Reader) error {
	rel := filepath.Clean("/" + hdr.Name)
	if rel == "/" {
		return nil
	}
	parent, err := securejoin.SecureJoin(base, filepath.Dir(rel))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	p := filepath.Join(parent, filepath.Base(rel))
	mode := os.FileMode(hdr.Mode).Perm() | os.FileMode(hdr.Mode)&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := os.Mkdir(p, mode); err != nil && !os.IsExist(err) {
			return err
		}
	case tar.TypeReg:
		if err := writeRegular(p, mode, tr); err != nil {
			return err
		}
	case tar.TypeSymlink:
		_ = os.Remove(p)
		if err := os.Symlink(hdr.Linkname, p); err != nil {
			return err
		}
		return os.Lchown(p, hdr.Uid, hdr.Gid)
	case tar.TypeLink:
		target, err := securejoin.SecureJoin(base, hdr.Linkname)
		if err != nil {
			return err
		}
		_ = os.Remove(p)
		return os.Link(target, p)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		_ = os.Remove(p)
		kind := map[byte]uint32{tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK, tar.TypeFifo: unix.S_IFIFO}[hdr.Typeflag]
		dev := unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
		if err := unix.Mknod(p, kind|uint32(mode.Perm()), int(dev)); err != nil {
			return err
		}
	default:
		return nil // extended headers and the like
	}
	if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
		return err
	}
	if err := os.Chmod(p, mode); err != nil {
		return err
	}
	return os.Chtimes(p, hdr.ModTime, hdr.ModTime)
}

// writeRegular creates the regular file p, replacing what was there, with the content of r.
func writeRegular(p string, mode os.FileMode, r io.Reader) error {
	_ = os.Remove(p)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// CopyFromContainer returns a tar stream of a path in the container: the file, or the
// directory and everything under it, named after the path's last element.
func (r *Runtime) CopyFromContainer(ctx context.Context, name, path string) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	ready := make(chan error, 1)
	go func() {
		err := r.containerRoot(context.WithoutCancel(ctx), name, func(root string, running bool, rec *record) error {
			src, err := resolve(root, running, rec, path)
			if err == nil {
				_, err = os.Lstat(src)
			}
			if err != nil {
				err = notFound("copying %s:%s: %v", name, path, err)
				ready <- err
				return err
			}
			ready <- nil
			return writeTar(pw, src, filepath.Base(filepath.Clean("/"+path)))
		})
		select {
		case ready <- err: // failed before the stream began
		default:
		}
		pw.CloseWithError(err)
	}()
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
		return pr, nil
	case <-ctx.Done():
		pr.CloseWithError(ctx.Err())
		return nil, errors.Wrapf(ctx.Err(), "copying %s:%s", name, path)
	}
}

// writeTar writes src (a file or a directory tree) as a tar stream with entries under name.
func writeTar(w io.Writer, src, name string) error {
	tw := tar.NewWriter(w)
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(filepath.Join(name, rel))
		if fi.IsDir() && !strings.HasSuffix(hdr.Name, "/") {
			hdr.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return errors.Wrapf(err, "archiving %s", src)
	}
	return errors.Wrap(tw.Close(), "archiving")
}
