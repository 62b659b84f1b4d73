package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
)

// RootfsSpec describes a Debian root filesystem made with `debootstrap --variant=minbase`.
type RootfsSpec struct {
	// Name identifies the root filesystem in the cache and in logs ("node", "haproxy").
	Name string
	// Packages are installed on top of minbase (debootstrap --include, with dependencies and
	// without recommended packages).
	Packages []string
	// Files are written to /.dockyard/in/<name> before Script runs.
	Files map[string][]byte
	// Script is run with /bin/sh in the chroot after debootstrap. It may leave files in
	// /.dockyard for the build (see Rootfs.Outputs). images/rootfs/clean.sh runs after it.
	Script []byte
}

// Rootfs is a root filesystem built from a RootfsSpec, stored as one image layer.
type Rootfs struct {
	Layer *fileLayer
	// Key is the hash of the spec (and of how it is built).
	Key string
	// Packages maps every installed package to its version.
	Packages map[string]string
	// Outputs holds the files the scripts left in /.dockyard, by name (subdirectories
	// flattened), e.g. "containerd-default.toml".
	Outputs map[string][]byte
}

// rootfsInputs keys a root filesystem: what debootstrap is asked for and the scripts, not
// the rest of the build, so that changing how images are assembled does not re-run debootstrap.
func (b *Builder) rootfsInputs(spec RootfsSpec) (*Inputs, error) {
	in := &Inputs{}
	in.Set("recipe", recipeVersion)
	in.Set("suite", b.suite())
	in.Set("mirror", b.mirror())
	if err := in.SetJSON("spec", spec); err != nil {
		return nil, err
	}
	in.SetBytes("clean", mustEmbedded("rootfs/clean.sh"))
	src, err := sources.ReadFile("rootfs.go")
	if err != nil {
		return nil, err
	}
	in.SetBytes("rootfs.go", src)
	return in, nil
}

// Rootfs returns the root filesystem of spec, from the cache or freshly built.
func (b *Builder) Rootfs(ctx context.Context, spec RootfsSpec) (*Rootfs, error) {
	in, err := b.rootfsInputs(spec)
	if err != nil {
		return nil, err
	}
	key := in.Hash()
	id := spec.Name + "-" + short(key)
	dir := filepath.Join(b.CacheDir, "rootfs", id)

	unlock, err := b.lock(ctx, "rootfs-"+id)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if r, err := loadRootfs(dir, key); err == nil {
		return r, nil
	}
	start := time.Now()
	b.logf("[rootfs %s] debootstrap %s with %d packages", spec.Name, b.suite(), len(spec.Packages))
	if err := b.buildRootfs(ctx, spec, dir, id); err != nil {
		return nil, errors.Wrapf(err, "root filesystem %s", spec.Name)
	}
	r, err := loadRootfs(dir, key)
	if err != nil {
		return nil, err
	}
	size, _ := r.Layer.Size()
	b.logf("[rootfs %s] done in %s (%d packages, layer %d MiB)", spec.Name, time.Since(start).Round(time.Second), len(r.Packages), size>>20)
	return r, nil
}

func loadRootfs(dir, key string) (*Rootfs, error) {
	if _, err := os.Stat(filepath.Join(dir, "done")); err != nil {
		return nil, err
	}
	layer, ok := openLayer(filepath.Join(dir, "layer.tar.gz"))
	if !ok {
		return nil, errors.Errorf("%s: layer missing", dir)
	}
	r := &Rootfs{Layer: layer, Key: key, Packages: map[string]string{}, Outputs: map[string][]byte{}}
	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		content, err := os.ReadFile(filepath.Join(dir, "out", e.Name()))
		if err != nil {
			return nil, err
		}
		r.Outputs[e.Name()] = content
	}
	r.Packages = parsePackages(string(r.Outputs["packages"]))
	return r, nil
}

// parsePackages parses `dpkg-query -W -f '${Package}\t${Version}\n'`.
func parsePackages(s string) map[string]string {
	pkgs := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if name, version, ok := strings.Cut(sc.Text(), "\t"); ok {
			pkgs[name] = version
		}
	}
	return pkgs
}

func (b *Builder) buildRootfs(ctx context.Context, spec RootfsSpec, dir, id string) error {
	if err := ensureDebootstrap(ctx, b); err != nil {
		return err
	}
	work := filepath.Join(b.CacheDir, "tmp", "rootfs-"+id)
	if err := removeTree(work); err != nil {
		return err
	}
	defer func() { _ = removeTree(work) }()
	root := filepath.Join(work, "root")
	if err := b.debootstrap(ctx, spec, work, root); err != nil {
		return err
	}
	if err := setupRootfs(ctx, spec, work, root); err != nil {
		return err
	}
	return packRootfs(ctx, root, dir)
}

// debootstrap installs the suite's minimal base and the spec's packages in root, logging to
// work.
func (b *Builder) debootstrap(ctx context.Context, spec RootfsSpec, work, root string) error {
	// One package cache per root filesystem: debootstrap runs for different root filesystems
	// run in parallel and must not download into the same directory.
	debs := filepath.Join(b.CacheDir, "debs", b.suite()+"-"+spec.Name)
	for _, d := range []string{root, debs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	logFile := filepath.Join(work, "debootstrap.log")
	args := []string{"--variant=minbase", "--components=main", "--cache-dir=" + debs}
	if len(spec.Packages) > 0 {
		args = append(args, "--include="+strings.Join(spec.Packages, ","))
	}
	args = append(args, b.suite(), root, b.mirror())
	if err := runLogged(ctx, logFile, nil, "debootstrap", args...); err != nil {
		return errors.Errorf("debootstrap: %v\n%s", err, tailFile(logFile, 30)+tailFile(filepath.Join(root, "debootstrap", "debootstrap.log"), 20))
	}
	return nil
}

// setupRootfs puts the spec's files in root's /.dockyard/in and runs its script, then the
// cleaning script, chrooted in root.
func setupRootfs(ctx context.Context, spec RootfsSpec, work, root string) error {
	in := filepath.Join(root, ".dockyard", "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		return err
	}
	for name, content := range spec.Files {
		if err := os.WriteFile(filepath.Join(in, name), content, 0o644); err != nil {
			return err
		}
	}
	for _, script := range [][]byte{spec.Script, mustEmbedded("rootfs/clean.sh")} {
		if len(script) == 0 {
			continue
		}
		if err := runLogged(ctx, filepath.Join(work, "setup.log"), bytes.NewReader(script), "chroot", root, "/bin/sh", "-s"); err != nil {
			return errors.Errorf("setup script: %v\n%s", err, tailFile(filepath.Join(work, "setup.log"), 30))
		}
	}
	return nil
}

// packRootfs moves the scripts' outputs out of root and writes root as the layer, both into
// dir, which it replaces whole once they are complete.
func packRootfs(ctx context.Context, root, dir string) error {
	// Collect the scripts' outputs next to the layer, then leave them out of it.
	tmpDir := dir + ".tmp"
	if err := os.RemoveAll(tmpDir); err != nil {
		return err
	}
	out := filepath.Join(tmpDir, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := collectOutputs(filepath.Join(root, ".dockyard"), out); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(root, ".dockyard")); err != nil {
		return err
	}

	_, err := writeLayer(filepath.Join(tmpDir, "layer.tar.gz"), func(w io.Writer) error {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "tar", "--numeric-owner", "--sort=name",
			"--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./debootstrap",
			"-C", root, "-cf", "-", ".")
		cmd.Stdout, cmd.Stderr = w, &stderr
		if err := cmd.Run(); err != nil {
			return errors.Errorf("tar: %v: %s", err, stderr.String())
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmpDir, "done"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmpDir, dir)
}

// collectOutputs copies the regular files under src (except in/) into dst, flattened.
func collectOutputs(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "in" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, d.Name()), content, 0o644)
	})
}

// ensureDebootstrap installs Debian's debootstrap package when the host lacks it. Parallel
// root filesystem builds wait for one installation, and a lock held by another apt process on
// the host is waited for (up to 10 minutes) rather than failed on.
func ensureDebootstrap(ctx context.Context, b *Builder) error {
	b.aptMu.Lock()
	defer b.aptMu.Unlock()
	if _, err := exec.LookPath("debootstrap"); err == nil {
		return nil
	}
	b.logf("installing debootstrap from Debian's archive")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "debootstrap"}} {
		if err := aptGet(ctx, b, args...); err != nil {
			return err
		}
	}
	return nil
}

// aptGet runs apt-get, retrying while another process holds one of apt's locks (apt-get
// update fails at once on its lists lock, whatever DPkg::Lock::Timeout says).
func aptGet(ctx context.Context, b *Builder, args ...string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		if !strings.Contains(string(out), "Could not get lock") || time.Now().After(deadline) {
			return errors.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		b.logf("apt-get %s: another process holds apt's lock; retrying", args[0])
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// runLogged runs a command with its output appended to logFile.
func runLogged(ctx context.Context, logFile string, stdin io.Reader, name string, args ...string) error {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"DEBIAN_FRONTEND=noninteractive", "LC_ALL=C", "HOME=/root",
	}
	for _, proxy := range []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"} {
		if v, ok := os.LookupEnv(proxy); ok {
			cmd.Env = append(cmd.Env, proxy+"="+v)
		}
	}
	// debootstrap mounts /proc and /sys in the target; on cancellation give it a chance to
	// clean up instead of killing it outright.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd.Run()
}

func tailFile(file string, lines int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n") + "\n"
}

// removeTree deletes a build directory, first unmounting whatever an interrupted debootstrap
// or chroot left mounted inside it (deleting through a mounted /proc or /sys must never happen).
func removeTree(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	var inside []string
	for _, line := range strings.Split(string(mounts), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		target := unescapeMount(fields[1])
		if target == abs || strings.HasPrefix(target, abs+"/") {
			inside = append(inside, target)
		}
	}
	// Deepest first.
	sort.Slice(inside, func(i, j int) bool { return len(inside[i]) > len(inside[j]) })
	for _, m := range inside {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			return errors.Wrapf(err, "unmounting %s", m)
		}
	}
	return os.RemoveAll(abs)
}

// unescapeMount decodes the octal escapes (\040 for a space) of /proc/self/mounts.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}
