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

// exec runs a command in a container, feeding it stdin when given, and keeps the tails of its
// output. The error is the engine's (the container is gone, the call timed out); a non-zero
// exit code is not one: see execResult.err.
func (m *Manager) exec(ctx context.Context, name string, stdin io.Reader, cmd ...string) (execResult, error) {
	return m.run(ctx, name, stdin, nil, cmd...)
}

// run is the one place Dockyard runs a command in a container, and the one owner of its
// deadline: commandTimeout, or streamTimeout when a stream goes in (stdin) or out (stdout
// given: the command's standard output is written there, unbounded, and execResult.Stdout is
// empty). The combined output's tail is kept in any case.
func (m *Manager) run(ctx context.Context, name string, stdin io.Reader, stdout io.Writer, cmd ...string) (execResult, error) {
	timeout := commandTimeout
	if stdin != nil || stdout != nil {
		timeout = streamTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	combined := &tailBuffer{max: maxExecOutput}
	var kept *tailBuffer
	if stdout == nil {
		kept = &tailBuffer{max: maxExecOutput}
		stdout = io.MultiWriter(kept, combined)
	}
	code, err := m.runtime.Exec(ctx, name, container.ExecOptions{Cmd: cmd, Stdin: stdin, Stdout: stdout, Stderr: combined})
	if err != nil {
		return execResult{}, errors.Wrapf(err, "running %s in %s", cmd[0], name)
	}
	r := execResult{Code: code, Output: combined.String()}
	if kept != nil {
		r.Stdout = kept.String()
	}
	return r, nil
}

// Run runs a command in the node, feeding it stdin when given, and returns its standard
// output; one that exits non-zero is an *ExecError with the end of its output. Its deadline is
// the node layer's: a minute, ten with stdin. For tools that work inside a node, such as the
// image builder; what reconcilers do in nodes has methods of its own.
func (n *Node) Run(ctx context.Context, stdin io.Reader, cmd ...string) (string, error) {
	r, err := n.m.exec(ctx, n.Name, stdin, cmd...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(r.Stdout), r.err(n.Name, strings.Join(shortArgs(cmd), " "))
}

// RunTo runs a command in the node and streams its standard output to w (an archive, say),
// within the node layer's deadline for streams (ten minutes).
func (n *Node) RunTo(ctx context.Context, w io.Writer, cmd ...string) error {
	r, err := n.m.run(ctx, n.Name, nil, w, cmd...)
	if err != nil {
		return err
	}
	return r.err(n.Name, strings.Join(shortArgs(cmd), " "))
}

// shortArgs keeps error messages readable: the first arguments of a long command line.
func shortArgs(args []string) []string {
	if len(args) > 8 {
		return append(args[:8:8], "...")
	}
	return args
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
