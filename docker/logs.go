package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pkg/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/dockyard-dev/dockyard/docker/internal/runner"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// maxLogFile bounds each file a log collection writes: a node's whole journal after a long
// suite stays far below it, and a node flooding its journal cannot fill the disk.
const maxLogFile = 64 << 20

// consoleLines is how much of a container's console output a log collection keeps.
const consoleLines = 5000

// nodeLog is a file CollectLogs writes for a node, the output of a command in it. Output that
// may carry bootstrap secrets (kubeadm prints join tokens) is redacted.
type nodeLog struct {
	file   string
	redact bool
	cmd    []string
}

// nodeLogs are the files CollectLogs writes for a node whose bootstrap runner follows p.
func nodeLogs(p runner.Protocol) []nodeLog {
	return []nodeLog{
		{"journal.log", true, []string{"journalctl", "--no-pager", "--output=short-precise"}},
		{"kubelet.log", false, []string{"journalctl", "--no-pager", "--output=short-precise", "--unit=kubelet.service"}},
		{"containerd.log", false, []string{"journalctl", "--no-pager", "--output=short-precise", "--unit=containerd.service"}},
		{"bootstrap-unit.log", true, []string{"journalctl", "--no-pager", "--output=short-precise", "--unit=" + p.Unit + ".service"}},
		{"bootstrap-output.log", true, []string{"cat", p.Path(runner.OutputFile)}},
		{"bootstrap-state", false, []string{"cat", p.Path(runner.StateFile)}},
		{"kubelet-version.txt", false, []string{"kubelet", "--version"}},
		{"containers.txt", false, []string{"sh", "-c", "ctr --namespace k8s.io containers list; echo; ctr --namespace k8s.io tasks list"}},
		{"images.txt", false, []string{"ctr", "--namespace", "k8s.io", "images", "list"}},
		{"processes.txt", false, []string{"ps", "-eo", "pid,ppid,rss,etime,args"}},
	}
}

// CollectLogs writes what a person needs to debug the node into dir (created): its journal and
// the journals of kubelet, containerd and the bootstrap unit, the bootstrap output and state,
// the node's containers, tasks and images in containerd's k8s.io namespace, the pods' log files
// (pods/), its console output and the engine's inspect data. Bootstrap secrets are redacted.
// A stopped node gets only what the engine knows (inspect data and console). Every file is
// attempted; the error joins those that failed.
func (n *Node) CollectLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "collecting the logs of node %s", n.Name)
	}
	errs := []error{
		writeJSON(filepath.Join(dir, "inspect.json"), n.c),
		n.m.writeConsole(ctx, n.Name, filepath.Join(dir, "console.log")),
	}
	if !n.Running() {
		return kerrors.NewAggregate(errs)
	}
	for _, l := range nodeLogs(n.m.bootstrap) {
		errs = append(errs, n.m.execToFile(ctx, n.Name, filepath.Join(dir, l.file), l.redact, l.cmd...))
	}
	errs = append(errs, n.m.copyOut(ctx, n.Name, "/var/log/pods", filepath.Join(dir, "pods")))
	return kerrors.NewAggregate(errs)
}

// CollectLogs writes the load balancer's haproxy configuration, console output (haproxy's log)
// and the engine's inspect data into dir (created).
func (lb *LoadBalancer) CollectLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return errors.Wrapf(err, "collecting the logs of load balancer %s", lb.Name)
	}
	errs := []error{
		writeJSON(filepath.Join(dir, "inspect.json"), lb.c),
		lb.m.writeConsole(ctx, lb.Name, filepath.Join(dir, "console.log")),
	}
	if lb.Running() {
		errs = append(errs, lb.m.execToFile(ctx, lb.Name, filepath.Join(dir, "haproxy.cfg"), false, "cat", LoadBalancerConfigPath))
	}
	return kerrors.NewAggregate(errs)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return errors.Wrapf(err, "encoding %s", filepath.Base(path))
	}
	return errors.Wrapf(os.WriteFile(path, append(data, '\n'), 0o644), "writing %s", path)
}

func (m *Manager) writeConsole(ctx context.Context, name, path string) error {
	out, err := m.runtime.ContainerLogs(ctx, name, consoleLines)
	if err != nil {
		return errors.Wrapf(err, "reading the console of %s", name)
	}
	return errors.Wrapf(os.WriteFile(path, []byte(out), 0o644), "writing %s", path)
}

// execToFile runs a command in a container and writes its standard output to path, at most
// maxLogFile bytes of it; a command that fails leaves its output and a last line saying so.
func (m *Manager) execToFile(ctx context.Context, name, path string, redact bool, cmd ...string) error {
	var out bytes.Buffer
	limited := &limitWriter{w: &out, left: maxLogFile}
	r, err := m.run(ctx, name, nil, limited, cmd...)
	if err != nil {
		return err
	}
	text := out.String()
	if redact {
		text = bootstrap.Redact(text)
	}
	if limited.dropped {
		text += fmt.Sprintf("\n[dockyard: output cut at %d bytes]\n", maxLogFile)
	}
	if r.Code != 0 {
		text += fmt.Sprintf("\n[dockyard: %s exited %d: %s]\n", cmd[0], r.Code, lastLines(strings.TrimSpace(r.Output), 5))
	}
	return errors.Wrapf(os.WriteFile(path, []byte(text), 0o644), "writing %s", path)
}

// copyOut copies a directory of a running container into dir on the host, through tar in the
// container; at most maxLogFile bytes of it.
func (m *Manager) copyOut(ctx context.Context, name, from, dir string) error {
	var archive bytes.Buffer
	limited := &limitWriter{w: &archive, left: maxLogFile}
	// A directory that does not exist (a node that never ran a pod) copies nothing.
	script := `[ -d "$1" ] || exit 0; cd "$(dirname "$1")" && tar -c "$(basename "$1")"`
	r, err := m.run(ctx, name, nil, limited, "sh", "-c", script, "sh", from)
	if err != nil {
		return errors.Wrapf(err, "copying %s out of %s", from, name)
	}
	if err := r.err(name, "copying "+from+" out"); err != nil {
		return err
	}
	return untar(&archive, dir, filepath.Base(from))
}

// untar writes the regular files of a tar stream under dir, the leading prefix directory
// stripped; paths that would leave dir are skipped.
func untar(r io.Reader, dir, prefix string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// A stream cut at maxLogFile ends mid-file: keep what came before.
			return nil //nolint:nilerr // a truncated archive is expected, see above
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(filepath.Clean(h.Name), prefix), "/")
		if h.Typeflag != tar.TypeReg || rel == "" || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
			continue
		}
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return errors.Wrapf(err, "creating %s", filepath.Dir(path))
		}
		f, err := os.Create(path)
		if err != nil {
			return errors.Wrapf(err, "creating %s", path)
		}
		_, err = io.Copy(f, tr) //nolint:gosec // bounded by maxLogFile for the whole stream
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return errors.Wrapf(err, "writing %s", path)
		}
	}
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
