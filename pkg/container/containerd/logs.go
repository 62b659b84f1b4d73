package containerd

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/pkg/errors"
)

// A container's output goes to a file written by containerd's shim (a file:// log URI), so it
// is kept while no client runs. With a terminal the shim copies the console to the file.

type fileIO struct{ cfg cio.Config }

func (f *fileIO) Config() cio.Config { return f.cfg }
func (f *fileIO) Cancel()            {}
func (f *fileIO) Wait()              {}
func (f *fileIO) Close() error       { return nil }

// logFileIO creates task IO that appends stdout and stderr to path.
func logFileIO(path string, terminal bool) cio.Creator {
	return func(string) (cio.IO, error) {
		u := (&url.URL{Scheme: "file", Path: path}).String()
		return &fileIO{cfg: cio.Config{Terminal: terminal, Stdout: u, Stderr: u}}, nil
	}
}

// ContainerLogs returns the last lines of a container's output.
func (r *Runtime) ContainerLogs(ctx context.Context, name string, tailLines int) (string, error) {
	if _, err := r.client.LoadContainer(ns(ctx), name); err != nil {
		return "", wrap(err, "reading logs of container %s", name)
	}
	f, err := os.Open(r.logPath(name))
	if os.IsNotExist(err) {
		return "", nil // never started
	}
	if err != nil {
		return "", errors.Wrapf(err, "reading logs of container %s", name)
	}
	defer f.Close()
	return tail(f, tailLines)
}

// tail returns the last n lines of a file, reading at most its last 4 MiB.
func tail(f *os.File, n int) (string, error) {
	const window = 4 << 20
	st, err := f.Stat()
	if err != nil {
		return "", errors.Wrap(err, "reading log file")
	}
	off := max(st.Size()-window, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return "", errors.Wrap(err, "reading log file")
	}
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if n >= 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, ""), nil
}
