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

// A container's output goes to a file written on containerd's side, so it is kept while no
// client runs: without a terminal the shim appends both streams to the file (a file:// log
// URI). containerd 1.6's shim cannot copy a terminal to a file, only to a logging binary; a
// container with a terminal logs through /bin/sh as that binary (a binary:// URI), which
// appends what the shim hands it on fd 3 to the file after closing fd 5, the shim's "ready"
// pipe. The shell lives as long as the task.

type fileIO struct{ cfg cio.Config }

func (f *fileIO) Config() cio.Config { return f.cfg }
func (f *fileIO) Cancel()            {}
func (f *fileIO) Wait()              {}
func (f *fileIO) Close() error       { return nil }

// logFileIO creates task IO that appends stdout and stderr to path.
func logFileIO(path string, terminal bool) cio.Creator {
	return func(string) (cio.IO, error) {
		u := (&url.URL{Scheme: "file", Path: path}).String()
		if terminal {
			script := "exec 5>&- 4>&-; exec cat <&3 >>'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
			u = (&url.URL{Scheme: "binary", Path: "/bin/sh", RawQuery: url.Values{"-c": {script}}.Encode()}).String()
		}
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
