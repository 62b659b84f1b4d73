package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/container"
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
}

// StartBootstrap copies a plan into the node over stdin and starts it in the background. It
// does nothing when the plan was started before.
func (m *Manager) StartBootstrap(ctx context.Context, node string, plan *bootstrap.Plan, timeout time.Duration) error {
	archive, err := planArchive(plan)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	// Never replace the files of a plan that already started: its lock directory exists.
	upload := fmt.Sprintf("test -d %[1]s/lock && exit 0; mkdir -p -m 0700 %[1]s && rm -rf %[1]s/files %[1]s/steps && tar -x -f - -C %[1]s", bootstrapDir)
	code, err := m.runtime.Exec(ctx, node, container.ExecOptions{
		Cmd: []string{"sh", "-c", upload}, Stdin: bytes.NewReader(archive), Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return errors.Wrapf(err, "copying the bootstrap plan into node %s", node)
	}
	if code != 0 {
		return errors.Errorf("copying the bootstrap plan into node %s: exit %d: %s", node, code, lastLines(out.String(), 5))
	}

	out.Reset()
	runtimeMax := int(timeout.Round(time.Second).Seconds())
	if runtimeMax < 1 {
		runtimeMax = 1
	}
	code, err = m.runtime.Exec(ctx, node, container.ExecOptions{
		Cmd: []string{"systemd-run", "--unit=" + bootstrapUnit, "--description=Dockyard bootstrap",
			"--collect", "--property=RuntimeMaxSec=" + strconv.Itoa(runtimeMax),
			"--setenv=HOME=/root", "/bin/sh", bootstrapDir + "/run.sh"},
		Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return errors.Wrapf(err, "starting the bootstrap in node %s", node)
	}
	if code != 0 && !strings.Contains(out.String(), "already") {
		return errors.Errorf("starting the bootstrap in node %s: systemd-run exited %d: %s", node, code, lastLines(out.String(), 5))
	}
	return nil
}

// GetBootstrapStatus reads the state of a node's bootstrap. A plan that stopped running
// without finishing timed out when it ran longer than timeout, else it was interrupted (the
// node restarted).
func (m *Manager) GetBootstrapStatus(ctx context.Context, node string, timeout time.Duration) (BootstrapStatus, error) {
	var out bytes.Buffer
	script := fmt.Sprintf(`cat %[1]s/state 2>/dev/null; test -d %[1]s/lock && echo lock=1; echo "unit=$(systemctl is-active %[2]s 2>/dev/null)"; echo "now=$(date +%%s)"`,
		bootstrapDir, bootstrapUnit)
	if _, err := m.runtime.Exec(ctx, node, container.ExecOptions{Cmd: []string{"sh", "-c", script}, Stdout: &out}); err != nil {
		return BootstrapStatus{}, errors.Wrapf(err, "reading the bootstrap state of node %s", node)
	}
	kv := parseKeyValues(out.String())
	st := BootstrapStatus{Step: atoi(kv["step"]), ExitCode: atoi(kv["exit"])}
	if started := atoi(kv["started"]); started > 0 {
		st.StartedAt = time.Unix(int64(started), 0)
	}
	elapsed := time.Duration(atoi(kv["now"])-atoi(kv["started"])) * time.Second
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
		// Stopped by RuntimeMaxSec (phase "stopped"), or killed before it could say so.
		st.Phase = BootstrapTimedOut
	default:
		st.Phase = BootstrapInterrupted
	}
	st.Output = m.bootstrapOutput(ctx, node)
	return st, nil
}

// StopBootstrap stops a running bootstrap (the machine is being deleted).
func (m *Manager) StopBootstrap(ctx context.Context, node string) error {
	_, err := m.runtime.Exec(ctx, node, container.ExecOptions{Cmd: []string{"systemctl", "stop", bootstrapUnit}})
	return errors.Wrapf(err, "stopping the bootstrap in node %s", node)
}

func (m *Manager) bootstrapOutput(ctx context.Context, node string) string {
	var out bytes.Buffer
	_, err := m.runtime.Exec(ctx, node, container.ExecOptions{
		Cmd:    []string{"tail", "-c", strconv.Itoa(outputTailBytes), bootstrapDir + "/output.log"},
		Stdout: &out,
	})
	if err != nil {
		return fmt.Sprintf("(output unavailable: %v)", err)
	}
	return RedactSecrets(strings.TrimSpace(out.String()))
}

var secretPatterns = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)`), "<redacted private key>"},
	{regexp.MustCompile(`\b[a-z0-9]{6}\.[a-z0-9]{16}\b`), "<redacted bootstrap token>"},
	{regexp.MustCompile(`(certificate-key[ =:"']*)[0-9a-fA-F]{64}`), "${1}<redacted certificate key>"},
}

// RedactSecrets hides bootstrap tokens, certificate keys and private keys in command output
// before it is shown in a condition or a log.
func RedactSecrets(s string) string {
	for _, p := range secretPatterns {
		s = p.re.ReplaceAllString(s, p.with)
	}
	return s
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

// planArchive renders a plan as a tar archive: run.sh, one script per command step and one
// staged file per file step. Content travels only inside the archive, never in arguments.
func planArchive(plan *bootstrap.Plan) ([]byte, error) {
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
	script.WriteString(runScriptHeader)
	for i, step := range plan.Steps {
		n := i + 1
		switch {
		case step.File != nil:
			f := step.File
			if err := add(fmt.Sprintf("files/%d", n), 0o600, f.Content); err != nil {
				return nil, errors.Wrap(err, "writing the bootstrap archive")
			}
			mode := f.Mode.Perm()
			if mode == 0 {
				mode = 0o644
			}
			appendFlag := "0"
			if f.Append {
				appendFlag = "1"
			}
			fmt.Fprintf(&script, "run %d put %d %s %04o %s %s %s\n", n, n, bootstrap.ShellQuote(f.Path), mode,
				bootstrap.ShellQuote(orDefault(f.Owner, "root")), bootstrap.ShellQuote(orDefault(f.Group, "root")), appendFlag)
		case step.Command != nil:
			body := step.Command.Script
			if len(step.Command.Args) > 0 {
				body = "exec " + step.Command.String()
			}
			if err := add(fmt.Sprintf("steps/%d.sh", n), 0o600, []byte(body+"\n")); err != nil {
				return nil, errors.Wrap(err, "writing the bootstrap archive")
			}
			fmt.Fprintf(&script, "run %d /bin/sh steps/%d.sh\n", n, n)
		default:
			return nil, errors.Errorf("bootstrap step %d has neither a file nor a command", n)
		}
	}
	script.WriteString("finish\n")
	if err := add("run.sh", 0o700, []byte(script.String())); err != nil {
		return nil, errors.Wrap(err, "writing the bootstrap archive")
	}
	if err := tw.Close(); err != nil {
		return nil, errors.Wrap(err, "writing the bootstrap archive")
	}
	return buf.Bytes(), nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// runScriptHeader is the start of run.sh: the step runner. State goes to ./state as key=value
// lines that GetBootstrapStatus reads; output goes to ./output.log.
const runScriptHeader = `#!/bin/sh
# Written by Dockyard: runs this node's bootstrap data, once.
set -u
cd /var/lib/dockyard/bootstrap || exit 1
if ! mkdir lock 2>/dev/null; then
	echo "dockyard: the bootstrap started before; it never runs twice" >&2
	exit 0
fi
started=$(date +%s)
current=0
state() {
	printf 'phase=%s\nstep=%s\nstarted=%s\nexit=%s\n' "$1" "$2" "$started" "$3" > state.tmp && mv -f state.tmp state
}
cleanup() {
	# Staged files hold private keys; the installed copies are the only ones left.
	rm -rf files steps
}
trap 'state stopped "$current" 143; cleanup; exit 143' TERM INT
put() {
	# put <staged file> <path> <mode> <owner> <group> <append>
	mkdir -p "$(dirname "$2")" || return 1
	if [ "$6" = 1 ]; then
		cat "files/$1" >> "$2" || return 1
	else
		install -m "$3" "files/$1" "$2" || return 1
	fi
	chmod "$3" "$2" || return 1
	chown "$4:$5" "$2" || echo "dockyard: warning: cannot set owner $4:$5 of $2" >&2
}
run() {
	current=$1
	shift
	state running "$current" 0
	echo "dockyard: step $current" >> output.log
	"$@" >> output.log 2>&1 < /dev/null
	rc=$?
	if [ "$rc" -ne 0 ]; then
		state failed "$current" "$rc"
		cleanup
		exit "$rc"
	fi
}
finish() {
	state succeeded "$current" 0
	cleanup
	echo "dockyard: bootstrap succeeded" >> output.log
}
state running 0 0
`
