package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// Exec runs a command in a running container as a task exec process with the container's
// process spec (capabilities, environment) and the command's own arguments, environment and
// user. Stdin is streamed and closed at EOF; the output is copied to the writers. When ctx
// ends first the process is killed and ctx's error returned.
func (r *Runtime) Exec(ctx context.Context, name string, opts container.ExecOptions) (int, error) {
	ctx = ns(ctx)
	c, err := r.client.LoadContainer(ctx, name)
	if err != nil {
		return -1, wrap(err, "exec in container %s", name)
	}
	task, err := runningTask(ctx, c)
	if err != nil {
		return -1, errors.Wrapf(err, "exec in container %s", name)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, wrap(err, "exec in container %s", name)
	}
	pspec := *spec.Process
	pspec.Terminal = false
	pspec.Args = opts.Cmd
	pspec.Env = mergeEnv(pspec.Env, opts.Env)
	if opts.User != "" {
		if err := setUser(&pspec.User.UID, &pspec.User.GID, opts.User); err != nil {
			return -1, errors.Wrapf(err, "exec in container %s", name)
		}
		pspec.User.AdditionalGids = nil
	}
	id := execID()
	// cio copies the two streams in two goroutines; callers may pass one writer for both.
	stdout, stderr := container.ExecStreams(opts)
	procC := make(chan client.Process, 1)
	var stdin io.Reader
	if opts.Stdin != nil {
		stdin = &closingReader{r: opts.Stdin, ctx: ctx, proc: procC}
	}
	creator := cio.NewCreator(cio.WithStreams(stdin, stdout, stderr), cio.WithFIFODir(filepath.Join(r.opts.RunDir, "fifo")))
	proc, err := task.Exec(ctx, id, &pspec, creator)
	if err != nil {
		return -1, wrap(err, "exec in container %s", name)
	}
	procC <- proc
	return waitExec(ctx, name, proc)
}

func waitExec(ctx context.Context, name string, proc client.Process) (int, error) {
	cleanup := context.WithoutCancel(ctx)
	defer func() { _, _ = proc.Delete(cleanup, client.WithProcessKill) }()
	statusC, err := proc.Wait(ctx)
	if err != nil {
		return -1, wrap(err, "exec in container %s", name)
	}
	if err := proc.Start(ctx); err != nil {
		return -1, wrap(err, "exec in container %s", name)
	}
	select {
	case st := <-statusC:
		code, _, err := st.Result()
		if err != nil {
			return -1, wrap(err, "exec in container %s", name)
		}
		if io := proc.IO(); io != nil {
			io.Wait()
		}
		return int(code), nil
	case <-ctx.Done():
		_ = proc.Kill(cleanup, syscall.SIGKILL)
		if io := proc.IO(); io != nil {
			io.Cancel()
		}
		return -1, errors.Wrapf(ctx.Err(), "exec in container %s", name)
	}
}

// closingReader closes the process's stdin when the caller's reader is exhausted, so the
// command sees EOF (closing the FIFO alone does not: the shim holds it open).
type closingReader struct {
	r    io.Reader
	ctx  context.Context
	proc chan client.Process
	done bool
}

func (c *closingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && !c.done {
		c.done = true
		go func() {
			select {
			case proc := <-c.proc:
				_ = proc.CloseIO(c.ctx, client.WithStdinCloser)
				c.proc <- proc
			case <-c.ctx.Done():
			}
		}()
	}
	return n, err
}

// mergeEnv returns base with the variables of extra replacing those of the same name (a
// process would see only the first of two).
func mergeEnv(base, extra []string) []string {
	out := append([]string{}, base...)
	for _, kv := range extra {
		key, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, have := range out {
			if k, _, _ := strings.Cut(have, "="); k == key {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

func execID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "exec-" + hex.EncodeToString(b)
}

// setUser accepts numeric "uid" or "uid:gid" and "root"; names other than root would need the
// container's /etc/passwd, which Dockyard never asks for.
func setUser(uid, gid *uint32, user string) error {
	u, g, hasGroup := strings.Cut(user, ":")
	if u == "root" {
		u = "0"
	}
	if g == "root" {
		g = "0"
	}
	n, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return errors.Errorf("user %q: only numeric users and root are supported", user)
	}
	*uid, *gid = uint32(n), uint32(n)
	if n == 0 {
		*gid = 0
	}
	if hasGroup {
		m, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return errors.Errorf("user %q: only numeric groups and root are supported", user)
		}
		*gid = uint32(m)
	}
	return nil
}
