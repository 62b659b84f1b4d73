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

// execError is a command in a container that exited non-zero.
type execError struct {
	Container string
	// What the command was for, e.g. "checking the haproxy configuration".
	What     string
	ExitCode int
	// Output is the end of its combined output.
	Output string
}

func (e *execError) Error() string {
	return fmt.Sprintf("%s in %s: exit code %d: %s", e.What, e.Container, e.ExitCode, lastLines(e.Output, 10))
}

// err is an *execError when the command exited non-zero, nil otherwise.
func (r execResult) err(name, what string) error {
	if r.Code == 0 {
		return nil
	}
	return &execError{Container: name, What: what, ExitCode: r.Code, Output: r.Output}
}

// command is one command run in a container: its argv (pkg/nodeimage/nodecmd builds them),
// what it is for (in errors), the stream fed to it, and where its standard output goes when it
// is a stream itself.
type command struct {
	argv  []string
	what  string
	stdin io.Reader
	// stdout, when set, gets the command's standard output, unbounded; execResult.Stdout is
	// then empty.
	stdout io.Writer
}

// run is the one place Dockyard runs a command in a container, and the one owner of its
// deadline: commandTimeout, or streamTimeout when a stream goes in or out. It keeps the tails
// of the command's standard output and of its combined output. The error is the engine's (the
// container is gone, the call timed out); a non-zero exit code is not one: see
// execResult.err.
func (m *Manager) run(ctx context.Context, name string, c command) (execResult, error) {
	timeout := commandTimeout
	if c.stdin != nil || c.stdout != nil {
		timeout = streamTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	combined := &tailBuffer{max: maxExecOutput}
	var kept *tailBuffer
	stdout := c.stdout
	if stdout == nil {
		kept = &tailBuffer{max: maxExecOutput}
		stdout = io.MultiWriter(kept, combined)
	}
	code, err := m.runtime.Exec(ctx, name, container.ExecOptions{Cmd: c.argv, Stdin: c.stdin, Stdout: stdout, Stderr: combined})
	if err != nil {
		return execResult{}, errors.Wrapf(err, "running %s in %s", c.argv[0], name)
	}
	r := execResult{Code: code, Output: combined.String()}
	if kept != nil {
		r.Stdout = kept.String()
	}
	return r, nil
}

// output runs a command and returns its standard output, trimmed; one that exits non-zero is an
// *execError with the end of its output.
func (m *Manager) output(ctx context.Context, name string, c command) (string, error) {
	r, err := m.run(ctx, name, c)
	if err != nil {
		return "", err
	}
	what := c.what
	if what == "" {
		what = strings.Join(shortArgs(c.argv), " ")
	}
	return strings.TrimSpace(r.Stdout), r.err(name, what)
}

// Run runs a command in the node, feeding it stdin when given, and returns its standard
// output; one that exits non-zero is an error holding its exit code and the end of its output.
// Its deadline is the node layer's: a minute, ten with stdin. For tools that work inside a node,
// such as the image builder and the management cluster; what reconcilers do in nodes has verbs
// of its own.
func (n *Node) Run(ctx context.Context, stdin io.Reader, cmd ...string) (string, error) {
	return n.m.output(ctx, n.Name, command{argv: cmd, stdin: stdin})
}

// RunTo runs a command in the node and streams its standard output to w (an archive, say),
// within the node layer's deadline for streams (ten minutes).
func (n *Node) RunTo(ctx context.Context, w io.Writer, cmd ...string) error {
	_, err := n.m.output(ctx, n.Name, command{argv: cmd, stdout: w})
	return err
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
