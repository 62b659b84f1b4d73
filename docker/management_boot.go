package docker

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	_ "embed" // scripts/at-boot.sh, scripts/dockyard-management.service
	"path"
	"strings"
	"time"

	"github.com/pkg/errors"
)

// A management node loses its isolation rules and its own routes when it restarts (the engine
// restarted, say), and a manager settles it again only once it runs and notices. Meanwhile its
// kubelet started with whatever routes the engine left. So each settle leaves the scripts and
// their arguments in the node, and a systemd unit that kubelet.service wants runs them at every
// start, before kubelet.
const (
	// atBootDir holds the scripts and their arguments in a management node.
	atBootDir = "/etc/dockyard/management"
	// atBootUnit is the systemd unit that runs them.
	atBootUnit = "dockyard-management.service"
)

var (
	//go:embed scripts/at-boot.sh
	atBootScript string
	//go:embed scripts/dockyard-management.service
	atBootUnitFile string
)

// atBoot are the arguments a management node's scripts run with when it starts.
type atBoot struct{ isolate, ownRoutes []string }

// key identifies what writeAtBoot leaves in a node.
func (b atBoot) key() string {
	return strings.Join(b.isolate, " ") + " | " + strings.Join(b.ownRoutes, " ")
}

// bootWritten returns the key of what this manager last left in a node container for its next
// start; "" when it has not.
func (m *Manager) bootWritten(id string) string {
	m.settledMu.Lock()
	defer m.settledMu.Unlock()
	return m.settled[id].boot
}

// writeAtBoot leaves the settle scripts, their arguments and the unit that runs them in a
// management node, the unit wanted by kubelet.service and ordered before it. A node without
// systemd (or without kubelet) keeps the files unused.
func (m *Manager) writeAtBoot(ctx context.Context, node string, b atBoot) error {
	lines := func(args []string) string {
		if len(args) == 0 {
			return ""
		}
		return strings.Join(args, "\n") + "\n"
	}
	dir := strings.TrimPrefix(atBootDir, "/")
	files := []archiveEntry{
		{name: path.Dir(dir), dir: true},
		{name: dir, dir: true},
		{name: "etc/systemd/system/kubelet.service.wants", dir: true},
		{name: path.Join(dir, "isolate.sh"), content: isolateScript, mode: 0o755},
		{name: path.Join(dir, "own-routes.sh"), content: ownRoutesScript, mode: 0o755},
		{name: path.Join(dir, "at-boot.sh"), content: atBootScript, mode: 0o755},
		{name: path.Join(dir, "isolate.args"), content: lines(b.isolate), mode: 0o644},
		{name: path.Join(dir, "own-routes.args"), content: lines(b.ownRoutes), mode: 0o644},
		{name: "etc/systemd/system/" + atBootUnit, content: atBootUnitFile, mode: 0o644},
		{name: "etc/systemd/system/kubelet.service.wants/" + atBootUnit, link: "../" + atBootUnit},
	}
	return errors.Wrapf(m.writeArchive(ctx, node, "/", files), "leaving the management node's settle scripts in %s for its next start", node)
}

// archiveEntry is a file, a directory (dir; mode 0755 unless set) or a symbolic link (link)
// written into a container.
type archiveEntry struct {
	name, content, link string
	mode                int64
	dir                 bool
}

// writeArchive writes entries, named relative to dir, into a container through the engine's
// archive API. The directories they are in must exist or be entries before them.
func (m *Manager) writeArchive(ctx context.Context, name, dir string, entries []archiveEntry) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: e.mode, Size: int64(len(e.content)), ModTime: now}
		switch {
		case e.dir:
			h = &tar.Header{Name: e.name + "/", Typeflag: tar.TypeDir, Mode: cmp.Or(e.mode, 0o755), ModTime: now}
		case e.link != "":
			h = &tar.Header{Name: e.name, Typeflag: tar.TypeSymlink, Linkname: e.link, Mode: 0o777, ModTime: now}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.content)); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return m.runtime.CopyToContainer(ctx, name, dir, &buf)
}
