package docker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pkg/errors"

	"github.com/dockyard-dev/dockyard/docker/internal/runner"
	"github.com/dockyard-dev/dockyard/pkg/bootstrap"
)

// A node's bootstrap plan runs in the node as a transient systemd unit, by the runner in
// docker/internal/runner (scripts embedded as files), which states where it lives and what it
// writes.

// outputTailBytes of the bootstrap output are shown in conditions when a step fails.
const outputTailBytes = 2048

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
	archive, err := runner.Archive(plan, timeout)
	if err != nil {
		return err
	}
	// The upload never replaces the files of a plan that already started: its lock exists.
	r, err := m.exec(ctx, node, bytes.NewReader(archive), m.bootstrap.UploadCommand()...)
	if err != nil {
		return errors.Wrapf(err, "copying the bootstrap plan into node %s", node)
	}
	if err := r.err(node, "copying the bootstrap plan"); err != nil {
		return err
	}
	r, err = m.exec(ctx, node, nil, m.bootstrap.StartCommand(timeout)...)
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
	r, err := m.exec(ctx, node, nil, m.bootstrap.StatusCommand()...)
	if err != nil {
		return BootstrapStatus{}, errors.Wrapf(err, "reading the bootstrap state of node %s", node)
	}
	rs := runner.ParseStatus(r.Stdout)
	st := BootstrapStatus{Step: rs.Step, ExitCode: rs.Exit, MissingSentinel: rs.Missing}
	if rs.Started > 0 {
		st.StartedAt = time.Unix(rs.Started, 0)
	}
	elapsed := time.Duration(rs.Now-rs.Started) * time.Second
	if rs.Timeout > 0 {
		timeout = time.Duration(rs.Timeout) * time.Second
	}

	switch {
	case rs.Phase == "" && !rs.Locked && !rs.UnitActive():
		st.Phase = BootstrapNotStarted
		return st, nil
	case rs.Phase == runner.PhaseSucceeded:
		st.Phase = BootstrapSucceeded
		return st, nil
	case rs.Phase == runner.PhaseFailed:
		st.Phase = BootstrapFailed
	case rs.UnitActive():
		st.Phase = BootstrapRunning
		return st, nil
	case rs.Started > 0 && elapsed >= timeout:
		// Stopped by RuntimeMaxSec: the state file still says running at the step it reached.
		st.Phase = BootstrapTimedOut
	default:
		st.Phase = BootstrapInterrupted
	}
	st.Output = m.bootstrapOutput(ctx, node)
	return st, nil
}

// stopBootstrap stops a running bootstrap (the machine is being deleted).
func (m *Manager) stopBootstrap(ctx context.Context, node string) error {
	_, err := m.exec(ctx, node, nil, m.bootstrap.StopCommand()...)
	return errors.Wrapf(err, "stopping the bootstrap in node %s", node)
}

func (m *Manager) bootstrapOutput(ctx context.Context, node string) string {
	r, err := m.exec(ctx, node, nil, m.bootstrap.OutputCommand(outputTailBytes)...)
	if err != nil {
		return fmt.Sprintf("(output unavailable: %v)", err)
	}
	return bootstrap.Redact(strings.TrimSpace(r.Stdout))
}
