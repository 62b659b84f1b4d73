package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pkg/errors"
)

// process is one command the management plane runs. Its output (stdout and stderr) is appended
// to its own log file; a restart appends to the same file after a marker line.
type process struct {
	name    string
	path    string
	args    []string
	env     []string
	logPath string
	// ready returns nil once the process serves what it is for (health endpoint, port).
	ready func(ctx context.Context) error
	// grace is how long stop waits after SIGTERM before SIGKILL.
	grace time.Duration

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run exited
	exitErr error         // the current run's exit status, valid once done is closed
	starts  int
}

// start runs the process; it does not wait for it to be ready.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return errors.Errorf("%s is already running (pid %d)", p.name, p.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return errors.Wrapf(err, "opening the log of %s", p.name)
	}
	defer logFile.Close() // the child holds its own descriptor
	p.starts++
	fmt.Fprintf(logFile, "==== %s: start #%d of %s %s\n", time.Now().Format(time.RFC3339Nano), p.starts, p.path, strings.Join(p.args, " "))

	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := spawn(cmd); err != nil {
		return errors.Wrapf(err, "starting %s", p.name)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// pid returns the PID of the current run, 0 when the process never started.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// state describes the process for people: running, or how it exited.
func (p *process) state() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.cmd == nil:
		return "not started"
	case !isClosed(p.done):
		return "running"
	case p.exitErr == nil:
		return "exited (status 0)"
	default:
		return "exited (" + p.exitErr.Error() + ")"
	}
}

func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// stop sends SIGTERM to the process it started (by PID), waits up to grace, then sends SIGKILL
// and waits for the exit. Stopping a process that is not running is not an error.
func (p *process) stop(ctx context.Context) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	grace := p.grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	case <-ctx.Done():
	}
	return p.kill()
}

// kill sends SIGKILL (a crash, as far as the process is concerned) and waits for the exit.
func (p *process) kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return nil
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return errors.Wrapf(err, "killing %s (pid %d)", p.name, cmd.Process.Pid)
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return errors.Errorf("%s (pid %d) did not exit 30s after SIGKILL", p.name, cmd.Process.Pid)
	}
}

// errPortTaken says a process exited because a port picked for it was taken.
var errPortTaken = errors.New("a port picked for the process was taken before it bound it")

// waitReady polls the readiness probe until it succeeds, the process exits or the timeout
// passes; errors carry the tail of the process's log.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return errors.Errorf("%s was not started", p.name)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for {
		probeCtx, cancelProbe := context.WithTimeout(ctx, 5*time.Second)
		lastErr = p.ready(probeCtx)
		cancelProbe()
		if lastErr == nil {
			return nil
		}
		select {
		case <-done:
			tail := tailFile(p.logPath, 40)
			err := errors.Errorf("%s %s before it was ready (last probe: %v); last lines of %s:\n%s",
				p.name, p.state(), lastErr, p.logPath, indent(tail))
			if strings.Contains(tail, "address already in use") {
				return errors.Wrap(errPortTaken, err.Error())
			}
			return err
		case <-ctx.Done():
			return errors.Errorf("%s not ready after %s (last probe: %v); last lines of %s:\n%s",
				p.name, time.Since(start).Round(time.Second), lastErr, p.logPath, indent(tailFile(p.logPath, 40)))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rss returns the resident memory of the running process in bytes, 0 when unknown.
func (p *process) rss() int64 {
	pid := p.pid()
	if pid == 0 || !p.running() {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The parent-death signal (sysProcAttr) fires when the *thread* that forked the child exits, not
// the process, and the Go runtime may retire idle threads. Every process is therefore forked by
// one goroutine locked to its thread for the life of the test binary: that thread ends only
// when the binary does.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked, see above
			for req := range spawnRequests {
				req.done <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawnRequests <- req
	return <-req.done
}

// tailFile returns the last lines of a file, or a note saying why it cannot.
func tailFile(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxBytes = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxBytes {
		_, _ = f.Seek(st.Size()-maxBytes, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	text := strings.TrimRight(string(data), "\n")
	parts := strings.Split(text, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
