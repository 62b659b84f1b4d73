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
	// FailOutput is what the failing command prints; a kubeadm-like line when empty.
	FailOutput string
	// RejectHAProxyConfig makes `haproxy -c` fail.
	RejectHAProxyConfig bool
	// CRIFailure makes containerd's CRI plugin fail to load in every node, with this error in
	// containerd's journal.
	CRIFailure string
	// Commands records the bootstrap commands run, per node.
	Commands map[string][]string
}

// New returns a simulator and installs it on the fake engine.
func New(rt *fake.Runtime) *Nodes {
	n := &Nodes{Commands: map[string][]string{}}
	rt.SetExec(n.Exec)
	// haproxy's master confirms each configuration it loads in its log.
	isLoadBalancer := func(c *fake.Container) bool { return c.Spec.Labels["io.x-k8s.kind.role"] == "external-load-balancer" }
	rt.OnStart = func(c *fake.Container) {
		if isLoadBalancer(c) {
			c.Logs = append(c.Logs, "[NOTICE]   (1) : Loading success.")
		}
	}
	rt.OnSignal = func(c *fake.Container, signal string) {
		if isLoadBalancer(c) && signal == "SIGHUP" {
			c.Logs = append(c.Logs, "[NOTICE]   (1) : Reloading HAProxy", "[NOTICE]   (1) : Loading success.")
		}
	}
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
		n.mu.Lock()
		cri := "ok"
		if n.CRIFailure != "" {
			cri = "error"
		}
		n.mu.Unlock()
		fmt.Fprintf(stdout, "running\nactive\n%s\n", cri)
		return 0, nil

	case len(cmd) == 3 && cmd[0] == "sh" && strings.HasPrefix(cmd[2], "journalctl -u containerd"):
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.CRIFailure != "" {
			fmt.Fprintf(stdout, "level=warning msg=\"failed to load plugin io.containerd.grpc.v1.cri\" error=%q\n", n.CRIFailure)
		}
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

	case cmd[0] == "cat" && len(cmd) == 2:
		content, ok := c.Files[cmd[1]]
		if !ok {
			fmt.Fprintf(stderr, "cat: %s: No such file or directory\n", cmd[1])
			return 1, nil
		}
		stdout.Write(content)
		return 0, nil

	case joined == "systemctl stop dockyard-bootstrap":
		if c.Data["unit"] == "active" {
			// As systemd does: the plan's processes die where they are (its state still says
			// running) and the unit's ExecStopPost removes the staged files.
			c.Data["unit"] = "inactive"
			cleanup(c)
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

// startBootstrap begins interpreting run.sh (see finish).
func (n *Nodes) startBootstrap(c *fake.Container) {
	if _, locked := c.Files[bootstrapDir+"/lock"]; locked {
		return
	}
	c.Files[bootstrapDir+"/lock"] = nil
	c.Data["started"] = time.Now().Unix()
	c.Data["unit"] = "active"
	for _, l := range strings.Split(string(c.Files[bootstrapDir+"/run.sh"]), "\n") {
		if v, ok := strings.CutPrefix(l, "__dockyard_timeout="); ok {
			c.Data["timeout"], _ = strconv.Atoi(v)
		}
	}
	setState(c, "running", 0, 0, "")
	n.mu.Lock()
	hold := n.HoldBootstrap
	n.mu.Unlock()
	if !hold {
		n.finish(c)
	}
}

// finish interprets run.sh on the fake file tree: "run_file N path mode owner group append"
// installs a staged file; "run_shell N script" runs the script's command blocks, recording
// them (a block containing FailCommand fails, one writing the success sentinel writes it);
// "finish [sentinel]" decides the outcome like the real runner.
func (n *Nodes) finish(c *fake.Container) {
	c.Data["unit"] = "inactive"
	var output strings.Builder
	failStep, failRC, current := 0, 0, 0
	fail := func(step, rc int) {
		if failStep == 0 {
			failStep, failRC = step, rc
		}
	}
	for _, line := range strings.Split(string(c.Files[bootstrapDir+"/run.sh"]), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "run_file":
			current, _ = strconv.Atoi(f[1])
			target := unquote(f[2])
			staged := c.Files[bootstrapDir+"/files/"+f[1]]
			if f[6] == "1" {
				c.Files[target] = append(c.Files[target], staged...)
			} else {
				c.Files[target] = append([]byte(nil), staged...)
			}
			c.Files[target+".mode"] = []byte(f[3])
		case "run_shell":
			for _, b := range commandBlocks(string(c.Files[bootstrapDir+"/"+f[2]])) {
				current = b.step
				setState(c, "running", b.step, 0, "")
				fmt.Fprintf(&output, "dockyard: step %d\n", b.step)
				n.mu.Lock()
				n.Commands[c.Spec.Name] = append(n.Commands[c.Spec.Name], b.text)
				failing := n.FailCommand != "" && strings.Contains(b.text, n.FailCommand)
				n.mu.Unlock()
				if failing {
					failOutput := n.FailOutput
					if failOutput == "" {
						failOutput = "error execution phase preflight: simulated failure\n"
					}
					output.WriteString(failOutput)
					fail(b.step, 1)
					continue
				}
				if i := strings.Index(b.text, "> /run/cluster-api/"); i >= 0 {
					c.Files[strings.Fields(b.text[i+2:])[0]] = []byte("success\n")
				}
			}
		case "finish":
			missing := ""
			if len(f) > 1 {
				if _, ok := c.Files[f[1]]; ok {
					failStep = 0
				} else if failStep == 0 {
					fail(current, 1)
					missing = "missing=" + f[1] + "\n"
				}
			}
			if failStep != 0 {
				c.Files[bootstrapDir+"/output.log"] = []byte(output.String())
				setState(c, "failed", failStep, failRC, missing)
			} else {
				c.Files[bootstrapDir+"/output.log"] = []byte(output.String() + "dockyard: bootstrap succeeded\n")
				setState(c, "succeeded", current, 0, "")
			}
			cleanup(c)
		}
	}
}

type commandBlock struct {
	step int
	text string
}

// commandBlocks splits a generated shell script into its command blocks.
func commandBlocks(script string) []commandBlock {
	var blocks []commandBlock
	var cur *commandBlock
	var body []string
	for _, l := range strings.Split(script, "\n") {
		switch {
		case strings.HasPrefix(l, "__dockyard_step ") && !strings.Contains(l, "{"):
			step, _ := strconv.Atoi(strings.TrimPrefix(l, "__dockyard_step "))
			cur, body = &commandBlock{step: step}, nil
		case strings.HasPrefix(l, "__dockyard_done ") && cur != nil:
			cur.text = strings.TrimSpace(strings.Join(body, "\n"))
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	return blocks
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

func setState(c *fake.Container, phase string, step, exit int, extra string) {
	started, _ := c.Data["started"].(int64)
	timeout, _ := c.Data["timeout"].(int)
	c.Data["step"] = step
	c.Files[bootstrapDir+"/state"] = []byte(fmt.Sprintf("phase=%s\nstep=%d\nstarted=%d\nexit=%d\ntimeout=%d\n%s", phase, step, started, exit, timeout, extra))
}

// unquote undoes bootstrap.ShellQuote for the simple paths the simulator sees.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return strings.ReplaceAll(s[1:len(s)-1], `'"'"'`, "'")
	}
	return s
}
