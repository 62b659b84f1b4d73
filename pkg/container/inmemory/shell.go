package inmemory

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dockyard-dev/dockyard/pkg/container"
)

// shell runs the few commands the runtime conformance suite uses, as a container's shell would:
// cat (stdin, or a file of the container's tree), printenv, hostname, sleep, and `sh -c` with
// echo (to stdout or, with >&2, stderr) and exit statements separated by "; ". ok is false for
// any other command, which the fake lets succeed silently.
func shell(ctx context.Context, c *Container, opts container.ExecOptions) (code int, ok bool, err error) {
	stdout, stderr := writerOr(opts.Stdout), writerOr(opts.Stderr)
	cmd := opts.Cmd
	if len(cmd) == 0 {
		return 0, false, nil
	}
	switch {
	case cmd[0] == "cat" && len(cmd) == 1:
		if opts.Stdin != nil {
			_, err = io.Copy(stdout, opts.Stdin)
		}
		return 0, true, err
	case cmd[0] == "cat" && len(cmd) == 2:
		content, found := c.Files[cmd[1]]
		if !found {
			fmt.Fprintf(stderr, "cat: %s: No such file or directory\n", cmd[1])
			return 1, true, nil
		}
		_, err = stdout.Write(content)
		return 0, true, err
	case cmd[0] == "printenv" && len(cmd) == 2:
		for _, kv := range c.Spec.Env {
			if k, v, _ := strings.Cut(kv, "="); k == cmd[1] {
				fmt.Fprintln(stdout, v)
				return 0, true, nil
			}
		}
		return 1, true, nil
	case cmd[0] == "hostname" && len(cmd) == 1:
		fmt.Fprintln(stdout, c.State.Hostname)
		return 0, true, nil
	case cmd[0] == "sleep" && len(cmd) == 2:
		seconds, convErr := strconv.Atoi(cmd[1])
		if convErr != nil {
			return 0, false, nil
		}
		select {
		case <-time.After(time.Duration(seconds) * time.Second):
			return 0, true, nil
		case <-ctx.Done():
			return -1, true, ctx.Err()
		}
	case cmd[0] == "sh" && len(cmd) == 3 && cmd[1] == "-c":
		return script(cmd[2], stdout, stderr)
	}
	return 0, false, nil
}

// script runs `echo WORDS [>&2]` and `exit N` statements; ok is false for anything else.
func script(s string, stdout, stderr io.Writer) (code int, ok bool, err error) {
	statements := strings.Split(s, ";")
	for _, st := range statements { // refuse what it cannot run before running any of it
		f := strings.Fields(st)
		if len(f) == 0 || (f[0] != "echo" && f[0] != "exit") {
			return 0, false, nil
		}
	}
	for _, st := range statements {
		f := strings.Fields(st)
		if f[0] == "exit" {
			n := 0
			if len(f) > 1 {
				n, _ = strconv.Atoi(f[1])
			}
			return n, true, nil
		}
		out := stdout
		if f[len(f)-1] == ">&2" {
			out, f = stderr, f[:len(f)-1]
		}
		if _, err := fmt.Fprintln(out, strings.Join(f[1:], " ")); err != nil {
			return -1, true, err
		}
	}
	return 0, true, nil
}

func writerOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
