package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// The bootstrap plan runs inside the node as a transient systemd unit, so it goes on while the
// manager restarts, and leaves its state on the node's /var volume, so it survives a restart of
// the node container too. A lock directory makes sure it starts at most once per node: kubeadm
// init or join must never run twice.
const (
	bootstrapDir  = "/var/lib/dockyard/bootstrap"
	bootstrapUnit = "dockyard-bootstrap"
	// outputTailBytes of the bootstrap output are shown in conditions when a step fails.
	outputTailBytes = 2048
)

// BootstrapPhase is where a node's bootstrap is.
type BootstrapPhase string

// Bootstrap phases.
const (
	BootstrapNotStarted  BootstrapPhase = "NotStarted"
	BootstrapRunning     BootstrapPhase = "Running"
	BootstrapSucceeded   BootstrapPhase = "Succeeded"
	BootstrapFailed      BootstrapPhase = "Failed"
	BootstrapTimedOut    BootstrapPhase = "TimedOut"
	BootstrapInterrupted BootstrapPhase = "Interrupted"
)

// BootstrapStatus is the observed state of a node's bootstrap.
type BootstrapStatus struct {
	Phase BootstrapPhase
	// Step is the 1-based index of the plan step running, failed or last run.
	Step int
	// StartedAt is when the plan started in the node.
	StartedAt time.Time
	// ExitCode of the failed step.
	ExitCode int
	// Output is the tail of the plan's output when it failed or timed out, with secrets
	// (bootstrap tokens, certificate keys, private keys) redacted.
	Output string
	// MissingSentinel names Cluster API's success sentinel when the plan finished without
	// writing it (kubeadm did not succeed although no command reported a failure first).
	MissingSentinel string
}

// startBootstrap copies a plan into the node over stdin and starts it in the background. It
// does nothing when the plan was started before.
func (m *Manager) startBootstrap(ctx context.Context, node string, plan *bootstrap.Plan, timeout time.Duration) error {
	runtimeMax := int(timeout.Round(time.Second).Seconds())
	if runtimeMax < 1 {
		runtimeMax = 1
	}
	archive, err := planArchive(plan, runtimeMax)
	if err != nil {
		return err
	}
	// Never replace the files of a plan that already started: its lock directory exists.
	upload := fmt.Sprintf("test -d %[1]s/lock && exit 0; mkdir -p -m 0700 %[1]s && rm -rf %[1]s/files %[1]s/steps && tar -x -f - -C %[1]s", bootstrapDir)
	r, err := m.exec(ctx, node, bytes.NewReader(archive), "sh", "-c", upload)
	if err != nil {
		return errors.Wrapf(err, "copying the bootstrap plan into node %s", node)
	}
	if err := r.err(node, "copying the bootstrap plan"); err != nil {
		return err
	}

	r, err = m.exec(ctx, node, nil, "systemd-run", "--unit="+bootstrapUnit, "--description=Dockyard bootstrap",
		"--collect", "--property=RuntimeMaxSec="+strconv.Itoa(runtimeMax),
		"--property=ExecStopPost=/bin/rm -rf "+bootstrapDir+"/files "+bootstrapDir+"/steps",
		"--setenv=HOME=/root", "/bin/sh", bootstrapDir+"/run.sh")
	if err != nil {
		return errors.Wrapf(err, "starting the bootstrap in node %s", node)
	}
	if strings.Contains(r.Output, "already") {
		return nil // started before
	}
	return r.err(node, "starting the bootstrap (systemd-run)")
}

// bootstrapStatus reads the state of a node's bootstrap. A plan that stopped running
// without finishing timed out when it ran longer than its timeout (the one it was started
// with, recorded in the node; timeout is used for plans that recorded none), else it was
// interrupted (the node restarted).
func (m *Manager) bootstrapStatus(ctx context.Context, node string, timeout time.Duration) (BootstrapStatus, error) {
	// The unit's state is read before the state file: a plan writes its final state before its
	// unit ends, so a unit seen ended means the state file read after it is final. (The other
	// order can read "running" from the file and then an ended unit: Interrupted, wrongly.)
	script := fmt.Sprintf(`echo "unit=$(systemctl is-active %[2]s 2>/dev/null)"; cat %[1]s/state 2>/dev/null; test -d %[1]s/lock && echo lock=1; echo "now=$(date +%%s)"`,
		bootstrapDir, bootstrapUnit)
	r, err := m.exec(ctx, node, nil, "sh", "-c", script)
	if err != nil {
		return BootstrapStatus{}, errors.Wrapf(err, "reading the bootstrap state of node %s", node)
	}
	kv := parseKeyValues(r.Stdout)
	st := BootstrapStatus{Step: atoi(kv["step"]), ExitCode: atoi(kv["exit"]), MissingSentinel: kv["missing"]}
	if started := atoi(kv["started"]); started > 0 {
		st.StartedAt = time.Unix(int64(started), 0)
	}
	elapsed := time.Duration(atoi(kv["now"])-atoi(kv["started"])) * time.Second
	if recorded := atoi(kv["timeout"]); recorded > 0 {
		timeout = time.Duration(recorded) * time.Second
	}
	unitActive := kv["unit"] == "active" || kv["unit"] == "activating"

	switch phase := kv["phase"]; {
	case phase == "" && kv["lock"] == "" && !unitActive:
		st.Phase = BootstrapNotStarted
		return st, nil
	case phase == "succeeded":
		st.Phase = BootstrapSucceeded
		return st, nil
	case phase == "failed":
		st.Phase = BootstrapFailed
	case unitActive:
		st.Phase = BootstrapRunning
		return st, nil
	case kv["started"] != "" && elapsed >= timeout:
		// Stopped by RuntimeMaxSec: the state file still says "running" at the step it reached.
		st.Phase = BootstrapTimedOut
	default:
		st.Phase = BootstrapInterrupted
	}
	st.Output = m.bootstrapOutput(ctx, node)
	return st, nil
}

// stopBootstrap stops a running bootstrap (the machine is being deleted).
func (m *Manager) stopBootstrap(ctx context.Context, node string) error {
	_, err := m.exec(ctx, node, nil, "systemctl", "stop", bootstrapUnit)
	return errors.Wrapf(err, "stopping the bootstrap in node %s", node)
}

func (m *Manager) bootstrapOutput(ctx context.Context, node string) string {
	r, err := m.exec(ctx, node, nil, "tail", "-c", strconv.Itoa(outputTailBytes), bootstrapDir+"/output.log")
	if err != nil {
		return fmt.Sprintf("(output unavailable: %v)", err)
	}
	return bootstrap.Redact(strings.TrimSpace(r.Stdout))
}

func parseKeyValues(s string) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			kv[k] = v
		}
	}
	return kv
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// successSentinel is the file Cluster API's bootstrap data writes once kubeadm succeeded.
const successSentinel = "/run/cluster-api/bootstrap-success.complete"

// planArchive renders a plan as a tar archive: run.sh, one staged file per file step and one
// shell script per run of consecutive command steps. Content travels only inside the archive,
// never in arguments.
//
// Like cloud-init, consecutive commands run in one shell (cd and export carry over) and a
// failing command does not stop the ones after it; the first failure is recorded for the
// condition. When the data writes Cluster API's success sentinel, the bootstrap succeeded if
// and only if the sentinel exists at the end; otherwise, if and only if nothing failed.
func planArchive(plan *bootstrap.Plan, timeoutSeconds int) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, content []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(content)
		return err
	}
	for _, dir := range []string{"files/", "steps/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o700, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, errors.Wrap(err, "writing the bootstrap archive")
		}
	}

	var script strings.Builder
	fmt.Fprintf(&script, runScriptHeader, timeoutSeconds)
	sentinel := false
	var shell *strings.Builder
	shellFirst := 0
	flushShell := func() error {
		if shell == nil {
			return nil
		}
		name := fmt.Sprintf("steps/shell-%d.sh", shellFirst)
		if err := add(name, 0o600, []byte(shell.String())); err != nil {
			return err
		}
		fmt.Fprintf(&script, "run_shell %d %s\n", shellFirst, name)
		shell = nil
		return nil
	}
	for i, step := range plan.Steps {
		n := i + 1
		switch {
		case step.File != nil:
			if err := flushShell(); err != nil {
				return nil, errors.Wrap(err, "writing the bootstrap archive")
			}
			f := step.File
			if f.Path == successSentinel {
				sentinel = true
			}
			if err := add(fmt.Sprintf("files/%d", n), 0o600, f.Content); err != nil {
				return nil, errors.Wrap(err, "writing the bootstrap archive")
			}
			appendFlag := "0"
			if f.Append {
				appendFlag = "1"
			}
			fmt.Fprintf(&script, "run_file %d %s %04o %s %s %s\n", n, bootstrap.ShellQuote(f.Path), fileMode(f.Mode),
				bootstrap.ShellQuote(orDefault(f.Owner, "root")), bootstrap.ShellQuote(orDefault(f.Group, "root")), appendFlag)
		case step.Command != nil:
			body := step.Command.Script
			if len(step.Command.Args) > 0 {
				body = step.Command.String()
			}
			if strings.Contains(body, successSentinel) {
				sentinel = true
			}
			if shell == nil {
				shell, shellFirst = &strings.Builder{}, n
				shell.WriteString(shellScriptHeader)
			}
			fmt.Fprintf(shell, "__dockyard_step %d\n%s\n__dockyard_done %d $?\n", n, strings.TrimRight(body, "\n"), n)
		default:
			return nil, errors.Errorf("bootstrap step %d has neither a file nor a command", n)
		}
	}
	if err := flushShell(); err != nil {
		return nil, errors.Wrap(err, "writing the bootstrap archive")
	}
	if sentinel {
		fmt.Fprintf(&script, "finish %s\n", successSentinel)
	} else {
		script.WriteString("finish\n")
	}
	if err := add("run.sh", 0o700, []byte(script.String())); err != nil {
		return nil, errors.Wrap(err, "writing the bootstrap archive")
	}
	if err := tw.Close(); err != nil {
		return nil, errors.Wrap(err, "writing the bootstrap archive")
	}
	return buf.Bytes(), nil
}

// fileMode returns a file mode as the octal number chmod takes, special bits included.
func fileMode(m os.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runScriptHeader is the start of run.sh, the step runner. State goes to ./state as key=value
// lines that GetBootstrapStatus reads; the first failure to ./failure; output to ./output.log.
const runScriptHeader = `#!/bin/sh
# Written by Dockyard: runs this node's bootstrap data, once.
set -u
cd /var/lib/dockyard/bootstrap || exit 1
if ! mkdir lock 2>/dev/null; then
	echo "dockyard: the bootstrap started before; it never runs twice" >&2
	exit 0
fi
__dockyard_started=$(date +%%s)
__dockyard_timeout=%d
export __dockyard_started __dockyard_timeout
current=0
state() {
	printf 'phase=%%s\nstep=%%s\nstarted=%%s\nexit=%%s\ntimeout=%%s\n%%s' "$1" "$2" "$__dockyard_started" "$3" "$__dockyard_timeout" "${4:-}" > state.tmp && mv -f state.tmp state
}
cleanup() {
	# Staged files hold private keys; the installed copies are the only ones left. The unit's
	# ExecStopPost removes them too, when the plan was stopped or killed: no trap here, because
	# systemd's SIGTERM on timeout also reaches whatever a trap forks.
	rm -rf files steps
}
failed() {
	# The first failure is the one a user needs to see.
	[ -e failure ] || echo "$1 $2" > failure
}
run_file() {
	# run_file <step> <path> <mode> <owner> <group> <append>
	current=$1
	echo "$1" > step
	state running "$1" 0
	echo "dockyard: step $1: write $2" >> output.log
	{
		mkdir -p "$(dirname "$2")" &&
		if [ "$6" = 1 ]; then cat "files/$1" >> "$2"; else install -m "$3" "files/$1" "$2"; fi &&
		chmod "$3" "$2"
	} >> output.log 2>&1 || { failed "$1" 1; return; }
	chown "$4:$5" "$2" >> output.log 2>&1 || echo "dockyard: warning: cannot set owner $4:$5 of $2" >> output.log
}
run_shell() {
	# run_shell <first step> <script>: consecutive commands in one shell, like cloud-init
	current=$1
	echo "$1" > step
	state running "$1" 0
	# In /, like cloud-init: bootstrap data may name files relative to it (./script.sh).
	(cd / && HOME=${HOME:-/root} exec /bin/sh "/var/lib/dockyard/bootstrap/$2") >> output.log 2>&1 < /dev/null
	rc=$?
	current=$(cat step)
	if [ "$rc" -ne 0 ]; then failed "$current" "$rc"; fi
}
finish() {
	# finish [sentinel]: with a sentinel, it alone decides; a missing sentinel is reported as
	# such only when no command failed before.
	missing=""
	if [ $# -gt 0 ]; then
		if [ -e "$1" ]; then
			rm -f failure
		elif [ ! -e failure ]; then
			failed "$current" 1
			missing="missing=$1
"
		fi
	fi
	if [ -e failure ]; then
		read -r step rc < failure
		state failed "$step" "$rc" "$missing"
		for unit in $(systemctl list-units --state=failed --no-legend --plain 2>/dev/null | cut -d' ' -f1); do
			echo "dockyard: journal of failed unit $unit:"
			journalctl --no-pager -n 30 -u "$unit" 2>&1
		done >> output.log
		cleanup
		exit "$rc"
	fi
	state succeeded "$current" 0
	cleanup
	echo "dockyard: bootstrap succeeded" >> output.log
}
state running 0 0
`

// shellScriptHeader starts each script of consecutive commands: helpers that record the
// running step and the first failing one.
const shellScriptHeader = `# Written by Dockyard: bootstrap commands, run in one shell like cloud-init's runcmd.
__dockyard_step() {
	echo "$1" > /var/lib/dockyard/bootstrap/step
	printf 'phase=running\nstep=%s\nstarted=%s\nexit=0\ntimeout=%s\n' "$1" "$__dockyard_started" "$__dockyard_timeout" > /var/lib/dockyard/bootstrap/state.tmp &&
		mv -f /var/lib/dockyard/bootstrap/state.tmp /var/lib/dockyard/bootstrap/state
	echo "dockyard: step $1" >> /var/lib/dockyard/bootstrap/output.log
}
__dockyard_done() {
	if [ "$2" -ne 0 ] && [ ! -e /var/lib/dockyard/bootstrap/failure ]; then
		echo "$1 $2" > /var/lib/dockyard/bootstrap/failure
	fi
}
`
