package inmemory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"

	"github.com/dockyard-dev/dockyard/pkg/container"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/nodecmd"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/runner"
)

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
	// Kubeadm, when set, plays a bootstrap command that runs kubeadm (init, join or reset) in
	// a node, with the node locked: what kubeadm prints, and false when it fails.
	Kubeadm func(c *Container, command string) (output string, ok bool)
	// Service, when set, plays nodecmd.StopService and StartService in a node: running is
	// false to stop the service.
	Service func(c *Container, service string, running bool) error
	// NetworkDelay, when set, plays nodecmd.SetNetworkDelay in a node.
	NetworkDelay func(c *Container, d time.Duration)

	// rt is the engine whose containers are the nodes; bootstrap the runner's protocol, which
	// the simulator plays.
	rt        *Runtime
	bootstrap runner.Protocol
}

// NewNodes returns a simulator of the nodes of an engine and installs it there.
func NewNodes(rt *Runtime) *Nodes {
	n := &Nodes{rt: rt, Commands: map[string][]string{}, bootstrap: runner.Default()}
	rt.SetExec(n.Exec)
	rt.ReadOnly = n.ReadOnly
	// haproxy's master confirms each configuration it loads in its log.
	isLoadBalancer := func(c *Container) bool {
		_, service := c.Spec.Labels["dockyard.x-k8s.io/service"]
		return c.Spec.Labels["io.x-k8s.kind.role"] == "external-load-balancer" || service
	}
	rt.OnStart = func(c *Container) {
		if isLoadBalancer(c) {
			c.Logs = append(c.Logs, "[NOTICE]   (1) : Loading success.")
		}
	}
	rt.OnSignal = func(c *Container, signal string) {
		if isLoadBalancer(c) && signal == "SIGHUP" {
			c.Logs = append(c.Logs, "[NOTICE]   (1) : Reloading HAProxy", "[NOTICE]   (1) : Loading success.")
		}
	}
	return n
}

// ReadOnly says whether a command changes nothing in a node: the checks, reads and status
// queries the node layer polls while a node is at rest.
func (n *Nodes) ReadOnly(cmd []string) bool {
	if _, ok := nodecmd.ParseImagesList(cmd); ok {
		return true
	}
	if _, ok := nodecmd.ParseCat(cmd); ok {
		return true
	}
	if _, ok := nodecmd.ParseHAProxyCheck(cmd); ok {
		return true
	}
	return slices.Equal(cmd, nodecmd.Check()) || slices.Equal(cmd, nodecmd.CRIFailure()) || slices.Equal(cmd, n.bootstrap.StatusCommand()) ||
		(len(cmd) > 0 && cmd[0] == "tail" && cmd[len(cmd)-1] == n.bootstrap.Path(runner.OutputFile))
}

// Exec answers one command run in a container: the bootstrap runner's (runner.Protocol) and
// the node layer's (pkg/nodeimage/nodecmd).
func (n *Nodes) Exec(ctx context.Context, c *Container, opts container.ExecOptions) (int, error) {
	cmd := opts.Cmd
	stdout, stderr := writer(opts.Stdout), writer(opts.Stderr)
	var stdin []byte
	if opts.Stdin != nil {
		var err error
		if stdin, err = io.ReadAll(opts.Stdin); err != nil {
			return -1, err
		}
	}
	if code, ok := n.playRunner(c, cmd, stdin, stdout, stderr); ok {
		return code, nil
	}
	if name, ok := nodecmd.ParseImagesList(cmd); ok {
		return listImages(c, name, stdout), nil
	}
	if name, label, ok := nodecmd.ParseImageLabel(cmd); ok {
		imageLabels(c)[name] = label
		return 0, nil
	}
	if file, ok := nodecmd.ParseCat(cmd); ok {
		return cat(c, file, stdout, stderr), nil
	}
	if service, start, ok := nodecmd.ParseService(cmd); ok {
		return n.service(c, service, start, stderr), nil
	}
	if d, ok := nodecmd.ParseNetworkDelay(cmd); ok {
		if n.NetworkDelay != nil {
			n.NetworkDelay(c, d)
		}
		return 0, nil
	}
	if file, ok := nodecmd.ParseHAProxyCheck(cmd); ok {
		return n.checkHAProxy(c, file, stdout), nil
	}
	switch {
	case slices.Equal(cmd, nodecmd.Check()):
		return n.check(c, stdout), nil
	case slices.Equal(cmd, nodecmd.CRIFailure()):
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.CRIFailure != "" {
			fmt.Fprintf(stdout, "level=warning msg=\"failed to load plugin io.containerd.grpc.v1.cri\" error=%q\n", n.CRIFailure)
		}
		return 0, nil
	case slices.Equal(cmd, nodecmd.ImageImport()):
		return importImages(c, stdin, stderr), nil
	}
	if stdin != nil {
		opts.Stdin = bytes.NewReader(stdin)
	}
	if code, ok, err := shell(ctx, c, opts); ok {
		return code, err
	}
	fmt.Fprintf(stderr, "%s: command not found in an in-memory node\n", strings.Join(cmd, " "))
	return 127, nil
}

// check answers the systemd and containerd check: starting for the first BootChecks, then
// running, with the CRI plugin failed when CRIFailure says so.
func (n *Nodes) check(c *Container, stdout io.Writer) int {
	checks, _ := c.Data["bootChecks"].(int)
	c.Data["bootChecks"] = checks + 1
	n.mu.Lock()
	defer n.mu.Unlock()
	if checks < n.BootChecks {
		fmt.Fprintln(stdout, "starting\nactive")
		return 1
	}
	cri := "ok"
	if n.CRIFailure != "" {
		cri = "error"
	}
	fmt.Fprintf(stdout, "running\nactive\n%s\n", cri)
	return 0
}

// listImages prints the node's images of a name as ctr does: REF TYPE DIGEST SIZE PLATFORMS
// LABELS.
func listImages(c *Container, name string, stdout io.Writer) int {
	fmt.Fprintln(stdout, "REF TYPE DIGEST SIZE PLATFORMS LABELS")
	for _, img := range images(c) {
		if img == name {
			fmt.Fprintf(stdout, "%s application/vnd.oci.image.manifest.v1+json sha256:0 1.0 MiB linux/amd64 %s\n", img, cmp.Or(imageLabels(c)[img], "-"))
		}
	}
	return 0
}

// importImages adds the images of an archive to the node's, without their labels.
func importImages(c *Container, stdin []byte, stderr io.Writer) int {
	imgs, err := ImagesInArchive(bytes.NewReader(stdin))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, img := range imgs {
		if named, err := reference.ParseNormalizedNamed(img); err == nil {
			if !slices.Contains(images(c), named.String()) {
				c.Data["images"] = append(images(c), named.String())
			}
			delete(imageLabels(c), named.String())
			c.Data["imports"] = imports(c) + 1
		}
	}
	return 0
}

func cat(c *Container, file string, stdout, stderr io.Writer) int {
	content, ok := c.Files[file]
	if !ok {
		fmt.Fprintf(stderr, "cat: %s: No such file or directory\n", file)
		return 1
	}
	if _, err := stdout.Write(content); err != nil {
		return 1 // as cat does when its output is gone
	}
	return 0
}

// checkHAProxy accepts a configuration file that exists, unless RejectHAProxyConfig.
func (n *Nodes) checkHAProxy(c *Container, file string, stdout io.Writer) int {
	n.mu.Lock()
	reject := n.RejectHAProxyConfig
	n.mu.Unlock()
	if _, ok := c.Files[file]; !ok || reject {
		fmt.Fprintf(stdout, "[ALERT] parsing [%s:1]: unknown keyword\n", file)
		return 1
	}
	return 0
}

// playRunner answers the bootstrap runner's commands (runner.Protocol); ok is false for any
// other command.
func (n *Nodes) playRunner(c *Container, cmd []string, stdin []byte, stdout, stderr io.Writer) (code int, ok bool) {
	switch {
	case slices.Equal(cmd, n.bootstrap.UploadCommand()):
		if _, locked := c.Files[n.bootstrap.Path(runner.LockDir)]; locked {
			return 0, true
		}
		n.cleanup(c)
		if err := ExtractTar(c.Files, n.bootstrap.Dir, bytes.NewReader(stdin)); err != nil {
			fmt.Fprintln(stderr, err)
			return 2, true
		}
		return 0, true

	case slices.Equal(cmd, n.bootstrap.StartCommand(n.planTimeout(c))):
		if c.Data["unit"] == "active" {
			fmt.Fprintf(stderr, "Failed to start transient service unit: Unit %s.service already exists.\n", n.bootstrap.Unit)
			return 1, true
		}
		n.startBootstrap(c)
		return 0, true

	case slices.Equal(cmd, n.bootstrap.StatusCommand()):
		st := runner.ParseStatus(string(c.Files[n.bootstrap.Path(runner.StateFile)]))
		_, st.Locked = c.Files[n.bootstrap.Path(runner.LockDir)]
		unit, _ := c.Data["unit"].(string)
		st.Unit, st.Now = cmp.Or(unit, "inactive"), time.Now().Unix()
		if _, err := stdout.Write(st.Marshal()); err != nil {
			return 1, true
		}
		return 0, true

	case cmd[0] == "tail" && cmd[len(cmd)-1] == n.bootstrap.Path(runner.OutputFile):
		if _, err := stdout.Write(c.Files[n.bootstrap.Path(runner.OutputFile)]); err != nil {
			return 1, true
		}
		return 0, true

	case slices.Equal(cmd, n.bootstrap.StopCommand()):
		if c.Data["unit"] == "active" {
			// As systemd does: the plan's processes die where they are (its state still says
			// running) and the unit's ExecStopPost removes the staged files.
			c.Data["unit"] = "inactive"
			n.cleanup(c)
		}
		return 0, true
	}
	return 0, false
}

func writer(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func images(c *Container) []string {
	imgs, _ := c.Data["images"].([]string)
	return imgs
}

// imageLabels are the labels of the node's images, by name.
func imageLabels(c *Container) map[string]string {
	labels, ok := c.Data["imageLabels"].(map[string]string)
	if !ok {
		labels = map[string]string{}
		c.Data["imageLabels"] = labels
	}
	return labels
}

func imports(c *Container) int {
	n, _ := c.Data["imports"].(int)
	return n
}

// Images returns the images in a node's containerd and how many imports it took.
func (n *Nodes) Images(node string) (names []string, importCount int) {
	n.rt.WithContainer(node, func(c *Container) {
		names, importCount = slices.Clone(images(c)), imports(c)
	})
	return names, importCount
}

// planTimeout is the timeout of the plan uploaded into a node (its start command).
func (n *Nodes) planTimeout(c *Container) time.Duration {
	for _, cmd := range runner.ParsePlan(c.Files[n.bootstrap.Path(runner.PlanFile)]) {
		if cmd.Name == runner.CmdStart && len(cmd.Args) == 1 {
			seconds, _ := strconv.Atoi(cmd.Args[0])
			return time.Duration(seconds) * time.Second
		}
	}
	return 0
}

// startBootstrap begins playing the runner (see finish).
func (n *Nodes) startBootstrap(c *Container) {
	if _, locked := c.Files[n.bootstrap.Path(runner.LockDir)]; locked {
		return
	}
	c.Files[n.bootstrap.Path(runner.LockDir)] = nil
	c.Data["unit"] = "active"
	n.setState(c, runner.State{Phase: runner.PhaseRunning, Started: time.Now().Unix(), Timeout: runner.Seconds(n.planTimeout(c))})
	n.mu.Lock()
	hold := n.HoldBootstrap
	n.mu.Unlock()
	if !hold {
		n.finish(c)
	}
}

// finish plays the runner on the fake file tree, command by command of the plan: CmdFile
// installs a staged file; CmdShell runs the step script's commands, recording them (one
// containing FailCommand fails, one writing the success sentinel writes it); CmdFinish decides
// the outcome like run.sh.
func (n *Nodes) finish(c *Container) {
	c.Data["unit"] = "inactive"
	var output strings.Builder
	failStep, failRC, current := 0, 0, 0
	fail := func(step, rc int) {
		if failStep == 0 {
			failStep, failRC = step, rc
		}
	}
	for _, cmd := range runner.ParsePlan(c.Files[n.bootstrap.Path(runner.PlanFile)]) {
		switch cmd.Name {
		case runner.CmdFile:
			current, _ = strconv.Atoi(cmd.Args[0])
			target := cmd.Args[1]
			staged := c.Files[n.bootstrap.Path(runner.FilesDir+"/"+cmd.Args[0])]
			if cmd.Args[5] == "1" {
				c.Files[target] = append(c.Files[target], staged...)
			} else {
				c.Files[target] = append([]byte(nil), staged...)
			}
			c.Files[target+".mode"] = []byte(cmd.Args[2])
		case runner.CmdShell:
			for _, b := range runner.StepCommands(string(c.Files[n.bootstrap.Path(cmd.Args[1])])) {
				current = b.Step
				n.updateState(c, func(s *runner.State) { s.Step = b.Step })
				fmt.Fprintf(&output, "dockyard: step %d\n", b.Step)
				n.mu.Lock()
				n.Commands[c.Spec.Name] = append(n.Commands[c.Spec.Name], b.Text)
				failing := n.FailCommand != "" && strings.Contains(b.Text, n.FailCommand)
				n.mu.Unlock()
				if failing {
					failOutput := n.FailOutput
					if failOutput == "" {
						failOutput = "error execution phase preflight: simulated failure\n"
					}
					output.WriteString(failOutput)
					fail(b.Step, 1)
					continue
				}
				if n.Kubeadm != nil && strings.Contains(b.Text, "kubeadm ") {
					out, ok := n.Kubeadm(c, b.Text)
					output.WriteString(out)
					if !ok {
						fail(b.Step, 1)
						continue
					}
				}
				if i := strings.Index(b.Text, "> /run/cluster-api/"); i >= 0 {
					c.Files[strings.Fields(b.Text[i+2:])[0]] = []byte("success\n")
				}
			}
		case runner.CmdFinish:
			missing := ""
			if len(cmd.Args) > 0 {
				if _, ok := c.Files[cmd.Args[0]]; ok {
					failStep = 0
				} else if failStep == 0 {
					fail(current, 1)
					missing = cmd.Args[0]
				}
			}
			if failStep != 0 {
				c.Files[n.bootstrap.Path(runner.OutputFile)] = []byte(output.String())
				n.updateState(c, func(s *runner.State) {
					s.Phase, s.Step, s.Exit, s.Missing = runner.PhaseFailed, failStep, failRC, missing
				})
			} else {
				c.Files[n.bootstrap.Path(runner.OutputFile)] = []byte(output.String() + "dockyard: bootstrap succeeded\n")
				n.updateState(c, func(s *runner.State) { s.Phase, s.Step = runner.PhaseSucceeded, current })
			}
			n.cleanup(c)
		}
	}
}

// forget drops what the simulator recorded of a node that was removed.
func (n *Nodes) forget(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.Commands, node)
}

// Complete finishes a held bootstrap of a node.
func (n *Nodes) Complete(node string) bool {
	return n.rt.WithContainer(node, func(c *Container) {
		if c.Data["unit"] == "active" {
			n.finish(c)
		}
	})
}

// BackdateBootstrap moves the start of a node's bootstrap d into the past.
func (n *Nodes) BackdateBootstrap(node string, d time.Duration) bool {
	return n.rt.WithContainer(node, func(c *Container) {
		n.updateState(c, func(s *runner.State) { s.Started -= int64(d.Seconds()) })
	})
}

// cleanup removes the staged files, as the runner and its unit's ExecStopPost do.
func (n *Nodes) cleanup(c *Container) {
	for p := range c.Files {
		if strings.HasPrefix(p, n.bootstrap.Path(runner.FilesDir)+"/") || strings.HasPrefix(p, n.bootstrap.Path(runner.StepsDir)+"/") {
			delete(c.Files, p)
		}
	}
}

func (n *Nodes) setState(c *Container, s runner.State) {
	c.Files[n.bootstrap.Path(runner.StateFile)] = s.Marshal()
}

// updateState changes the node's state file.
func (n *Nodes) updateState(c *Container, change func(*runner.State)) {
	s := runner.ParseStatus(string(c.Files[n.bootstrap.Path(runner.StateFile)])).State
	change(&s)
	n.setState(c, s)
}

// service stops or starts a service of a node (nodecmd.StopService, StartService) through the
// Service hook; a node without the hook has nothing to stop.
func (n *Nodes) service(c *Container, service string, start bool, stderr io.Writer) int {
	if n.Service == nil {
		return 0
	}
	if err := n.Service(c, service, start); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
