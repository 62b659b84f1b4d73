package docker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/logdir"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/runner"
)

// maxLogFile bounds each file a log collection writes: a node's whole journal after a long
// suite stays far below it, and a node flooding its journal cannot fill the disk.
const maxLogFile = 64 << 20

// consoleLines is how much of a container's console output a log collection keeps.
const consoleLines = 5000

// CollectLogs writes what a person needs to debug the node into dir: its journal and the
// journals of kubelet, containerd and the bootstrap unit, the bootstrap output and state, the
// node's containers, tasks and images in containerd's k8s.io namespace, the pods' log files
// (pods/), its console output and the engine's inspect data, every file redacted (logdir.Dir). A
// stopped node gets only what the engine knows (inspect data and console). Every file is
// attempted; the error joins those that failed. A node removed since it was listed is not an
// error: its directory holds the inspect data of the listing and removed.txt saying so.
func (n *Node) CollectLogs(ctx context.Context, dir *logdir.Dir) error {
	m := n.m
	errs := []error{dir.WriteJSON("inspect.json", n.c)}
	gone, err := m.writeConsole(ctx, n.Name, dir, "console.log")
	errs = append(errs, err)
	if n.Running && !gone {
		p := m.bootstrap
		for _, l := range nodecmd.NodeLogs(p.Unit, p.Path(runner.OutputFile), p.Path(runner.StateFile)) {
			errs = append(errs, m.execToFile(ctx, n.Name, dir, l.File, l.Cmd))
		}
		errs = append(errs, m.copyOut(ctx, n.Name, "/var/log/pods", dir))
	}
	return errors.Wrapf(kerrors.NewAggregate(errs), "collecting the logs of node %s", n.Name)
}

// collectLoadBalancerLogs writes a haproxy container's configuration, console output (haproxy's
// log) and the engine's inspect data into dir, redacted (logdir.Dir); one removed since it was
// listed gets its inspect data and removed.txt, and no error.
func (m *Manager) collectLoadBalancerLogs(ctx context.Context, c *container.Container, dir *logdir.Dir) error {
	errs := []error{dir.WriteJSON("inspect.json", c)}
	gone, err := m.writeConsole(ctx, c.Name, dir, "console.log")
	errs = append(errs, err)
	if c.Running && !gone {
		errs = append(errs, m.execToFile(ctx, c.Name, dir, "haproxy.cfg", nodecmd.Cat(LoadBalancerConfigPath)))
	}
	return kerrors.NewAggregate(errs)
}

// removedNote is what a log collection writes for a container the engine removed after it was
// listed (a Service load balancer replaced, a node of a scale-down).
const removedNote = "removed.txt"

// writeConsole writes the container's console output to file in dir. A container that is gone
// (removed after it was listed) is not an error: gone is true and removedNote says so.
func (m *Manager) writeConsole(ctx context.Context, name string, dir *logdir.Dir, file string) (gone bool, err error) {
	out, err := m.runtime.ContainerLogs(ctx, name, consoleLines)
	if container.IsNotFound(err) {
		return true, dir.WriteFile(removedNote, []byte(fmt.Sprintf("%s was removed after it was listed; inspect.json is what the engine said of it then.\n", name)))
	}
	if err != nil {
		return false, errors.Wrapf(err, "reading the console of %s", name)
	}
	return false, dir.WriteFile(file, []byte(out))
}

// execToFile runs a command in a container and writes its standard output to file in dir, at
// most maxLogFile bytes of it; a command that fails leaves its output and a last line saying so.
func (m *Manager) execToFile(ctx context.Context, name string, dir *logdir.Dir, file string, cmd []string) error {
	var out bytes.Buffer
	limited := &limitWriter{w: &out, left: maxLogFile}
	r, err := m.run(ctx, name, command{argv: cmd, stdout: limited})
	if err != nil {
		return err
	}
	if limited.dropped {
		fmt.Fprintf(&out, "\n[dockyard: output cut at %d bytes]\n", maxLogFile)
	}
	if r.Code != 0 {
		fmt.Fprintf(&out, "\n[dockyard: %s exited %d: %s]\n", cmd[0], r.Code, lastLines(strings.TrimSpace(r.Output), 5))
	}
	return dir.WriteFile(file, out.Bytes())
}

// copyOut copies a directory of a running container into dir on the host (under the
// directory's base name), through tar in the container; at most maxLogFile bytes of it.
func (m *Manager) copyOut(ctx context.Context, name, from string, dir *logdir.Dir) error {
	var archive bytes.Buffer
	limited := &limitWriter{w: &archive, left: maxLogFile}
	// A directory that does not exist (a node that never ran a pod) copies nothing.
	if _, err := m.output(ctx, name, command{argv: nodecmd.TarDir(from), stdout: limited, what: "copying " + from + " out"}); err != nil {
		return errors.Wrapf(err, "copying %s out of %s", from, name)
	}
	return untar(&archive, dir, path.Base(from))
}

// untar writes the regular files of a tar stream whose paths start with prefix into dir, each
// redacted; gzip-compressed files (kubelet compresses rotated container logs) are written
// decompressed, without their ".gz". Paths with "." or ".." elements are skipped. A stream
// cut short (at maxLogFile) keeps what came before the cut.
func untar(r io.Reader, dir *logdir.Dir, prefix string) error {
	dirs := map[string]*logdir.Dir{}
	defer func() {
		for _, d := range dirs {
			d.Close()
		}
	}()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err != nil {
			// io.EOF, or a stream cut at maxLogFile: keep what came before.
			return nil //nolint:nilerr // a truncated archive is expected, see above
		}
		elems := strings.Split(strings.Trim(h.Name, "/"), "/")
		if h.Typeflag != tar.TypeReg || len(elems) < 2 || elems[0] != prefix || slices.ContainsFunc(elems, func(e string) bool {
			return e == "" || e == "." || e == ".."
		}) {
			continue
		}
		content, readErr := io.ReadAll(tr)
		file := elems[len(elems)-1]
		if strings.HasSuffix(file, ".gz") && readErr == nil {
			content, readErr = gunzip(content)
			file = strings.TrimSuffix(file, ".gz")
		}
		if readErr != nil {
			content = fmt.Appendf(content, "\n[dockyard: cut short: %v]\n", readErr)
		}
		parent, err := subDir(dir, dirs, elems[:len(elems)-1])
		if err != nil {
			return err
		}
		if err := parent.WriteFile(file, content); err != nil {
			return err
		}
		if readErr != nil {
			return nil
		}
	}
}

// subDir is the directory at the path elems under dir, created; dirs holds those opened.
func subDir(dir *logdir.Dir, dirs map[string]*logdir.Dir, elems []string) (*logdir.Dir, error) {
	key := strings.Join(elems, "/")
	if d, ok := dirs[key]; ok {
		return d, nil
	}
	parent := dir
	if len(elems) > 1 {
		var err error
		if parent, err = subDir(dir, dirs, elems[:len(elems)-1]); err != nil {
			return nil, err
		}
	}
	d, err := parent.Dir(elems[len(elems)-1])
	if err != nil {
		return nil, err
	}
	dirs[key] = d
	return d, nil
}

// gunzip decompresses data, at most maxLogFile bytes of it.
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, maxLogFile))
}

// limitWriter passes on at most left bytes and drops the rest, reporting all as written so the
// command producing them runs to its end.
type limitWriter struct {
	w       io.Writer
	left    int
	dropped bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > l.left {
		p = p[:l.left]
		l.dropped = true
	}
	l.left -= len(p)
	if len(p) > 0 {
		if _, err := l.w.Write(p); err != nil {
			return 0, err
		}
	}
	return n, nil
}
