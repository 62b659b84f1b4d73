// Package dockertest simulates Dockyard's node and load balancer containers on the fake
// engine: it answers the commands package docker runs in them (systemd checks, image imports,
// bootstrap upload, start and status, haproxy checks) so reconcilers can be unit tested and
// benchmarked without a container engine.
package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/container/fake"
)

const bootstrapDir = "/var/lib/dockyard/bootstrap"

// Nodes simulates the inside of node and load balancer containers.
type Nodes struct {
	mu sync.Mutex
	// BootChecks is how many systemd checks a node answers "starting" before "running".
	BootChecks int
	// HoldBootstrap keeps bootstraps running until Complete is called.
	HoldBootstrap bool
	// FailCommand makes the bootstrap command containing this text exit 1.
	FailCommand string
	// RejectHAProxyConfig makes `haproxy -c` fail.
	RejectHAProxyConfig bool
	// Commands records the bootstrap commands run, per node.
	Commands map[string][]string
}

// New returns a simulator and installs it on the fake engine.
func New(rt *fake.Runtime) *Nodes {
	n := &Nodes{Commands: map[string][]string{}}
	rt.SetExec(n.Exec)
	return n
}

// Exec answers one command run in a container.
func (n *Nodes) Exec(_ context.Context, c *fake.Container, opts container.ExecOptions) (int, error) {
	cmd := opts.Cmd
	stdout, stderr := writer(opts.Stdout), writer(opts.Stderr)
	var stdin []byte
	if opts.Stdin != nil {
		var err error
		if stdin, err = io.ReadAll(opts.Stdin); err != nil {
			return -1, err
		}
	}
	joined := strings.Join(cmd, " ")
	switch {
	case len(cmd) == 3 && cmd[0] == "sh" && strings.Contains(cmd[2], "systemctl is-system-running"):
		checks, _ := c.Data["bootChecks"].(int)
		c.Data["bootChecks"] = checks + 1
		n.mu.Lock()
		boot := n.BootChecks
		n.mu.Unlock()
		if checks < boot {
			fmt.Fprintln(stdout, "starting\nactive")
			return 1, nil
		}
		fmt.Fprintln(stdout, "running\nactive")
		return 0, nil

	case len(cmd) >= 5 && cmd[0] == "ctr" && cmd[3] == "images" && cmd[4] == "list":
		want := strings.TrimPrefix(cmd[len(cmd)-1], "name==")
		for _, img := range images(c) {
			if img == want {
				fmt.Fprintln(stdout, img)
			}
		}
		return 0, nil

	case len(cmd) >= 5 && cmd[0] == "ctr" && cmd[3] == "images" && cmd[4] == "import":
		imgs, err := fake.ImagesInArchive(bytes.NewReader(stdin))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1, nil
		}
		for _, img := range imgs {
			if named, err := reference.ParseNormalizedNamed(img); err == nil {
				c.Data["images"] = append(images(c), named.String())
			}
		}
		return 0, nil

	case len(cmd) == 3 && cmd[0] == "sh" && strings.Contains(cmd[2], "tar -x -f - -C "+bootstrapDir):
		if _, locked := c.Files[bootstrapDir+"/lock"]; locked {
			return 0, nil
		}
		for p := range c.Files {
			if strings.HasPrefix(p, bootstrapDir+"/files/") || strings.HasPrefix(p, bootstrapDir+"/steps/") {
				delete(c.Files, p)
			}
		}
		if err := fake.ExtractTar(c.Files, bootstrapDir, bytes.NewReader(stdin)); err != nil {
			fmt.Fprintln(stderr, err)
			return 2, nil
		}
		return 0, nil

	case cmd[0] == "systemd-run":
		if c.Data["unit"] == "active" {
			fmt.Fprintln(stderr, "Failed to start transient service unit: Unit dockyard-bootstrap.service already exists.")
			return 1, nil
		}
		n.startBootstrap(c)
		return 0, nil

	case len(cmd) == 3 && cmd[0] == "sh" && strings.Contains(cmd[2], bootstrapDir+"/state"):
		stdout.Write(c.Files[bootstrapDir+"/state"])
		if _, ok := c.Files[bootstrapDir+"/lock"]; ok {
			fmt.Fprintln(stdout, "lock=1")
		}
		unit, _ := c.Data["unit"].(string)
		fmt.Fprintf(stdout, "unit=%s\nnow=%d\n", orDefault(unit, "inactive"), time.Now().Unix())
		return 0, nil

	case cmd[0] == "tail":
		stdout.Write(c.Files[bootstrapDir+"/output.log"])
		return 0, nil

	case joined == "systemctl stop dockyard-bootstrap":
		if c.Data["unit"] == "active" {
			c.Data["unit"] = "inactive"
			setState(c, "stopped", stateStep(c), 143)
		}
		return 0, nil

	case cmd[0] == "haproxy" && len(cmd) == 4 && cmd[1] == "-c":
		n.mu.Lock()
		reject := n.RejectHAProxyConfig
		n.mu.Unlock()
		if _, ok := c.Files[cmd[3]]; !ok || reject {
			fmt.Fprintf(stdout, "[ALERT] parsing [%s:1]: unknown keyword\n", cmd[3])
			return 1, nil
		}
		return 0, nil
	}
	fmt.Fprintf(stderr, "dockertest: unexpected command %q\n", cmd)
	return 127, nil
}

func writer(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func images(c *fake.Container) []string {
	imgs, _ := c.Data["images"].([]string)
	return imgs
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// startBootstrap interprets run.sh: "run N put ..." installs a staged file, "run N /bin/sh
// steps/N.sh" records the command. Simulated commands succeed unless FailCommand matches.
func (n *Nodes) startBootstrap(c *fake.Container) {
	if _, locked := c.Files[bootstrapDir+"/lock"]; locked {
		return
	}
	c.Files[bootstrapDir+"/lock"] = nil
	c.Data["started"] = time.Now().Unix()
	c.Data["unit"] = "active"
	c.Data["pending"] = parseRunScript(string(c.Files[bootstrapDir+"/run.sh"]))
	setState(c, "running", 0, 0)
	n.mu.Lock()
	hold := n.HoldBootstrap
	n.mu.Unlock()
	if !hold {
		n.finish(c)
	}
}

type runLine struct {
	step int
	args []string
}

func parseRunScript(script string) []runLine {
	var lines []runLine
	for _, l := range strings.Split(script, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "run" {
			continue
		}
		step, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		lines = append(lines, runLine{step: step, args: f[2:]})
	}
	return lines
}

// finish runs the pending steps of a node's bootstrap.
func (n *Nodes) finish(c *fake.Container) {
	pending, _ := c.Data["pending"].([]runLine)
	c.Data["unit"] = "inactive"
	var output strings.Builder
	for _, l := range pending {
		setState(c, "running", l.step, 0)
		switch l.args[0] {
		case "put":
			// put <n> <path> <mode> <owner> <group> <append>
			staged := c.Files[bootstrapDir+"/files/"+l.args[1]]
			target := unquote(l.args[2])
			if l.args[6] == "1" {
				c.Files[target] = append(c.Files[target], staged...)
			} else {
				c.Files[target] = append([]byte(nil), staged...)
			}
			c.Files[target+".mode"] = []byte(l.args[3])
		default:
			script := string(c.Files[bootstrapDir+"/"+l.args[1]])
			n.mu.Lock()
			n.Commands[c.Spec.Name] = append(n.Commands[c.Spec.Name], strings.TrimSpace(script))
			fail := n.FailCommand != "" && strings.Contains(script, n.FailCommand)
			n.mu.Unlock()
			fmt.Fprintf(&output, "dockyard: step %d\n", l.step)
			if fail {
				fmt.Fprintf(&output, "error execution phase preflight: simulated failure\n")
				c.Files[bootstrapDir+"/output.log"] = []byte(output.String())
				setState(c, "failed", l.step, 1)
				cleanup(c)
				return
			}
		}
	}
	c.Files[bootstrapDir+"/output.log"] = []byte(output.String() + "dockyard: bootstrap succeeded\n")
	setState(c, "succeeded", len(pending), 0)
	cleanup(c)
}

// Complete finishes a held bootstrap of a node.
func (n *Nodes) Complete(rt *fake.Runtime, node string) bool {
	return rt.WithContainer(node, func(c *fake.Container) {
		if c.Data["unit"] == "active" {
			n.finish(c)
		}
	})
}

func cleanup(c *fake.Container) {
	for p := range c.Files {
		if strings.HasPrefix(p, bootstrapDir+"/files/") || strings.HasPrefix(p, bootstrapDir+"/steps/") {
			delete(c.Files, p)
		}
	}
}

func setState(c *fake.Container, phase string, step, exit int) {
	started, _ := c.Data["started"].(int64)
	c.Data["step"] = step
	c.Files[bootstrapDir+"/state"] = []byte(fmt.Sprintf("phase=%s\nstep=%d\nstarted=%d\nexit=%d\n", phase, step, started, exit))
}

func stateStep(c *fake.Container) int {
	s, _ := c.Data["step"].(int)
	return s
}

// unquote undoes bootstrap.ShellQuote for the simple paths the simulator sees.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], `'"'"'`, "'")
	}
	return s
}

// Path joins path elements (exported for tests that inspect simulated files).
func Path(elem ...string) string { return path.Join(elem...) }
