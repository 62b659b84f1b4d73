package docker

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// maxExecOutput is how much of a command's output Dockyard keeps: its last 64 KiB, more than
// any condition shows, so a node flooding its output cannot exhaust the manager's memory.
const maxExecOutput = 64 << 10

// Deadlines of commands in containers: checks and state reads answer in a second, so a node
// that does not answer within commandTimeout holds one reconcile that long, not forever;
// commands fed a stream (an image, a bootstrap plan) get streamTimeout.
const (
	commandTimeout = time.Minute
	streamTimeout  = 10 * time.Minute
)

// execResult is what a command run in a container left: its exit code and the tails of its
// standard output and of its combined output.
type execResult struct {
	Code   int
	Stdout string
	Output string
}

// ExecError is a command in a container that exited non-zero.
type ExecError struct {
	Container string
	// What the command was for, e.g. "checking the haproxy configuration".
	What     string
	ExitCode int
	// Output is the end of its combined output.
	Output string
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("%s in %s: exit code %d: %s", e.What, e.Container, e.ExitCode, lastLines(e.Output, 10))
}

// err is an *ExecError when the command exited non-zero, nil otherwise.
func (r execResult) err(name, what string) error {
	if r.Code == 0 {
		return nil
	}
	return &ExecError{Container: name, What: what, ExitCode: r.Code, Output: r.Output}
}

// exec runs a command in a container, feeding it stdin when given, within its deadline, and
// keeps the tails of its output. The error is the engine's (the container is gone, the call
// timed out); a non-zero exit code is not one: see execResult.err.
func (m *Manager) exec(ctx context.Context, name string, stdin io.Reader, cmd ...string) (execResult, error) {
	timeout := commandTimeout
	if stdin != nil {
		timeout = streamTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, combined := &tailBuffer{max: maxExecOutput}, &tailBuffer{max: maxExecOutput}
	code, err := m.runtime.Exec(ctx, name, container.ExecOptions{
		Cmd: cmd, Stdin: stdin, Stdout: io.MultiWriter(stdout, combined), Stderr: combined,
	})
	if err != nil {
		return execResult{}, errors.Wrapf(err, "running %s in %s", cmd[0], name)
	}
	return execResult{Code: code, Stdout: stdout.String(), Output: combined.String()}, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		t.dropped = true
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) String() string {
	if t.dropped {
		return "[...] " + string(t.buf)
	}
	return string(t.buf)
}

// lastLines returns the last n non-empty lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
