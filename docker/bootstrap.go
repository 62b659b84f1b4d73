package docker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
	"github.com/dockyard-dev/dockyard/pkg/nodeimage/runner"
)

// A node's bootstrap plan runs in the node as a transient systemd unit, by the runner in
// pkg/nodeimage/runner (scripts embedded as files), which states where it lives and what it
// writes.

// outputTailBytes of the bootstrap output are shown in conditions when a step fails.
const outputTailBytes = 2048

// overrun is how long a plan may run past its timeout before the node layer stops it itself:
// systemd's RuntimeMaxSec should have.
const overrun = 30 * time.Second

// startBootstrap copies a plan into the node over stdin and starts it in the background. It
// does nothing when the plan was started before.
func (m *Manager) startBootstrap(ctx context.Context, node string, plan *bootstrap.Plan, timeout time.Duration) error {
	archive, err := runner.Archive(plan, timeout)
	if err != nil {
		return err
	}
	// The upload never replaces the files of a plan that already started: its lock exists.
	upload := command{argv: m.bootstrap.UploadCommand(), stdin: bytes.NewReader(archive), what: "copying the bootstrap plan"}
	if _, err := m.output(ctx, node, upload); err != nil {
		return errors.Wrapf(err, "copying the bootstrap plan into node %s", node)
	}
	r, err := m.run(ctx, node, command{argv: m.bootstrap.StartCommand(timeout)})
	if err != nil {
		return errors.Wrapf(err, "starting the bootstrap in node %s", node)
	}
	if strings.Contains(r.Output, "already") {
		return nil // started before
	}
	return r.err(node, "starting the bootstrap (systemd-run)")
}

// bootstrapStatus is Node.BootstrapStatus.
func (m *Manager) bootstrapStatus(ctx context.Context, node string, timeout time.Duration) (bootstrap.Status, error) {
	r, err := m.run(ctx, node, command{argv: m.bootstrap.StatusCommand()})
	if err != nil {
		return bootstrap.Status{}, errors.Wrapf(err, "reading the bootstrap state of node %s", node)
	}
	rs := runner.ParseStatus(r.Stdout)
	st := bootstrap.Status{Step: rs.Step, ExitCode: rs.Exit, MissingSentinel: rs.Missing}
	if rs.Started > 0 {
		st.StartedAt = time.Unix(rs.Started, 0)
	}
	elapsed := time.Duration(rs.Now-rs.Started) * time.Second
	if rs.Timeout > 0 {
		timeout = time.Duration(rs.Timeout) * time.Second
	}

	switch {
	case rs.Phase == "" && !rs.Locked && !rs.UnitActive():
		st.Phase = bootstrap.NotStarted
		return st, nil
	case rs.Phase == runner.PhaseSucceeded:
		st.Phase = bootstrap.Succeeded
		return st, nil
	case rs.Phase == runner.PhaseFailed:
		st.Phase = bootstrap.Failed
	case rs.UnitActive() && rs.Started > 0 && elapsed > timeout+overrun:
		// systemd's RuntimeMaxSec should have stopped it; make sure, and read it again.
		if _, err := m.run(ctx, node, command{argv: m.bootstrap.StopCommand()}); err != nil {
			return bootstrap.Status{}, errors.Wrapf(err, "stopping the bootstrap in node %s, past its timeout", node)
		}
		st.Phase = bootstrap.Running
		return st, nil
	case rs.UnitActive():
		st.Phase = bootstrap.Running
		return st, nil
	case rs.Started > 0 && elapsed >= timeout:
		// Stopped by RuntimeMaxSec: the state file still says running at the step it reached.
		st.Phase = bootstrap.TimedOut
	default:
		st.Phase = bootstrap.Interrupted
	}
	st.Output = m.bootstrapOutput(ctx, node)
	return st, nil
}

func (m *Manager) bootstrapOutput(ctx context.Context, node string) string {
	r, err := m.run(ctx, node, command{argv: m.bootstrap.OutputCommand(outputTailBytes)})
	if err != nil {
		return fmt.Sprintf("(output unavailable: %v)", err)
	}
	return bootstrap.Redact(strings.TrimSpace(r.Stdout))
}
